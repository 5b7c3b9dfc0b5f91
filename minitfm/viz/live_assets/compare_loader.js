// The inline script of a comparison's cell output (minitfm.viz.compare_box.LiveCompare fills __ID__ and __NAMES__):
// it loads the engine and every compared model's asset from the site's _assets/live/ (the page's data-content_root
// says where that is), each once per page (loader.js shares the list), and mounts the comparison.
(function () {
  var root = document.getElementById("__ID__"), names = __NAMES__;
  if (!root || root.getAttribute("data-minitfm-ready")) { return; }
  root.setAttribute("data-minitfm-ready", "1");
  var status = root.querySelector("[data-minitfm-live-status]"), zh = /^zh/i.test(document.documentElement.lang || "");
  var ns = window.minitfmLive, base = document.documentElement.getAttribute("data-content_root");
  function fail(en, cn) { status.textContent = zh ? cn : en; }
  function start() { try { window.minitfmLive.mountCompare(root); } catch (e) { fail("The comparison could not start: " + e.message, "比较无法启动：" + e.message); } }
  if (ns && ns.mountCompare && ns.assets && names.every(function (n) { return ns.assets[n]; })) { start(); return; }
  if (base === null) { fail("The comparison runs on the book's web page, which serves the models' weights; in a notebook, show live_compare(inline=True).",
                            "比较在本书的网页上运行（网页提供模型的权重）；在 notebook 中请显示 live_compare(inline=True)。"); return; }
  var pending = window.minitfmLiveLoading = window.minitfmLiveLoading || {};
  function load(src, next) {
    if (pending[src] === true) { next(); return; }
    if (pending[src]) { pending[src].push(next); return; }
    pending[src] = [next];
    var s = document.createElement("script");
    s.src = src;
    s.onload = function () { var wait = pending[src]; pending[src] = true; wait.forEach(function (f) { f(); }); };
    s.onerror = function () { fail("Could not load " + src + " (the site's live-model files are missing).", "无法加载 " + src + "（网站缺少实时模型的文件）。"); };
    document.head.appendChild(s);
  }
  function each(i) { if (i === names.length) { start(); } else { load(base + "_assets/live/" + names[i] + ".js", function () { each(i + 1); }); } }
  load(base + "_assets/live/live_model.js", function () { each(0); });
})();
