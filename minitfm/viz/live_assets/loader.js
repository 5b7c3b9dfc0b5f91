// The inline script of a live explorer's cell output (minitfm.viz.live_model.LiveExplorer fills __ID__ and __NAME__):
// it loads the engine and the asset from the site's _assets/live/ (the page's data-content_root says where that is),
// once per page, and mounts the explorer; outside the book's pages it says where the explorer runs.
(function () {
  var root = document.getElementById("__ID__"), name = "__NAME__";
  if (!root || root.getAttribute("data-minitfm-ready")) { return; }
  root.setAttribute("data-minitfm-ready", "1");
  var status = root.querySelector("[data-minitfm-live-status]"), zh = /^zh/i.test(document.documentElement.lang || "");
  var ns = window.minitfmLive, base = document.documentElement.getAttribute("data-content_root");
  function fail(en, cn) { status.textContent = zh ? cn : en; }
  function start() { try { window.minitfmLive.mount(root); } catch (e) { fail("The live model could not start: " + e.message, "实时模型无法启动：" + e.message); } }
  if (ns && ns.mount && ns.assets && ns.assets[name]) { start(); return; }
  if (base === null) { fail("The live model runs on the book's web page, which serves its weights; in a notebook, show live_explorer(inline=True).",
                            "实时模型在本书的网页上运行（网页提供它的权重）；在 notebook 中请显示 live_explorer(inline=True)。"); return; }
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
  load(base + "_assets/live/live_model.js", function () { load(base + "_assets/live/" + name + ".js", start); });
})();
