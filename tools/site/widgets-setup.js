/* minitfm book: loaded just before require.js and the Jupyter widgets' embed-amd.js on pages that
 * carry widget state (see nb_ipywidgets_js in _config.yml).  Staged into _assets/widgets/.
 *
 * 1. RequireJS's base URL is set to this folder.  The widget bundles derive their webpack public
 *    path from their AMD module URI, so their icon fonts then load from
 *    _assets/widgets/@jupyter-widgets/... inside the site instead of a path next to each page.
 * 2. ipywidgets 8 typesets widget labels with the MathJax 2 API (MathJax.Hub.Queue) while the book
 *    loads MathJax 3: provide Hub.Queue on whatever object window.MathJax becomes, translated to
 *    MathJax 3's typesetPromise.
 */
(function () {
  "use strict";
  var here = document.currentScript.src.replace(/[^/]*$/, "");
  window.require = { baseUrl: here };

  function typeset(element) {
    var mj = window.MathJax;
    if (mj && typeof mj.typesetPromise === "function") {
      mj.typesetPromise(element ? [element] : undefined).catch(function () {});
    } else {
      window.addEventListener("load", function () { typeset(element); }, { once: true });
    }
  }
  function withHub(mj) {
    if (mj && typeof mj === "object" && !mj.Hub) {
      Object.defineProperty(mj, "Hub", {
        configurable: true, enumerable: false,
        value: { Queue: function (job) { typeset(Array.isArray(job) ? job[2] : undefined); } },
      });
    }
    return mj;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true, enumerable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
})();
