/* minitfm book: loaded just before require.js and the Jupyter widgets' embed-amd.js on pages that
 * carry widget state (see nb_ipywidgets_js in _config.yml).  Staged into _assets/widgets/.
 *
 * 1. RequireJS's base URL is set to this folder.  The widget bundles derive their webpack public
 *    path from their AMD module URI, so their icon fonts then load from
 *    _assets/widgets/@jupyter-widgets/... inside the site instead of a path next to each page.
 * 2. ipywidgets 8 typesets widget labels with the MathJax 2 API (MathJax.Hub.Queue) while the book
 *    loads MathJax 3: provide Hub.Queue on whatever object window.MathJax becomes, translated to
 *    MathJax 3's typesetPromise.
 * 3. ipywidgets 8 sliders (noUiSlider) give their handle role="slider" but no accessible name: the
 *    widget's description <label> is not tied to it, and ipywidgets has no option for it.  Each
 *    handle without a name gets aria-label = its widget's description (axe: aria-input-field-name).
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
  function nameSliderHandles() {
    var handles = document.querySelectorAll('.noUi-handle[role="slider"]:not([aria-label]):not([aria-labelledby])');
    Array.prototype.forEach.call(handles, function (handle) {
      var widget = handle.closest(".widget-slider, .jupyter-widgets");
      var label = widget && widget.querySelector(".widget-label");
      var name = label && (label.textContent.trim() || (label.getAttribute("title") || "").trim());
      if (name) { handle.setAttribute("aria-label", name); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    nameSliderHandles();
    new MutationObserver(nameSliderHandles).observe(document.body, { childList: true, subtree: true });
  });

  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true, enumerable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
})();
