// The live model's page interface: the explorer and the chat that a book page mounts around the engine,
// live_engine.js (model, tokenizers, sampling; no DOM), which must run first: the site serves the two as one script,
// _assets/live/live_model.js (minitfm/viz/live_model.py writes it). Adds to the engine's global minitfmLive:
//   missing()                         what this browser lacks for the explorer (empty: nothing)
//   mount(root)                       builds the explorer inside root (data-minitfm-live="<asset name>"), or the chat
//                                     for a chat model
//   mountCompare(root)                the comparison: one question, one reply panel per model of
//                                     data-minitfm-compare="<name> <name> ..." (compare_box.live_compare)
//   compareReply(name, question, maxNew, options)  one model's reply in the comparison (a chat model's in its
//                                     template, a base model's a continuation of the question)
//   TEXT, CHAT_TEXT, COMPARE_TEXT, VIRIDIS  the explorer's, chat's and comparison's strings (en, zh), the colour map

(function (global) {
  "use strict";
  var NS = global.minitfmLive;
  if (!NS || !NS.Model) { throw new Error("live_model.js needs live_engine.js loaded first (the site serves them as one script)"); }
  if (NS.mount) { return; }
  var process = NS.process, argmax = NS.argmax, draw = NS.draw;

  // ------------------------------------------------------------------ what a browser needs
  NS.missing = function () {
    var need = [];
    if (typeof Float32Array === "undefined" || typeof Map === "undefined") { need.push("typed arrays"); }
    if (typeof TextEncoder === "undefined" || typeof atob === "undefined") { need.push("TextEncoder"); }
    try { new RegExp("\\p{L}", "u"); } catch (e) { need.push("Unicode regular expressions"); }
    var c = document.createElement("canvas");
    if (!(c.getContext && c.getContext("2d"))) { need.push("canvas"); }
    return need;
  };
  // ------------------------------------------------------------------ the explorer
  var VIRIDIS = [[68, 1, 84], [72, 24, 106], [71, 45, 123], [66, 64, 134], [59, 82, 139], [51, 99, 141], [44, 114, 142],
    [38, 130, 142], [33, 145, 140], [31, 160, 136], [40, 174, 128], [63, 188, 115], [94, 201, 98], [132, 212, 75],
    [173, 220, 48], [216, 226, 25], [253, 231, 37]];  // the static explorers' colour map (a test keeps them equal)
  NS.VIRIDIS = VIRIDIS;
  var FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, 'Noto Sans', 'PingFang SC', sans-serif";
  var MAX_TOKENS = 96;  // the page keeps this many tokens at most (the heatmap stays readable)
  var TEXT = {
    en: {quoted: "\u00ab{t}\u00bb", title: "A live model in the page: {desc}", ready: "{params} parameters ({dtype} weights, {size}), {layers} layers \u00d7 {heads} heads: every number below is computed by your browser.",
      prompt: "Prompt", run: "Run", vocab: "Words the model knows ({n})", tokens: "Tokens (their ids below; orange: unknown word, <unk>; bold: generated)",
      layer: "Layer", head: "Head", heat: "Attention of layer {l}, head {h} (row = query, column = key)",
      heatAria: "Attention heatmap of layer {l}, head {h}: {n} queries by {n} keys. Arrow keys move across the cells.",
      query: "query", key: "key", most: "Layer {l}, head {h}: the last token \u00ab{q}\u00bb attends most to \u00ab{k}\u00bb ({w}).",
      cell: "query \u00ab{q}\u00bb \u2192 key \u00ab{k}\u00bb: {w}", next: "Most likely next tokens", token: "token", model: "model",
      after: "after the settings", lens: "Logit lens: the output head reads the last token's residual stream after the embedding and after each block: {list}", norms: "Size \u2016x\u2016 of the last token's residual stream after the embedding and each block: {list}",
      mode: "Choice", greedy: "greedy (most likely)", sample: "sample", temperature: "Temperature", topk: "Top-k (0 = off)",
      topp: "Top-p", seed: "Seed", count: "New tokens", step: "Next token", generate: "Generate", stop: "Stop",
      reset: "Back to the prompt", text: "Text: ", ended: "The model ended the text (<eos>).", full: "The page keeps at most {n} tokens.", trained: "The model was trained on rows of {n} tokens: the page stops there.",
      timing: "Last forward pass: {ms} ms for {n} new token(s); the KV cache now holds the keys and values of {k} tokens in each of the {l} layers.", needs: "This live model needs a browser with {what} (any recent Chrome, Edge, Firefox or Safari).",
      failed: "The live model could not run: {msg}", empty: "Type a prompt first."},
    zh: {quoted: "\u300c{t}\u300d", title: "\u9875\u9762\u4e2d\u7684\u5b9e\u65f6\u6a21\u578b\uff1a{desc}", ready: "{params} \u4e2a\u53c2\u6570\uff08{dtype} \u6743\u91cd\uff0c{size}\uff09\uff0c{layers} \u5c42 \u00d7 {heads} \u4e2a\u5934\uff1a\u4e0b\u9762\u7684\u6bcf\u4e2a\u6570\u5b57\u90fd\u7531\u4f60\u7684\u6d4f\u89c8\u5668\u8ba1\u7b97\u3002",
      prompt: "\u63d0\u793a\u8bcd", run: "\u8fd0\u884c", vocab: "\u6a21\u578b\u8ba4\u8bc6\u7684\u8bcd\uff08{n} \u4e2a\uff09", tokens: "\u8bcd\u5143\uff08\u4e0b\u65b9\u4e3a id\uff1b\u6a59\u8272\uff1a\u672a\u77e5\u8bcd <unk>\uff1b\u7c97\u4f53\uff1a\u751f\u6210\u7684\u8bcd\u5143\uff09",
      layer: "\u5c42", head: "\u5934", heat: "\u7b2c {l} \u5c42\u7b2c {h} \u4e2a\u5934\u7684\u6ce8\u610f\u529b\uff08\u884c = \u67e5\u8be2\uff0c\u5217 = \u952e\uff09",
      heatAria: "\u7b2c {l} \u5c42\u7b2c {h} \u4e2a\u5934\u7684\u6ce8\u610f\u529b\u70ed\u529b\u56fe\uff1a{n} \u4e2a\u67e5\u8be2 \u00d7 {n} \u4e2a\u952e\u3002\u7528\u65b9\u5411\u952e\u5728\u683c\u5b50\u95f4\u79fb\u52a8\u3002",
      query: "\u67e5\u8be2", key: "\u952e", most: "\u7b2c {l} \u5c42\u7b2c {h} \u4e2a\u5934\uff1a\u6700\u540e\u4e00\u4e2a\u8bcd\u5143\u300c{q}\u300d\u6700\u5173\u6ce8\u300c{k}\u300d\uff08{w}\uff09\u3002",
      cell: "\u67e5\u8be2\u300c{q}\u300d\u2192 \u952e\u300c{k}\u300d\uff1a{w}", next: "\u6700\u53ef\u80fd\u7684\u4e0b\u4e00\u4e2a\u8bcd\u5143", token: "\u8bcd\u5143", model: "\u6a21\u578b",
      after: "\u6309\u5f53\u524d\u8bbe\u7f6e", lens: "logit \u900f\u955c\uff1a\u7528\u8f93\u51fa\u5934\u8bfb\u53d6\u6700\u540e\u4e00\u4e2a\u8bcd\u5143\u5728\u5d4c\u5165\u4e4b\u540e\u53ca\u6bcf\u4e2a\u5757\u4e4b\u540e\u7684\u6b8b\u5dee\u6d41\uff1a{list}", norms: "\u6700\u540e\u4e00\u4e2a\u8bcd\u5143\u7684\u6b8b\u5dee\u6d41\u5927\u5c0f \u2016x\u2016\uff08\u5d4c\u5165\u4e4b\u540e\u53ca\u6bcf\u4e2a\u5757\u4e4b\u540e\uff09\uff1a{list}",
      mode: "\u9009\u62e9\u65b9\u5f0f", greedy: "\u8d2a\u5fc3\uff08\u53d6\u6700\u53ef\u80fd\u7684\uff09", sample: "\u91c7\u6837", temperature: "\u6e29\u5ea6", topk: "top-k\uff080 = \u5173\u95ed\uff09",
      topp: "top-p", seed: "\u968f\u673a\u79cd\u5b50", count: "\u65b0\u8bcd\u5143\u6570", step: "\u4e0b\u4e00\u4e2a\u8bcd\u5143", generate: "\u751f\u6210", stop: "\u505c\u6b62",
      reset: "\u56de\u5230\u63d0\u793a\u8bcd", text: "\u6587\u672c\uff1a", ended: "\u6a21\u578b\u7ed3\u675f\u4e86\u6587\u672c\uff08<eos>\uff09\u3002", full: "\u9875\u9762\u6700\u591a\u4fdd\u7559 {n} \u4e2a\u8bcd\u5143\u3002", trained: "\u6a21\u578b\u8bad\u7ec3\u65f6\u6bcf\u884c {n} \u4e2a\u8bcd\u5143\uff1a\u9875\u9762\u5230\u6b64\u4e3a\u6b62\u3002",
      timing: "\u4e0a\u4e00\u6b21\u524d\u5411\u8ba1\u7b97\uff1a{n} \u4e2a\u65b0\u8bcd\u5143\u7528\u65f6 {ms} \u6beb\u79d2\uff1bKV \u7f13\u5b58\u73b0\u5728\u5728 {l} \u5c42\u4e2d\u5404\u5b58\u6709 {k} \u4e2a\u8bcd\u5143\u7684\u952e\u548c\u503c\u3002", needs: "\u8fd9\u4e2a\u5b9e\u65f6\u6a21\u578b\u9700\u8981\u652f\u6301 {what} \u7684\u6d4f\u89c8\u5668\uff08\u8fd1\u671f\u7684 Chrome\u3001Edge\u3001Firefox \u6216 Safari \u5747\u53ef\uff09\u3002",
      failed: "\u5b9e\u65f6\u6a21\u578b\u65e0\u6cd5\u8fd0\u884c\uff1a{msg}", empty: "\u8bf7\u5148\u8f93\u5165\u63d0\u793a\u8bcd\u3002"}
  };
  NS.TEXT = TEXT;
  function fill(s, v) { return s.replace(/\{(\w+)\}/g, function (m, k) { return v[k] == null ? m : String(v[k]); }); }
  function el(tag, attrs, parent) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (a) {
      if (a === "text") { e.textContent = attrs[a]; } else if (a === "style") { e.style.cssText = attrs[a]; } else { e.setAttribute(a, attrs[a]); }
    });
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function color(t) {
    t = Math.max(0, Math.min(1, isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
    var i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return "rgb(" + [0, 1, 2].map(function (c) { return Math.round(a[c] + f * (b[c] - a[c])); }).join(",") + ")";
  }
  function labelled(parent, text, input, shown) {
    var wrap = el("label", {style: "display:inline-flex;align-items:center;gap:6px;margin:3px 14px 3px 0;white-space:nowrap"}, parent);
    el("span", {text: text, style: "font-weight:600"}, wrap);
    wrap.appendChild(input);
    if (shown) { wrap.appendChild(shown); }
    return input;
  }
  function range(min, max, step, value) { return el("input", {type: "range", min: String(min), max: String(max), step: String(step), value: String(value), style: "width:100px"}); }
  function picker(n, value) {
    var s = el("select", {style: "font:inherit"});
    for (var i = 0; i < n; i++) { el("option", {value: String(i), text: String(i)}, s); }
    s.value = String(value);
    return s;
  }

  // ------------------------------------------------------------------ the chat (a chat model: header.chat holds its template's ids)
  var CHAT = {
    en: {title: "A live chat in the page: {desc}", ready: "{params} parameters ({dtype} weights, {size}): every reply is computed by your browser, token by token.",
      how: "Each question is sent alone, in the chat template the model was fine-tuned on, and the reply ends at <|end|> or when the conversation reaches {n} tokens, the longest it was trained on. It was fine-tuned on the questions its title names and knows nothing else: try an example, then anything you like.",
      examples: "Examples:",
      question: "Your question", ask: "Ask", clear: "Clear", temperature: "Temperature (0 = greedy)", log: "Conversation",
      you: "You: ", bot: "Assistant: ", ids: "What the model read and wrote: {text}", idsList: "ids: {ids}",
      stopped: " (no <|end|> within {n} tokens: the page stopped it)", timing: "{k} tokens written in {ms} ms.",
      long: "That question takes {k} tokens in the template; the model was fine-tuned on conversations of at most {n}: ask a shorter one.",
      empty: "Type a question first.", cleared: "The conversation is cleared."},
    zh: {title: "\u9875\u9762\u4e2d\u7684\u5b9e\u65f6\u5bf9\u8bdd\uff1a{desc}", ready: "{params} \u4e2a\u53c2\u6570\uff08{dtype} \u6743\u91cd\uff0c{size}\uff09\uff1a\u6bcf\u4e00\u6b21\u56de\u590d\u90fd\u7531\u4f60\u7684\u6d4f\u89c8\u5668\u9010\u4e2a\u8bcd\u5143\u8ba1\u7b97\u3002",
      how: "\u6bcf\u4e2a\u95ee\u9898\u5355\u72ec\u53d1\u9001\uff0c\u6309\u6a21\u578b\u5fae\u8c03\u65f6\u7684\u5bf9\u8bdd\u6a21\u677f\u6e32\u67d3\uff1b\u56de\u590d\u5728 <|end|> \u5904\u7ed3\u675f\uff0c\u6216\u5728\u5bf9\u8bdd\u8fbe\u5230 {n} \u4e2a\u8bcd\u5143\uff08\u8bad\u7ec3\u65f6\u6700\u957f\u7684\u5bf9\u8bdd\uff09\u65f6\u505c\u6b62\u3002\u5b83\u53ea\u5728\u6807\u9898\u91cc\u5217\u51fa\u7684\u90a3\u51e0\u7c7b\u95ee\u9898\u4e0a\u5fae\u8c03\u8fc7\uff0c\u522b\u7684\u90fd\u4e0d\u4f1a\uff1a\u5148\u8bd5\u4e00\u4e2a\u793a\u4f8b\uff0c\u518d\u968f\u4fbf\u95ee\u70b9\u4ec0\u4e48\u3002",
      examples: "\u793a\u4f8b\uff1a",
      question: "\u4f60\u7684\u95ee\u9898", ask: "\u63d0\u95ee", clear: "\u6e05\u7a7a", temperature: "\u6e29\u5ea6\uff080 = \u8d2a\u5fc3\uff09", log: "\u5bf9\u8bdd",
      you: "\u4f60\uff1a", bot: "\u52a9\u624b\uff1a", ids: "\u6a21\u578b\u8bfb\u5230\u548c\u5199\u51fa\u7684\u5185\u5bb9\uff1a{text}", idsList: "id\uff1a{ids}",
      stopped: "\uff08{n} \u4e2a\u8bcd\u5143\u5185\u6ca1\u6709 <|end|>\uff1a\u9875\u9762\u5728\u6b64\u505c\u6b62\uff09", timing: "\u5199\u51fa {k} \u4e2a\u8bcd\u5143\u7528\u65f6 {ms} \u6beb\u79d2\u3002",
      long: "\u8fd9\u4e2a\u95ee\u9898\u5728\u6a21\u677f\u4e2d\u5360 {k} \u4e2a\u8bcd\u5143\uff1b\u6a21\u578b\u5fae\u8c03\u65f6\u7684\u5bf9\u8bdd\u6700\u957f {n} \u4e2a\u8bcd\u5143\uff1a\u8bf7\u95ee\u4e00\u4e2a\u66f4\u77ed\u7684\u95ee\u9898\u3002",
      empty: "\u8bf7\u5148\u8f93\u5165\u95ee\u9898\u3002", cleared: "\u5bf9\u8bdd\u5df2\u6e05\u7a7a\u3002"}
  };
  NS.CHAT_TEXT = CHAT;
  function mountChat(root, name, loaded, zh, started) {
    var S = CHAT[zh ? "zh" : "en"], model = loaded.model, tok = loaded.tokenizer, c = model.config, h = model.header, id = root.id;
    var cap = Math.min(c.max_seq_len, h.trained_length || Infinity), turns = [];
    root.textContent = "";
    el("div", {text: fill(S.title, {desc: (h.description || {})[zh ? "zh" : "en"] || name}), style: "font-weight:600;font-size:14px;margin-bottom:2px"}, root);
    el("div", {text: fill(S.ready, {params: model.parameterCount().toLocaleString(zh ? "zh-CN" : "en"), dtype: h.dtype, size: (h.nbytes / 1e6).toFixed(1) + " MB"}),
               style: "color:#57606a;font-size:12px"}, root);
    el("div", {text: fill(S.how, {n: cap}), style: "color:#57606a;font-size:12px;margin:2px 0 6px"}, root);
    var log = el("div", {role: "log", "aria-live": "polite", "aria-label": S.log, "data-minitfm-chat-log": "",
                         style: "display:flex;flex-direction:column;gap:4px;margin:4px 0;max-height:320px;overflow-y:auto"}, root);
    var row = el("div", {style: "display:flex;flex-wrap:wrap;align-items:center;gap:6px;margin:6px 0"}, root);
    el("label", {"for": id + "-question", text: S.question, style: "font-weight:600"}, row);
    var input = el("input", {id: id + "-question", type: "text", "data-minitfm-chat-question": "", autocomplete: "off", spellcheck: "false",
                             value: root.getAttribute("data-minitfm-prompt") || "", style: "font:inherit;flex:1 1 220px;min-width:0;padding:3px 6px"}, row);
    var askButton = el("button", {type: "button", text: S.ask, "data-minitfm-chat-ask": ""}, row);
    var clearButton = el("button", {type: "button", text: S.clear, "data-minitfm-chat-clear": ""}, row);
    if ((h.examples || []).length) {  // the asset's example questions: a click asks one
      var tries = el("div", {role: "group", "aria-label": S.examples, style: "display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin:2px 0 6px;font-size:12px"}, root);
      el("span", {text: S.examples, style: "color:#57606a"}, tries);
      h.examples.forEach(function (q) {
        el("button", {type: "button", text: q, "data-minitfm-chat-example": ""}, tries).addEventListener("click", function () { input.value = q; ask(); input.focus(); });
      });
    }
    var settings = el("div", {style: "display:flex;flex-wrap:wrap"}, root), shown = el("span", {style: "min-width:2.4em;font-variant-numeric:tabular-nums"});
    var temp = labelled(settings, S.temperature, range(0, 1.5, 0.1, 0), shown);
    temp.setAttribute("data-minitfm-chat-temperature", "");
    var details = el("details", {style: "font-size:12px;color:#57606a"}, root);
    var summary = el("summary", {text: fill(S.ids, {text: ""})}, details);
    var idsBox = el("div", {"data-minitfm-chat-ids": "", style: "white-space:pre-wrap;word-break:break-all;padding:2px 0 4px"}, details);
    var note = el("div", {role: "status", "data-minitfm-live-status": "", style: "font-size:12px;color:#57606a;min-height:1.45em"}, root);
    function line(who, text, made) {
      var d = el("div", {style: "padding:3px 8px;border-radius:6px;white-space:pre-wrap;" + (made ? "background:#e6f4f1" : "background:#f6f8fa;align-self:flex-start")}, log);
      el("span", {text: who, style: "font-weight:600"}, d);
      el("span", {text: text}, d);
      log.scrollTop = log.scrollHeight;
      return d;
    }
    function ask() {
      var question = input.value, prompt;
      if (!question.trim()) { note.textContent = S.empty; return null; }
      try { prompt = NS.chatPrompt(name, question); } catch (e) { note.textContent = fill(TEXT[zh ? "zh" : "en"].failed, {msg: e.message}); return null; }
      if (prompt.length >= cap) { note.textContent = fill(S.long, {k: prompt.length, n: cap}); return null; }
      var t0 = performance.now(), r = NS.chatReply(name, prompt, {temperature: +temp.value, seed: 0}), ms = performance.now() - t0;
      var turn = {question: question, prompt: prompt, reply: r.ids, ended: r.ended, text: r.text};
      turns.push(turn);
      line(S.you, question, false);
      line(S.bot, r.text + (r.ended ? "" : fill(S.stopped, {n: cap})), true);
      var all = prompt.concat(r.ids);
      summary.textContent = fill(S.ids, {text: tok.decode(all)});
      idsBox.textContent = fill(S.idsList, {ids: all.join(" ")});
      note.textContent = fill(S.timing, {k: r.ids.length, ms: ms.toFixed(1)});
      input.value = "";
      return turn;
    }
    input.addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); ask(); } });
    askButton.addEventListener("click", function () { ask(); input.focus(); });
    clearButton.addEventListener("click", function () { log.textContent = ""; turns = []; note.textContent = S.cleared; input.focus(); });
    function showTemp() { shown.textContent = (+temp.value).toFixed(1); }
    temp.addEventListener("input", showTemp);
    showTemp();
    root.minitfmChat = {ask: function (q) { if (q != null) { input.value = q; } return ask(); }, turns: function () { return turns; }};
    root.setAttribute("data-minitfm-live-ready", (performance.now() - started).toFixed(0));
  }

  NS.mount = function (root) {
    var zh = /^zh/i.test(document.documentElement.lang || ""), S = TEXT[zh ? "zh" : "en"];
    var status = root.querySelector("[data-minitfm-live-status]"), need = NS.missing();
    if (need.length) { status.textContent = fill(S.needs, {what: need.join(", ")}); return; }
    var started = performance.now(), name = root.getAttribute("data-minitfm-live"), loaded;
    try { loaded = NS.load(name); } catch (e) { status.textContent = fill(S.failed, {msg: e.message}); return; }
    var model = loaded.model, tok = loaded.tokenizer, c = model.config, h = model.header, id = root.id;
    if (!tok) { status.textContent = fill(S.failed, {msg: "the asset " + name + " has no tokenizer"}); return; }
    if (h.chat) { mountChat(root, name, loaded, zh, started); return; }
    var cap = Math.min(MAX_TOKENS, c.max_seq_len, h.trained_length || Infinity), st = {};
    root.textContent = "";
    el("div", {text: fill(S.title, {desc: (h.description || {})[zh ? "zh" : "en"] || name}), style: "font-weight:600;font-size:14px;margin-bottom:2px"}, root);
    el("div", {text: fill(S.ready, {params: model.parameterCount().toLocaleString(zh ? "zh-CN" : "en"), dtype: h.dtype,
                                     size: (h.nbytes / 1e6).toFixed(1) + " MB", layers: c.n_layers, heads: c.n_heads}),
               style: "color:#57606a;font-size:12px"}, root);
    var row = el("div", {style: "display:flex;flex-wrap:wrap;align-items:center;gap:6px;margin:6px 0"}, root);
    el("label", {"for": id + "-prompt", text: S.prompt, style: "font-weight:600"}, row);
    var prompt = el("input", {id: id + "-prompt", type: "text", "data-minitfm-live-prompt": "", spellcheck: "false", autocomplete: "off",
                              value: root.getAttribute("data-minitfm-prompt") || "", style: "font:inherit;flex:1 1 220px;min-width:0;padding:3px 6px"}, row);
    var runButton = el("button", {type: "button", text: S.run, "data-minitfm-live-run": ""}, row);
    if (tok.spec.kind === "word") {
      var words = el("details", {style: "font-size:12px;color:#57606a"}, root);
      el("summary", {text: fill(S.vocab, {n: tok.spec.itos.length - 4})}, words);
      el("div", {text: tok.spec.itos.slice(4).join(" "), style: "padding:2px 0 4px"}, words);
    }
    el("div", {text: S.tokens, style: "font-size:12px;color:#57606a;margin-top:4px", id: id + "-tokens-label"}, root);
    var chips = el("div", {"data-minitfm-live-tokens": "", role: "group", "aria-labelledby": id + "-tokens-label",
                           style: "display:flex;flex-wrap:wrap;gap:3px;margin:2px 0 6px"}, root);
    var pick = el("div", {style: "display:flex;flex-wrap:wrap"}, root);
    var layerSel = labelled(pick, S.layer, picker(c.n_layers, c.n_layers - 1)), headSel = labelled(pick, S.head, picker(c.n_heads, 0));
    layerSel.setAttribute("data-minitfm-live-layer", ""); headSel.setAttribute("data-minitfm-live-head", "");
    var readout = el("div", {"aria-live": "polite", "data-minitfm-live-readout": "", style: "margin:4px 0;font-variant-numeric:tabular-nums"}, root);
    var views = el("div", {style: "display:flex;flex-wrap:wrap;gap:10px 16px;align-items:flex-start"}, root);
    var heatBox = el("div", {style: "flex:1 1 360px;min-width:0;max-width:100%"}, views);
    var canvas = el("canvas", {tabindex: "0", role: "img", "data-minitfm-live-heatmap": "", style: "display:block;width:100%;height:auto"}, heatBox);
    var hover = el("div", {style: "font-size:12px;color:#57606a;min-height:1.45em"}, heatBox);
    var nextBox = el("div", {style: "flex:1 1 240px;min-width:0;max-width:100%"}, views);
    var lens = el("div", {"data-minitfm-live-lens": "", style: "margin:4px 0"}, root);
    var norms = el("div", {style: "font-size:12px;color:#57606a;margin:4px 0"}, root);
    var gen = el("div", {style: "display:flex;flex-wrap:wrap;margin-top:4px"}, root);
    var mode = labelled(gen, S.mode, el("select", {style: "font:inherit", "data-minitfm-live-mode": ""}));
    el("option", {value: "greedy", text: S.greedy}, mode); el("option", {value: "sample", text: S.sample}, mode);
    function shown() { return el("span", {style: "min-width:2.4em;font-variant-numeric:tabular-nums"}); }
    var tShow = shown(), kShow = shown(), pShow = shown(), nShow = shown();
    var temp = labelled(gen, S.temperature, range(0.1, 2, 0.1, 1), tShow), topk = labelled(gen, S.topk, range(0, c.vocab_size, 1, 0), kShow);
    var topp = labelled(gen, S.topp, range(0.05, 1, 0.05, 1), pShow), count = labelled(gen, S.count, range(1, 40, 1, 12), nShow);
    var seed = labelled(gen, S.seed, el("input", {type: "number", min: "0", max: "4294967295", step: "1", value: "0", style: "font:inherit;width:6em"}));
    var buttons = el("div", {style: "display:flex;flex-wrap:wrap;gap:6px;margin:6px 0"}, root);
    var stepButton = el("button", {type: "button", text: S.step, "data-minitfm-live-step": ""}, buttons);
    var genButton = el("button", {type: "button", text: S.generate, "data-minitfm-live-generate": ""}, buttons);
    var stopButton = el("button", {type: "button", text: S.stop, disabled: ""}, buttons);
    var resetButton = el("button", {type: "button", text: S.reset}, buttons);
    var output = el("div", {"data-minitfm-live-output": "", style: "margin:4px 0"}, root);
    var note = el("div", {role: "status", "data-minitfm-live-status": "", style: "font-size:12px;color:#57606a"}, root);

    function settings() {
      return {temperature: +temp.value, topK: +topk.value, topP: +topp.value, sample: mode.value === "sample"};
    }
    function timed(fn) { var t0 = performance.now(), r = fn(); st.ms = performance.now() - t0; return r; }
    function run() {
      stopGenerating();
      var enc;
      try { enc = tok.encode(prompt.value); } catch (e) { note.textContent = fill(S.failed, {msg: e.message}); return; }
      if (tok.spec.kind !== "word") { enc = {ids: [c.bos_id].concat(enc.ids), pieces: [tok.piece(c.bos_id)].concat(enc.pieces)}; }
      if (!enc.ids.length) { note.textContent = S.empty; return; }
      enc.ids = enc.ids.slice(0, cap); enc.pieces = enc.pieces.slice(0, cap);
      st = {ids: enc.ids, pieces: enc.pieces, prompt: enc.ids.length, cache: model.newCache(cap), random: NS.rng(+seed.value || 0)};
      var res = timed(function () { return model.forward(enc.ids, st.cache, {weights: true}); });
      st.attn = res.attention;
      st.last = res.logits[res.logits.length - 1];
      st.norms = res.norms.map(function (n) { return n[n.length - 1]; });
      st.lens = res.lens;
      st.n = enc.ids.length;
      hover.textContent = "";
      note.textContent = fill(S.timing, {ms: st.ms.toFixed(1), n: st.n, k: st.cache.length, l: c.n_layers});
      render();
    }
    function step() {
      if (!st.ids) { run(); }
      if (st.ids.length >= cap) { note.textContent = fill(h.trained_length ? S.trained : S.full, {n: cap}); return false; }
      var o = settings(), next = o.sample ? draw(process(st.last, o), st.random()) : argmax(st.last);
      st.ids.push(next);
      st.pieces.push(tok.piece(next));
      var res = timed(function () { return model.forward([next], st.cache, {weights: true}); });
      st.attn.forEach(function (layer, l) { layer.forEach(function (rows, hh) { rows.push(res.attention[l][hh][0]); }); });
      st.last = res.logits[0];
      st.norms = res.norms.map(function (n) { return n[0]; });
      st.lens = res.lens;
      note.textContent = fill(S.timing, {ms: st.ms.toFixed(1), n: 1, k: st.cache.length, l: c.n_layers});
      render();
      if (next === c.eos_id) { note.textContent = S.ended; return false; }
      return true;
    }
    var timer = null;
    function stopGenerating() {
      if (timer) { clearTimeout(timer); timer = null; }
      stopButton.disabled = true; genButton.disabled = false; stepButton.disabled = false;
    }
    function generate() {
      var left = +count.value;
      stopButton.disabled = false; genButton.disabled = true; stepButton.disabled = true;
      (function tick() {
        timer = null;
        if (left-- > 0 && step()) { timer = setTimeout(tick, 60); } else { stopGenerating(); }
      })();
    }

    function heat() {  // the explorers' heatmap: viridis cells, token labels, a colour bar; masked cells grey
      var l = +layerSel.value, hh = +headSel.value, rows = st.attn[l][hh], n = rows.length, labels = st.pieces;
      var w = Math.max(240, Math.floor(heatBox.clientWidth || 360)), dpr = window.devicePixelRatio || 1, ctx0 = canvas.getContext("2d");
      ctx0.font = FONT;
      var widest = labels.reduce(function (m, t) { return Math.max(m, ctx0.measureText(t).width); }, 0);
      var left = Math.min(widest, 90) + 10, right = 44, top = 22, cw = Math.min(34, (w - left - right) / n);
      var rotate = widest > cw - 4, bottom = rotate ? Math.min(widest, 90) * 0.72 + 12 : 20, ch = cw, hgt = top + n * ch + bottom;
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(hgt * dpr);
      var ctx = canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, w, hgt);
      ctx.font = "600 " + FONT; ctx.fillStyle = "#1f2328"; ctx.textAlign = "left"; ctx.textBaseline = "top";
      ctx.fillText(fill(S.heat, {l: l, h: hh}), 2, 2, w - 4);
      ctx.font = FONT;
      for (var i = 0; i < n; i++) {
        for (var j = 0; j < n; j++) {
          ctx.fillStyle = j < rows[i].length ? color(rows[i][j]) : "#eef1f4";
          ctx.fillRect(left + j * cw, top + i * ch, Math.ceil(cw), Math.ceil(ch));
        }
      }
      if (st.cursor) {
        ctx.strokeStyle = "#e07b39"; ctx.lineWidth = 2;
        ctx.strokeRect(left + st.cursor[1] * cw + 1, top + st.cursor[0] * ch + 1, cw - 2, ch - 2);
      }
      ctx.fillStyle = "#1f2328";
      var stepR = Math.ceil(13 / ch), stepC = Math.ceil((rotate ? 13 : widest + 6) / cw);
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      for (i = 0; i < n; i += stepR) { ctx.fillText(labels[i], left - 4, top + (i + 0.5) * ch, left - 6); }
      for (j = 0; j < n; j += stepC) {
        ctx.save();
        ctx.translate(left + (j + 0.5) * cw, top + n * ch + 4);
        if (rotate) { ctx.rotate(-Math.PI / 4); ctx.textAlign = "right"; ctx.translate(4, 4); } else { ctx.textAlign = "center"; }
        ctx.textBaseline = rotate ? "middle" : "top";
        ctx.fillText(labels[j], 0, 0, 90);
        ctx.restore();
      }
      var lx = left + n * cw + 10, lh = Math.max(40, n * ch);
      for (var y = 0; y < lh; y++) { ctx.fillStyle = color(1 - y / (lh - 1)); ctx.fillRect(lx, top + y, 10, 1); }
      ctx.fillStyle = "#1f2328"; ctx.textAlign = "left"; ctx.textBaseline = "top"; ctx.fillText("1", lx + 13, top);
      ctx.textBaseline = "bottom"; ctx.fillText("0", lx + 13, top + lh);
      st.geom = {left: left, top: top, cw: cw, ch: ch, n: n, w: w};
      canvas.setAttribute("aria-label", fill(S.heatAria, {l: l, h: hh, n: n}));
      var last = rows[n - 1], best = argmax(last);
      readout.textContent = fill(S.most, {l: l, h: hh, q: labels[n - 1], k: labels[best], w: last[best].toFixed(3)});
    }
    function cellText(i, j) {
      var rows = st.attn[+layerSel.value][+headSel.value], v = j < rows[i].length ? rows[i][j] : 0;
      return fill(S.cell, {q: st.pieces[i], k: st.pieces[j], w: v.toFixed(3)});
    }
    function onPointer(e) {
      var g = st.geom, r = canvas.getBoundingClientRect();
      if (!g) { return; }
      var k = g.w / (r.width || g.w), j = Math.floor(((e.clientX - r.left) * k - g.left) / g.cw), i = Math.floor(((e.clientY - r.top) * k - g.top) / g.ch);
      hover.textContent = i >= 0 && j >= 0 && i < g.n && j < g.n ? cellText(i, j) : "";
    }
    canvas.addEventListener("mousemove", onPointer);
    canvas.addEventListener("click", onPointer);
    canvas.addEventListener("keydown", function (e) {
      var moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, -1e9], End: [0, 1e9]};
      if (!moves[e.key] || !st.geom) { return; }
      e.preventDefault();
      var n = st.geom.n, cur = st.cursor || [n - 1, n - 1];
      st.cursor = [Math.max(0, Math.min(n - 1, cur[0] + moves[e.key][0])), Math.max(0, Math.min(n - 1, cur[1] + moves[e.key][1]))];
      heat();
      hover.textContent = cellText(st.cursor[0], st.cursor[1]);
      readout.textContent = hover.textContent;
    });

    function nextTable() {
      var o = settings(), raw = process(st.last, {}), after = o.sample ? process(st.last, o) : null;
      var order = Array.from(raw.keys()).sort(function (a, b) { return raw[b] - raw[a] || a - b; }).slice(0, 8);
      nextBox.textContent = "";
      el("div", {text: S.next, style: "font-weight:600;margin-bottom:2px", id: id + "-next"}, nextBox);
      var table = el("table", {"aria-labelledby": id + "-next", "data-minitfm-live-next": "", style: "border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums"}, nextBox);
      var head = el("tr", {}, el("thead", {}, table)), body = el("tbody", {}, table);
      [S.token, S.model].concat(after ? [S.after] : []).forEach(function (t) { el("th", {text: t, scope: "col", style: "text-align:left;padding:1px 6px 1px 0;font-size:12px"}, head); });
      order.forEach(function (tid) {
        var tr = el("tr", {}, body);
        el("td", {text: tok.piece(tid), style: "padding:1px 6px 1px 0;white-space:pre"}, tr);
        [raw].concat(after ? [after] : []).forEach(function (p) {
          var td = el("td", {style: "padding:1px 6px 1px 0;min-width:90px"}, tr);
          var bar = el("div", {style: "display:flex;align-items:center;gap:4px"}, td);
          el("div", {style: "height:10px;background:#21908d;width:" + Math.max(1, Math.round(p[tid] * 70)) + "px"}, bar);
          el("span", {text: p[tid].toFixed(3)}, bar);
        });
      });
    }
    function render() {
      chips.textContent = "";
      st.pieces.forEach(function (piece, i) {
        var unk = tok.spec.unk_id != null && st.ids[i] === tok.spec.unk_id, made = i >= st.prompt;
        var chip = el("span", {style: "display:inline-flex;flex-direction:column;align-items:center;padding:1px 5px;border-radius:4px;" +
                                       "border:1px solid " + (unk ? "#bc4c00" : "#d0d7de") + ";background:" + (made ? "#e6f4f1" : "#f6f8fa") +
                                       (made ? ";font-weight:600" : "")}, chips);
        el("span", {text: piece, style: "white-space:pre"}, chip);
        el("span", {text: String(st.ids[i]), style: "font-size:10px;color:#57606a"}, chip);
      });
      heat();
      nextTable();
      lens.textContent = fill(S.lens, {list: st.lens.map(function (z) {
        var p = process(z, {}), best = argmax(p);
        return fill(S.quoted, {t: tok.piece(best)}) + " " + p[best].toFixed(2);
      }).join(" \u2192 ")});
      norms.textContent = fill(S.norms, {list: st.norms.map(function (v) { return v.toFixed(1); }).join(" \u2192 ")});
      output.textContent = S.text + tok.decode(st.ids);
      tShow.textContent = (+temp.value).toFixed(1); kShow.textContent = topk.value; pShow.textContent = (+topp.value).toFixed(2); nShow.textContent = count.value;
    }
    prompt.addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); run(); } });
    prompt.addEventListener("input", function () { if (!timer) { run(); } });
    runButton.addEventListener("click", run);
    layerSel.addEventListener("change", function () { st.cursor = null; heat(); });
    headSel.addEventListener("change", function () { st.cursor = null; heat(); });
    [mode, temp, topk, topp, count].forEach(function (x) { x.addEventListener("input", render); x.addEventListener("change", render); });
    seed.addEventListener("change", function () { st.random = NS.rng(+seed.value || 0); });
    stepButton.addEventListener("click", function () { stopGenerating(); step(); });
    genButton.addEventListener("click", generate);
    stopButton.addEventListener("click", stopGenerating);
    resetButton.addEventListener("click", run);
    run();
    root.setAttribute("data-minitfm-live-ready", (performance.now() - started).toFixed(0));
    var lastWidth = root.clientWidth;
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        if (root.clientWidth !== lastWidth && st.attn) { lastWidth = root.clientWidth; window.requestAnimationFrame(heat); }
      }).observe(root);
    }
    root.minitfmLive = {run: run, step: step, state: function () { return st; }};
  };

  // ------------------------------------------------------------------ the comparison (compare_box.live_compare)
  // One question to several models, each reply computed here: a chat model (header.chat) reads it in its template and
  // replies up to its end token; a model without a chat template (the base model) continues the question as plain
  // text, after its bos token, up to its eos. Greedy unless the temperature says otherwise; at most maxNew new tokens
  // and the conversation at most the trained length -> {prompt, ids, ended, text, chat} or {prompt, tooLong, cap}
  NS.compareReply = function (name, question, maxNew, options) {
    var loaded = NS.load(name), m = loaded.model, h = m.header, tok = loaded.tokenizer, o = options || {}, ids, stop;
    if (h.chat) { ids = NS.chatPrompt(name, question); stop = h.chat.end; } else {
      ids = tok.encode(question, true).ids;  // the question's text, a typed special token's text as bytes
      if (tok.spec.kind !== "word") { ids = [m.config.bos_id].concat(ids); }  // the word tokenizer adds its own
      stop = m.config.eos_id;
    }
    var cap = Math.min(m.config.max_seq_len, h.trained_length || Infinity), room = Math.min(maxNew, cap - ids.length);
    if (room < 1) { return {prompt: ids, tooLong: true, cap: cap}; }
    var t = o.temperature || 0;
    var out = m.generate(ids, room, t > 0 ? {sample: true, temperature: t, seed: o.seed || 0, eos: stop} : {eos: stop});
    var ended = out[out.length - 1] === stop;
    return {prompt: ids, ids: out, ended: ended, text: tok.decode(ended ? out.slice(0, -1) : out), chat: !!h.chat};
  };
  var COMPARE = {
    en: {title: "One question, {n} models: every reply is computed by your browser",
      how: "Each model reads the question alone and takes its most likely next token every time (greedy decoding, temperature 0) until its end token or {m} new tokens: the same question and the same rule for all, so the replies differ only by the weights. A chat model reads the question in the chat template it was fine-tuned on.",
      base: " A base model never read a chat: it continues the question as plain text.",
      question: "Your question", ask: "Ask every model", examples: "Examples:", temperature: "Temperature (0 = greedy)",
      replies: "Replies", chat: "chat model: replies in its chat template", text: "base model: continues the text",
      size: "{params} parameters ({dtype} weights, {size})", ended: "It wrote {k} tokens, the last its end token.",
      stopped: "No end token within {k} new tokens: the page stopped it.", empty: "Type a question first.",
      long: "The question takes {k} tokens; this model reads at most {n}: ask a shorter one.", working: "Computing the replies\u2026",
      timing: "{n} replies written in {ms} ms.", failed: "This model could not reply: {msg}"},
    zh: {title: "\u4e00\u4e2a\u95ee\u9898\uff0c{n} \u4e2a\u6a21\u578b\uff1a\u6bcf\u4e2a\u56de\u590d\u90fd\u7531\u4f60\u7684\u6d4f\u89c8\u5668\u8ba1\u7b97",
      how: "\u6bcf\u4e2a\u6a21\u578b\u5355\u72ec\u8bfb\u8fd9\u4e2a\u95ee\u9898\uff0c\u6bcf\u4e00\u6b65\u90fd\u53d6\u6700\u53ef\u80fd\u7684\u4e0b\u4e00\u4e2a\u8bcd\u5143\uff08\u8d2a\u5fc3\u89e3\u7801\uff0c\u6e29\u5ea6 0\uff09\uff0c\u76f4\u5230\u5b83\u7684\u7ed3\u675f\u8bcd\u5143\u6216 {m} \u4e2a\u65b0\u8bcd\u5143\u4e3a\u6b62\uff1a\u95ee\u9898\u76f8\u540c\u3001\u89c4\u5219\u76f8\u540c\uff0c\u56de\u590d\u7684\u4e0d\u540c\u53ea\u6765\u81ea\u6743\u91cd\u3002\u5bf9\u8bdd\u6a21\u578b\u6309\u5b83\u5fae\u8c03\u65f6\u7684\u5bf9\u8bdd\u6a21\u677f\u8bfb\u95ee\u9898\u3002",
      base: "\u57fa\u7840\u6a21\u578b\u4ece\u672a\u89c1\u8fc7\u5bf9\u8bdd\uff1a\u5b83\u628a\u95ee\u9898\u5f53\u4f5c\u666e\u901a\u6587\u672c\u7eed\u5199\u3002",
      question: "\u4f60\u7684\u95ee\u9898", ask: "\u95ee\u6240\u6709\u6a21\u578b", examples: "\u793a\u4f8b\uff1a", temperature: "\u6e29\u5ea6\uff080 = \u8d2a\u5fc3\uff09",
      replies: "\u56de\u590d", chat: "\u5bf9\u8bdd\u6a21\u578b\uff1a\u6309\u5bf9\u8bdd\u6a21\u677f\u56de\u590d", text: "\u57fa\u7840\u6a21\u578b\uff1a\u7eed\u5199\u6587\u672c",
      size: "{params} \u4e2a\u53c2\u6570\uff08{dtype} \u6743\u91cd\uff0c{size}\uff09", ended: "\u5199\u4e86 {k} \u4e2a\u8bcd\u5143\uff0c\u6700\u540e\u4e00\u4e2a\u662f\u7ed3\u675f\u8bcd\u5143\u3002",
      stopped: "{k} \u4e2a\u65b0\u8bcd\u5143\u5185\u6ca1\u6709\u7ed3\u675f\u8bcd\u5143\uff1a\u9875\u9762\u5728\u6b64\u505c\u6b62\u3002", empty: "\u8bf7\u5148\u8f93\u5165\u95ee\u9898\u3002",
      long: "\u8fd9\u4e2a\u95ee\u9898\u5360 {k} \u4e2a\u8bcd\u5143\uff1b\u8fd9\u4e2a\u6a21\u578b\u6700\u591a\u8bfb {n} \u4e2a\uff1a\u8bf7\u95ee\u4e00\u4e2a\u66f4\u77ed\u7684\u95ee\u9898\u3002", working: "\u6b63\u5728\u8ba1\u7b97\u56de\u590d\u2026",
      timing: "\u5199\u51fa {n} \u4e2a\u56de\u590d\u7528\u65f6 {ms} \u6beb\u79d2\u3002", failed: "\u8fd9\u4e2a\u6a21\u578b\u65e0\u6cd5\u56de\u590d\uff1a{msg}"}
  };
  NS.COMPARE_TEXT = COMPARE;
  // root: data-minitfm-compare="name name ..." (their assets loaded), data-minitfm-prompt, data-minitfm-max-new
  NS.mountCompare = function (root) {
    var zh = /^zh/i.test(document.documentElement.lang || ""), lang = zh ? "zh" : "en", S = COMPARE[lang], id = root.id;
    var status = root.querySelector("[data-minitfm-live-status]"), need = NS.missing();
    if (need.length) { status.textContent = fill(TEXT[lang].needs, {what: need.join(", ")}); return; }
    var started = performance.now(), names = (root.getAttribute("data-minitfm-compare") || "").split(" ").filter(Boolean);
    var maxNew = +root.getAttribute("data-minitfm-max-new") || 48, loaded;
    try { loaded = names.map(function (n) { return NS.load(n); }); } catch (e) { status.textContent = fill(TEXT[lang].failed, {msg: e.message}); return; }
    var examples = [];
    loaded.forEach(function (l) { (l.model.header.examples || []).forEach(function (q) { if (examples.indexOf(q) < 0) { examples.push(q); } }); });
    root.textContent = "";
    el("div", {text: fill(S.title, {n: names.length}), style: "font-weight:600;font-size:14px;margin-bottom:2px"}, root);
    var anyBase = loaded.some(function (l) { return !l.model.header.chat; });
    el("div", {text: fill(S.how, {m: maxNew}) + (anyBase ? S.base : ""), style: "color:#57606a;font-size:12px;margin:2px 0 6px"}, root);
    var row = el("div", {style: "display:flex;flex-wrap:wrap;align-items:center;gap:6px;margin:6px 0"}, root);
    el("label", {"for": id + "-question", text: S.question, style: "font-weight:600"}, row);
    var input = el("input", {id: id + "-question", type: "text", "data-minitfm-compare-question": "", autocomplete: "off", spellcheck: "false",
                             value: root.getAttribute("data-minitfm-prompt") || "", style: "font:inherit;flex:1 1 220px;min-width:0;padding:3px 6px"}, row);
    var askButton = el("button", {type: "button", text: S.ask, "data-minitfm-compare-ask": ""}, row);
    if (examples.length) {  // the chat models' example questions: a click asks every model
      var tries = el("div", {role: "group", "aria-label": S.examples, style: "display:flex;flex-wrap:wrap;align-items:center;gap:4px;margin:2px 0 6px;font-size:12px"}, root);
      el("span", {text: S.examples, style: "color:#57606a"}, tries);
      examples.forEach(function (q) {
        el("button", {type: "button", text: q, "data-minitfm-compare-example": ""}, tries).addEventListener("click", function () { input.value = q; ask(); });
      });
    }
    var settings = el("div", {style: "display:flex;flex-wrap:wrap"}, root), shown = el("span", {style: "min-width:2.4em;font-variant-numeric:tabular-nums"});
    var temp = labelled(settings, S.temperature, range(0, 1.5, 0.1, 0), shown);
    temp.setAttribute("data-minitfm-compare-temperature", "");
    var grid = el("div", {role: "group", "aria-label": S.replies, style: "display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:8px;margin:6px 0"}, root);
    var panels = loaded.map(function (l, i) {
      var h = l.model.header, box = el("div", {role: "region", "aria-labelledby": id + "-model-" + i, "data-minitfm-compare-panel": names[i],
                                               style: "border:1px solid #d0d7de;border-radius:6px;padding:6px 8px;min-width:0"}, grid);
      var head = el("div", {id: id + "-model-" + i, style: "font-weight:600"}, box);
      el("code", {text: names[i]}, head);
      head.appendChild(document.createTextNode(": " + ((h.description || {})[lang] || names[i])));
      el("div", {text: h.chat ? S.chat : S.text, "data-minitfm-compare-kind": "", style: "font-size:12px;color:#0a5f59;font-weight:600"}, box);
      el("div", {text: fill(S.size, {params: l.model.parameterCount().toLocaleString(zh ? "zh-CN" : "en"), dtype: h.dtype, size: (h.nbytes / 1e6).toFixed(1) + " MB"}),
                 style: "font-size:12px;color:#57606a"}, box);
      var reply = el("div", {style: "white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:3px 6px;border-radius:6px;background:#e6f4f1;min-height:1.45em"}, box);
      var lead = el("span", {style: "color:#57606a"}, reply), text = el("span", {"data-minitfm-compare-text": ""}, reply);
      var end = el("div", {"data-minitfm-compare-end": "", style: "font-size:12px;color:#57606a"}, box);
      return {name: names[i], lead: lead, text: text, end: end};
    });
    var note = el("div", {role: "status", "data-minitfm-live-status": "", style: "font-size:12px;color:#57606a;min-height:1.45em"}, root);
    var runs = 0, results = [];
    function show(p, r, question) {
      if (r.error) { p.end.textContent = fill(S.failed, {msg: r.error}); return; }
      if (r.tooLong) { p.end.textContent = fill(S.long, {k: r.prompt.length, n: r.cap}); return; }
      p.lead.textContent = r.chat ? "" : question;  // the base model's text: the question, then what it wrote
      p.text.textContent = r.text;
      p.end.textContent = fill(r.ended ? S.ended : S.stopped, {k: r.ids.length});
    }
    function ask() {  // every model in turn, the page redrawn between them; a new question cancels the rest
      var question = input.value, run = ++runs, i = 0, t0 = performance.now(), o = {temperature: +temp.value, seed: 0};
      if (!question.trim()) { note.textContent = S.empty; return Promise.resolve(null); }
      panels.forEach(function (p) { p.lead.textContent = ""; p.text.textContent = ""; p.end.textContent = ""; });
      results = [];
      grid.setAttribute("aria-busy", "true");
      note.textContent = S.working;
      return new Promise(function (resolve) {
        (function next() {
          if (run !== runs) { resolve(null); return; }
          if (i === panels.length) {
            grid.removeAttribute("aria-busy");
            note.textContent = fill(S.timing, {n: panels.length, ms: (performance.now() - t0).toFixed(0)});
            root.setAttribute("data-minitfm-compare-done", String(run));
            resolve(results);
            return;
          }
          var p = panels[i++], r;
          try { r = NS.compareReply(p.name, question, maxNew, o); } catch (e) { r = {error: e.message}; }
          r.name = p.name;
          results.push(r);
          show(p, r, question);
          setTimeout(next, 0);
        })();
      });
    }
    input.addEventListener("keydown", function (e) { if (e.key === "Enter") { e.preventDefault(); ask(); } });
    askButton.addEventListener("click", function () { ask(); });
    function showTemp() { shown.textContent = (+temp.value).toFixed(1); }
    temp.addEventListener("input", showTemp);
    showTemp();
    root.minitfmCompare = {ask: function (q) { if (q != null) { input.value = q; } return ask(); }, results: function () { return results; }};
    root.setAttribute("data-minitfm-live-ready", (performance.now() - started).toFixed(0));
  };
})(typeof globalThis !== "undefined" ? globalThis : window);
