// The browser side of minitfm.static_explorers: one small, dependency-free JavaScript engine.
//
// It reads the explorer's JSON spec (controls, base64 float32 arrays, label lists, views, readouts)
// from the <script type="application/json" data-minitfm-data> next to it, builds the controls and
// draws every view on a <canvas>: heatmaps (with hover values and a colour bar), line charts and bar
// charts. It computes nothing but positions and colours: every number shown was computed in Python.
//
// static_explorers.py embeds this file inline in each explorer's HTML (the pages need no URL), after
// dropping these leading // comment lines and replacing two placeholders: __ROOT_ID__ (the explorer's
// element id) and __VIRIDIS__ (the colour map, a JSON list of [r, g, b]). Notebook outputs embed the
// exact text, so any change here means re-executing the notebooks that show a static explorer.

(function () {
  "use strict";
  var me = document.currentScript;
  var root = me && me.parentNode && me.parentNode.hasAttribute &&
      me.parentNode.hasAttribute("data-minitfm-explorer") ? me.parentNode : document.getElementById("__ROOT_ID__");
  if (!root || root.getAttribute("data-minitfm-ready")) { return; }
  root.setAttribute("data-minitfm-ready", "1");
  var spec = JSON.parse(root.querySelector("script[data-minitfm-data]").textContent);
  var VIRIDIS = __VIRIDIS__;
  var COLORS = ["#21908d", "#440154", "#e07b39", "#8c96a3"];
  function seriesColor(sr, k) { return sr.color || COLORS[k % COLORS.length]; }
  var FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', 'PingFang SC', sans-serif";

  function decode(a) {
    var bin = atob(a.b64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
    var dv = new DataView(bytes.buffer), out = new Float32Array(bytes.length / 4);
    for (var j = 0; j < out.length; j++) { out[j] = dv.getFloat32(4 * j, true); }
    return {shape: a.shape, data: out};
  }
  var arrays = {}, state = {};
  Object.keys(spec.arrays).forEach(function (k) { arrays[k] = decode(spec.arrays[k]); });
  spec.controls.forEach(function (c) { state[c.key] = c.value; });

  function control(key) { return spec.controls.filter(function (c) { return c.key === key; })[0]; }
  function pick(ref) { return ref == null || typeof ref === "string" ? ref : ref.names[state[ref.by]]; }
  function flat(keys) {
    return keys.reduce(function (i, k) { return i * control(k).options.length + state[k]; }, 0);
  }
  function text(t) { return t == null ? "" : typeof t === "string" ? t : t.texts[flat(t.by)]; }
  function slice(ref, index) {  // leading indices (numbers or control keys) -> {shape, data}
    var a = arrays[pick(ref)];
    if (!a) { return null; }
    var off = 0, size = a.data.length;
    for (var i = 0; i < (index || []).length; i++) {
      var idx = typeof index[i] === "number" ? index[i] : state[index[i]];
      size /= a.shape[i];
      if (idx >= a.shape[i]) { return null; }
      off += idx * size;
    }
    return {shape: a.shape.slice((index || []).length), data: a.data.subarray(off, off + size)};
  }
  function labels(ref, n) {
    var l = ref == null ? null : spec.labels[pick(ref)];
    if (l) { return l; }
    l = [];
    for (var i = 0; i < n; i++) { l.push(String(i)); }
    return l;
  }
  function color(t) {
    t = Math.max(0, Math.min(1, isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
    var i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + f * (b[c] - a[c])); }).join(",") + ")";
  }
  function fmt(v) {  // short labels: 1, -0.5, 0.25, 1.2e-3
    var a = Math.abs(v);
    return a !== 0 && (a < 0.01 || a >= 10000) ? v.toExponential(1) : String(Number(v.toFixed(a >= 100 ? 0 : 2)));
  }
  function ticks(lo, hi) {  // about five "nice" values (steps of 1, 2 or 5 times a power of ten)
    if (!(hi > lo)) { return [lo]; }
    var raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10)), norm = raw / mag;
    var step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag, out = [];
    var digits = Math.max(0, -Math.floor(Math.log(step) / Math.LN10 + 1e-9));
    for (var v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step) {
      out.push(Number((Math.abs(v) < 1e-12 * step ? 0 : v).toFixed(Math.min(digits, 20))));
    }
    return out;
  }
  function tickText(v) { return Math.abs(v) >= 1e5 ? v.toExponential(0) : String(v); }
  function el(tag, attrs, parent) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (a) {
      if (a === "text") { e.textContent = attrs[a]; } else if (a === "style") { e.style.cssText = attrs[a]; } else { e.setAttribute(a, attrs[a]); }
    });
    if (parent) { parent.appendChild(e); }
    return e;
  }

  var readout = root.querySelector("[data-minitfm-readout]");
  var hover = root.querySelector("[data-minitfm-hover]");
  var controlsBox = root.querySelector("[data-minitfm-controls]");
  var viewsBox = root.querySelector("[data-minitfm-views]");
  hover.textContent = spec.hint || "";

  spec.controls.forEach(function (c) {
    var wrap = el("label", {style: "display:inline-flex;align-items:center;gap:6px;margin:3px 16px 3px 0;white-space:nowrap"}, controlsBox);
    el("span", {text: c.label, style: "font-weight:600"}, wrap);
    var input, shown = null;
    if (c.type === "select") {
      input = el("select", {"data-minitfm-control": c.key, style: "font:inherit;max-width:200px"}, wrap);
      c.options.forEach(function (o, i) { el("option", {value: String(i), text: o}, input); });
    } else {
      input = el("input", {type: "range", min: "0", max: String(c.options.length - 1), step: "1",
                           "data-minitfm-control": c.key, style: "width:110px"}, wrap);
      shown = el("span", {style: "min-width:2.8em;font-variant-numeric:tabular-nums"}, wrap);
    }
    input.value = String(c.value);
    input.setAttribute("aria-label", c.label);
    function update() {
      state[c.key] = parseInt(input.value, 10);
      if (shown) { shown.textContent = c.options[state[c.key]]; }
      render();
    }
    if (shown) { shown.textContent = c.options[c.value]; }
    input.addEventListener("input", update);
    input.addEventListener("change", update);
  });

  var views = spec.views.map(function (v) {
    var box = el("div", {style: "flex:1 1 " + (v.basis || 320) + "px;min-width:0;max-width:100%"}, viewsBox);
    var view = {spec: v, canvas: el("canvas", {style: "display:block;width:100%;height:auto", "data-minitfm-view": v.type}, box)};
    if (v.type === "heatmap") {
      view.canvas.addEventListener("mousemove", function (e) { onHover(view, e); });
      view.canvas.addEventListener("click", function (e) { onHover(view, e); });
      view.canvas.addEventListener("mouseleave", function () { hover.textContent = spec.hint || ""; });
    }
    return view;
  });

  function surface(canvas, height) {
    var w = Math.max(240, Math.floor(canvas.parentNode.clientWidth || 320)), dpr = window.devicePixelRatio || 1;
    var h = Math.round(typeof height === "function" ? height(w) : height);
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, w, h);
    ctx.font = FONT;
    ctx.fillStyle = "#1f2328";
    return {ctx: ctx, w: w, h: h};
  }
  function title(s, v) {
    s.ctx.font = "600 " + FONT;
    s.ctx.textAlign = "left";
    s.ctx.textBaseline = "top";
    s.ctx.fillText(text(v.title), 4, 2, s.w - 8);
    s.ctx.font = FONT;
  }
  function widest(ctx, list) { return list.reduce(function (m, t) { return Math.max(m, ctx.measureText(t).width); }, 0); }
  function message(view, msg) {
    var s = surface(view.canvas, 80);
    title(s, view.spec);
    s.ctx.fillText(msg, 4, 36);
  }

  function drawHeatmap(view) {
    var v = view.spec, m = slice(v.array, v.index);
    if (!m) { message(view, v.missing || "no data for this setting"); return; }
    var nr = m.shape[0], nc = m.shape[1], rows = labels(v.rows, nr), cols = labels(v.cols, nc);
    var lo = v.vmin, hi = v.vmax;
    if (lo == null || hi == null) {
      var mn = Infinity, mx = -Infinity;
      for (var k = 0; k < m.data.length; k++) { mn = Math.min(mn, m.data[k]); mx = Math.max(mx, m.data[k]); }
      lo = lo == null ? mn : lo;
      hi = hi == null ? mx : hi;
    }
    var probe = surface(view.canvas, 10).ctx, left = widest(probe, rows) + 26;
    var colW = widest(probe, cols), right = 34 + widest(probe, [fmt(lo), fmt(hi)]);
    var cw = Math.min(44, (probe.canvas.width / (window.devicePixelRatio || 1) - left - right) / nc);
    var rotate = colW > cw - 4, bottom = (rotate ? colW * 0.72 + 14 : 18) + 18;
    var ch = Math.max(8, Math.min(cw, 30, 420 / nr)), top = 24;
    var s = surface(view.canvas, top + nr * ch + bottom), ctx = s.ctx;
    title(s, v);
    for (var i = 0; i < nr; i++) {
      for (var j = 0; j < nc; j++) {
        ctx.fillStyle = color((m.data[i * nc + j] - lo) / (hi - lo || 1));
        ctx.fillRect(left + j * cw, top + i * ch, Math.ceil(cw), Math.ceil(ch));
      }
    }
    ctx.fillStyle = "#1f2328";
    var rstep = Math.ceil(13 / ch), cstep = Math.ceil((rotate ? 13 : colW + 6) / cw);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (i = 0; i < nr; i += rstep) { ctx.fillText(rows[i], left - 4, top + (i + 0.5) * ch); }
    for (j = 0; j < nc; j += cstep) {
      ctx.save();
      ctx.translate(left + (j + 0.5) * cw, top + nr * ch + 4);
      if (rotate) { ctx.rotate(-Math.PI / 4); ctx.textAlign = "right"; ctx.translate(4, 4); } else { ctx.textAlign = "center"; }
      ctx.textBaseline = rotate ? "middle" : "top";
      ctx.fillText(cols[j], 0, 0);
      ctx.restore();
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.fillText(v.xlabel || "", left + nc * cw / 2, s.h - 2);
    ctx.save();
    ctx.translate(10, top + nr * ch / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = "middle";
    ctx.fillText(v.ylabel || "", 0, 0);
    ctx.restore();
    if (v.highlight) {
      ctx.strokeStyle = "#ffffff";
      ctx.lineWidth = 2;
      if (v.highlight.col != null) {
        var c0 = state[v.highlight.col] * (v.highlight.span || 1);
        ctx.strokeRect(left + c0 * cw, top, cw * (v.highlight.span || 1), nr * ch);
      }
      if (v.highlight.row != null) { ctx.strokeRect(left, top + state[v.highlight.row] * ch, nc * cw, ch); }
    }
    var lx = left + nc * cw + 14, lh = Math.max(40, nr * ch);
    for (var y = 0; y < lh; y++) { ctx.fillStyle = color(1 - y / (lh - 1)); ctx.fillRect(lx, top + y, 12, 1); }
    ctx.fillStyle = "#1f2328";
    ctx.textAlign = "left";
    ctx.textBaseline = "top";
    ctx.fillText(fmt(hi), lx + 15, top);
    ctx.textBaseline = "bottom";
    ctx.fillText(fmt(lo), lx + 15, top + lh);
    view.geom = {left: left, top: top, cw: cw, ch: ch, nr: nr, nc: nc, rows: rows, cols: cols, m: m, w: s.w};
  }
  function onHover(view, e) {
    var g = view.geom, v = view.spec;
    if (!g) { return; }
    var r = view.canvas.getBoundingClientRect();
    var k = g.w / (r.width || g.w);  // CSS pixels may differ from drawing units until the next redraw
    var j = Math.floor(((e.clientX - r.left) * k - g.left) / g.cw), i = Math.floor(((e.clientY - r.top) * k - g.top) / g.ch);
    if (i < 0 || j < 0 || i >= g.nr || j >= g.nc) { hover.textContent = spec.hint || ""; return; }
    hover.textContent = (v.ylabel || "row") + " " + g.rows[i] + " \u2192 " + (v.xlabel || "column") + " " +
        g.cols[j] + ": " + g.m.data[i * g.nc + j].toFixed(v.digits == null ? 3 : v.digits);
  }

  function frame(view, series, xs) {  // axes shared by line and bar charts; returns the mapping
    var v = view.spec, lo = v.ymin, hi = v.ymax;
    if (lo == null || hi == null) {
      var mn = Infinity, mx = -Infinity;
      series.forEach(function (d) { for (var k = 0; k < d.length; k++) { if (isFinite(d[k])) { mn = Math.min(mn, d[k]); mx = Math.max(mx, d[k]); } } });
      if (v.zero) { mn = Math.min(mn, 0); mx = Math.max(mx, 0); }
      var pad = (mx - mn) * 0.06 || 1;
      lo = lo == null ? mn - (v.zero && mn === 0 ? 0 : pad) : lo;
      hi = hi == null ? mx + pad : hi;
    }
    var probe = surface(view.canvas, 10).ctx, yt = ticks(lo, hi);
    var left = Math.max(30, widest(probe, yt.map(tickText)) + 10) + 16, xw = widest(probe, xs || []);
    var lastW = xs && xs.length ? probe.measureText(xs[xs.length - 1]).width / 2 + 4 : 10;
    var plotW = probe.canvas.width / (window.devicePixelRatio || 1) - left - Math.max(10, lastW);
    var slotW = xs ? plotW / xs.length : 0, rotate = xs && xw > slotW - 4 ? (slotW < 20 ? 90 : 45) : 0;
    var bottom = (rotate ? Math.min(xw, 90) * (rotate === 90 ? 1 : 0.72) + 14 : 18) + 18;
    var legend = (v.series || []).length > 1 ? 18 : 0;
    var s = surface(view.canvas, function (w) { return Math.min(330, Math.max(260, w * 0.55)) + bottom - 36; });
    var ctx = s.ctx, top = 24 + legend, ph = s.h - top - bottom;
    var yOf = function (y) { return top + ph * (1 - (y - lo) / (hi - lo || 1)); };
    title(s, v);
    ctx.strokeStyle = "#d8dee4";
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    ctx.fillStyle = "#1f2328";
    yt.forEach(function (t) {
      var y = Math.round(yOf(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + plotW, y); ctx.stroke();
      ctx.fillText(tickText(t), left - 4, y);
    });
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.fillText(v.xlabel || "", left + plotW / 2, s.h - 2);
    ctx.save();
    ctx.translate(10, top + ph / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = "middle";
    ctx.fillText(v.ylabel || "", 0, 0);
    ctx.restore();
    var lx = left;
    (v.series || []).forEach(function (sr, k) {
      if (!legend) { return; }
      ctx.fillStyle = seriesColor(sr, k);
      ctx.fillRect(lx, 26, 12, 10);
      ctx.fillStyle = "#1f2328";
      ctx.textAlign = "left";
      ctx.textBaseline = "top";
      ctx.fillText(sr.label, lx + 16, 24);
      lx += ctx.measureText(sr.label).width + 30;
    });
    return {ctx: ctx, s: s, left: left, top: top, pw: plotW, ph: ph, yOf: yOf, rotate: rotate, lo: lo};
  }
  function xLabels(f, xs, xOf) {
    var ctx = f.ctx, step = Math.max(1, Math.ceil((f.rotate ? 15 : widest(ctx, xs) + 8) / (f.pw / xs.length)));
    ctx.fillStyle = "#1f2328";
    for (var i = 0; i < xs.length; i += step) {
      ctx.save();
      ctx.translate(xOf(i), f.top + f.ph + 4);
      if (f.rotate) { ctx.rotate(-Math.PI * f.rotate / 180); ctx.textAlign = "right"; ctx.translate(f.rotate === 90 ? 0 : 4, 4); ctx.textBaseline = "middle"; } else { ctx.textAlign = "center"; ctx.textBaseline = "top"; }
      ctx.fillText(xs[i], 0, 0);
      ctx.restore();
    }
  }
  function seriesData(v) { return (v.series || []).map(function (sr) { var d = slice(sr.array, sr.index); return d ? d.data : null; }); }

  function drawLines(view) {
    var v = view.spec, data = seriesData(v);
    if (data.some(function (d) { return !d; })) { message(view, v.missing || "no data for this setting"); return; }
    var n = data[0].length, xs = labels(v.x, n), f = frame(view, data, xs), ctx = f.ctx;
    var xOf = function (i) { return f.left + (n === 1 ? f.pw / 2 : f.pw * i / (n - 1)); };
    if (v.hline != null) {
      ctx.strokeStyle = "#57606a"; ctx.setLineDash([4, 4]);
      ctx.beginPath(); ctx.moveTo(f.left, f.yOf(v.hline)); ctx.lineTo(f.left + f.pw, f.yOf(v.hline)); ctx.stroke();
      ctx.setLineDash([]);
    }
    if (v.marker != null) {
      ctx.strokeStyle = "#e07b39"; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.moveTo(xOf(state[v.marker]), f.top); ctx.lineTo(xOf(state[v.marker]), f.top + f.ph); ctx.stroke();
    }
    data.forEach(function (d, k) {
      ctx.strokeStyle = seriesColor(v.series[k], k);
      ctx.fillStyle = ctx.strokeStyle;
      ctx.lineWidth = 2;
      ctx.beginPath();
      for (var i = 0; i < n; i++) { if (i) { ctx.lineTo(xOf(i), f.yOf(d[i])); } else { ctx.moveTo(xOf(i), f.yOf(d[i])); } }
      ctx.stroke();
      if (v.marker != null) { ctx.beginPath(); ctx.arc(xOf(state[v.marker]), f.yOf(d[state[v.marker]]), 3.5, 0, 2 * Math.PI); ctx.fill(); }
    });
    xLabels(f, xs, xOf);
  }

  function drawBars(view) {
    var v = view.spec, data = seriesData(v);
    if (data.some(function (d) { return !d; })) { message(view, v.missing || "no data for this setting"); return; }
    var n = data[0].length, xs = v.range ? null : labels(v.cats, n), f = frame(view, data, xs), ctx = f.ctx;
    var slot = f.pw / n, bw = Math.max(1, slot * 0.8 / data.length);
    data.forEach(function (d, k) {
      ctx.fillStyle = seriesColor(v.series[k], k);
      for (var i = 0; i < n; i++) {
        var y = f.yOf(Math.max(d[i], f.lo)), y0 = f.yOf(Math.max(0, f.lo));
        ctx.fillRect(f.left + i * slot + slot * 0.1 + k * bw, Math.min(y, y0), bw, Math.abs(y0 - y));
      }
    });
    if (xs) { xLabels(f, xs, function (i) { return f.left + (i + 0.5) * slot; }); return; }
    var r = slice(v.range, v.rangeIndex).data, edges = ticks(r[0], r[1]);
    ctx.fillStyle = "#1f2328"; ctx.textAlign = "center"; ctx.textBaseline = "top";
    var last = -Infinity;
    edges.forEach(function (t) {
      var x = f.left + f.pw * (t - r[0]) / (r[1] - r[0]), label = tickText(t);
      if (x - last < ctx.measureText(label).width + 8) { return; }
      ctx.fillRect(x, f.top + f.ph, 1, 4);
      ctx.fillText(label, x, f.top + f.ph + 5);
      last = x;
    });
  }

  function render() {
    readout.textContent = (spec.readouts || []).map(text).join(" \u00b7 ");
    views.forEach(function (view) {
      var t = view.spec.type;
      if (t === "heatmap") { drawHeatmap(view); } else if (t === "lines") { drawLines(view); } else { drawBars(view); }
    });
  }
  render();
  var lastWidth = root.clientWidth;
  if (window.ResizeObserver) {
    new ResizeObserver(function () {
      if (root.clientWidth !== lastWidth) { lastWidth = root.clientWidth; window.requestAnimationFrame(render); }
    }).observe(root);
  }
})();
