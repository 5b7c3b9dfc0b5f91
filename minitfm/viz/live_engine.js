// The live model's engine: a dependency-free JavaScript forward pass of minitfm.models.DecoderOnlyLM, its tokenizers
// and sampling, with no DOM: it runs in a page and under Node (tests/viz/test_live_model_node.py checks it there against
// PyTorch). live_model.js, the page interface, draws the explorer and the chat around it; the site serves the two as one
// script, _assets/live/live_model.js (minitfm/viz/live_model.py writes it and the assets).
//
// minitfmLive (the one global, globalThis.minitfmLive; under Node also what require() returns):
//   assets[name] = {header, b64}      what an asset script registers (header: JSON of live_model.py; b64: its .bin;
//                                     {header, bytes: Uint8Array} works too, for a .bin read from a file)
//   new Model(asset)                  the weights, float16 or float32 in the file, float32 arrays here; refuses a
//                                     config this engine does not compute exactly (the message names the field)
//   model.forward(ids, cache, {weights: true}) -> {logits: [Float32Array(V) per new token],
//                                     attention: [layer][head] -> [Float32Array(keys) per new token], norms (the
//                                     residual stream's size), lens (the head on the last token's stream, per block)}
//   model.newCache(maxLen), model.generate(ids, n, options) (greedy, or sampled with a seed), process(logits, o),
//                                     draw(probabilities, u), argmax(x), rng(seed)
//   tokenizer(spec) -> {encode(text) -> {ids, pieces}, decode(ids)}: the word tokenizer of minitfm.text.words
//                                     and the byte-level BPE of minitfm.text.bpe_tokenizer (GPT-2's regex)
//   load(name) -> {model, tokenizer}  the asset registered as assets[name], made once
//   chatPrompt(name, question), chatReply(name, ids, options): a chat model's (header.chat) template, as
//                                     minitfm.finetuning.ChatTemplate.prompt_ids renders it, and its reply up to <|end|>
//
// Numbers follow minitfm's conventions exactly: RoPE rotates adjacent pairs (x0, x1) with float32 angles,
// RMSNorm's eps sits inside the square root, LayerNorm uses the biased variance, GELU is exact (erf) or tanh,
// grouped KV heads serve H / H_kv consecutive query heads, sums run in double precision (float64).

(function (global) {
  "use strict";
  var NS = global.minitfmLive = global.minitfmLive || {};
  NS.assets = NS.assets || {};
  if (typeof module === "object" && module && module.exports) { module.exports = NS; }  // Node: require() gives it
  if (NS.Model) { return; }
  NS.engineVersion = 1;

  // ------------------------------------------------------------------ weights
  var HALF = null;
  function halfTable() {  // all 65536 float16 values as float32
    if (HALF) { return HALF; }
    HALF = new Float32Array(65536);
    for (var h = 0; h < 65536; h++) {
      var s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
      HALF[h] = e === 0 ? s * f * Math.pow(2, -24) : e === 31 ? (f ? NaN : s * Infinity) : s * (1 + f / 1024) * Math.pow(2, e - 15);
    }
    return HALF;
  }
  function base64Bytes(text) {
    var bin = atob(text), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { out[i] = bin.charCodeAt(i); }
    return out;
  }
  function loadTensors(header, bytes) {
    var dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), out = {}, half = header.dtype === "float16";
    if (!half && header.dtype !== "float32") { throw new Error("weights must be float16 or float32, got " + header.dtype); }
    if (bytes.length !== header.nbytes) { throw new Error("the weights have " + bytes.length + " bytes, the header says " + header.nbytes); }
    var table = half ? halfTable() : null;
    header.tensors.forEach(function (t) {
      var n = t.shape.reduce(function (a, b) { return a * b; }, 1), a = new Float32Array(n), i;
      if (half) { for (i = 0; i < n; i++) { a[i] = table[dv.getUint16(t.offset + 2 * i, true)]; } } else {
        for (i = 0; i < n; i++) { a[i] = dv.getFloat32(t.offset + 4 * i, true); }
      }
      out[t.name] = a;
    });
    return out;
  }

  // ------------------------------------------------------------------ the model
  var SUPPORTED = {norm: ["rms", "layer"], pos: ["rope", "learned"], ffn: ["swiglu", "gelu", "gelu_tanh"]};
  function unsupported(c) {
    for (var key in SUPPORTED) {
      if (SUPPORTED[key].indexOf(c[key]) < 0) { return key + "=" + JSON.stringify(c[key]) + " (this engine computes " + SUPPORTED[key].join(", ") + ")"; }
    }
    if (c.norm_first !== true) { return "norm_first=false (this engine computes Pre-LN only)"; }
    return null;
  }
  NS.unsupported = unsupported;

  function erf(x) {  // W. J. Cody's rational approximations (relative error < 1e-15), as in most libm
    var ax = Math.abs(x), t, r;
    if (ax < 0.5) {
      t = x * x;
      return x * ((((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t + 377.485237685302021) * t +
        3209.37758913846947) / ((((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t + 2844.23683343917062);
    }
    if (ax < 4) {
      r = ((((((((2.15311535474403846e-8 * ax + 0.564188496988670089) * ax + 8.88314979438837594) * ax + 66.1191906371416295) * ax +
        298.635138197400131) * ax + 881.952221241769090) * ax + 1712.04761263407058) * ax + 2051.07837782607147) * ax + 1230.33935479799725) /
        ((((((((ax + 15.7449261107098347) * ax + 117.693950891312499) * ax + 537.181101862009858) * ax + 1621.38957456669019) * ax +
        3290.79923573345963) * ax + 4362.61909014324716) * ax + 3439.36767414372164) * ax + 1230.33935480374942);
    } else {
      t = 1 / (ax * ax);
      r = (((((1.63153871373020978e-2 * t + 3.05326634961232344e-1) * t + 3.60344899949804439e-1) * t + 1.25781726111229246e-1) * t +
        1.60837851487422766e-2) * t + 6.58749161529837803e-4) / (((((t + 2.56852019228982242) * t + 1.87295284992346725) * t +
        5.27905102951428412e-1) * t + 6.05183413124413191e-2) * t + 2.33520497626869185e-3);
      r = (0.564189583547756287 - t * r) / ax;
    }
    r = 1 - Math.exp(-ax * ax) * r;
    return x < 0 ? -r : r;
  }
  NS.erf = erf;
  var ACT = {
    gelu: function (x) { return 0.5 * x * (1 + erf(x / Math.SQRT2)); },
    gelu_tanh: function (x) { return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))); }
  };

  function linear(W, b, x, nOut) {  // W (nOut, nIn) row-major, x (nIn) -> (nOut)
    var nIn = x.length, y = new Float64Array(nOut);
    for (var o = 0; o < nOut; o++) {
      var s = b ? b[o] : 0, base = o * nIn;
      for (var i = 0; i < nIn; i++) { s += W[base + i] * x[i]; }
      y[o] = s;
    }
    return y;
  }

  function Model(asset) {
    if (!asset || !asset.header) { throw new Error("no model asset: load its script (NAME.js) before making the model"); }
    var h = asset.header, c = h.config, why = unsupported(c);
    if (why) { throw new Error("the live engine does not run this model: " + why); }
    this.header = h;
    this.config = c;
    this.w = loadTensors(h, asset.bytes || base64Bytes(asset.b64));
    this.D = c.d_model; this.H = c.n_heads; this.Hkv = c.n_kv_heads; this.Dh = c.d_model / c.n_heads;
    this.F = c.d_ff; this.L = c.n_layers; this.V = c.vocab_size;
    this.headW = this.w[c.tie_embeddings ? "tok_emb.weight" : "lm_head.weight"];
    this.embScale = c.scale_embeddings ? Math.fround(Math.sqrt(c.d_model)) : 1;
    this.invFreq = null;
    if (c.pos === "rope") {  // float32 as in RotaryEmbedding.float32_inv_freq: 1 / base^(2i/Dh) / scale
      this.invFreq = new Float64Array(this.Dh / 2);
      for (var i = 0; i < this.Dh / 2; i++) {
        var e = Math.fround(2 * i / this.Dh), p = Math.fround(Math.pow(c.rope_base, e));
        this.invFreq[i] = Math.fround(Math.fround(1 / p) / c.rope_scale);
      }
    }
  }
  NS.Model = Model;
  Model.prototype.parameterCount = function () {
    var self = this;
    return this.header.tensors.reduce(function (n, t) { return n + self.w[t.name].length; }, 0);
  };
  Model.prototype.newCache = function (maxLen) {
    var size = this.Hkv * maxLen * this.Dh, layers = [];
    for (var l = 0; l < this.L; l++) { layers.push({k: new Float64Array(size), v: new Float64Array(size)}); }
    return {maxLen: maxLen, length: 0, layers: layers};
  };
  Model.prototype.norm = function (x, name) {
    var w = this.w[name + ".weight"], b = this.w[name + ".bias"], n = x.length, y = new Float64Array(n), i, m = 0, v = 0;
    if (this.config.norm === "rms") {
      for (i = 0; i < n; i++) { v += x[i] * x[i]; }
      var r = 1 / Math.sqrt(v / n + this.config.norm_eps);
      for (i = 0; i < n; i++) { y[i] = x[i] * r * w[i]; }
      return y;
    }
    for (i = 0; i < n; i++) { m += x[i]; }
    m /= n;
    for (i = 0; i < n; i++) { v += (x[i] - m) * (x[i] - m); }
    var s = 1 / Math.sqrt(v / n + this.config.norm_eps);
    for (i = 0; i < n; i++) { y[i] = (x[i] - m) * s * w[i] + (b ? b[i] : 0); }
    return y;
  };
  Model.prototype.rope = function (x, nHeads, pos) {  // rotate adjacent pairs of every head in place
    var Dh = this.Dh;
    for (var i = 0; i < Dh / 2; i++) {
      var a = Math.fround(pos * this.invFreq[i]), cs = Math.cos(a), sn = Math.sin(a);
      for (var h = 0; h < nHeads; h++) {
        var j = h * Dh + 2 * i, x0 = x[j], x1 = x[j + 1];
        x[j] = x0 * cs - x1 * sn;
        x[j + 1] = x0 * sn + x1 * cs;
      }
    }
  };
  Model.prototype.ffn = function (h, pre) {
    var w = this.w, F = this.F, u = linear(w[pre + "up_proj.weight"], w[pre + "up_proj.bias"], h, F), i;
    if (this.config.ffn === "swiglu") {
      var g = linear(w[pre + "gate_proj.weight"], w[pre + "gate_proj.bias"], h, F);
      for (i = 0; i < F; i++) { u[i] *= g[i] / (1 + Math.exp(-g[i])); }
    } else {
      var act = ACT[this.config.ffn];
      for (i = 0; i < F; i++) { u[i] = act(u[i]); }
    }
    return linear(w[pre + "down_proj.weight"], w[pre + "down_proj.bias"], u, this.D);
  };
  Model.prototype.embed = function (id, pos) {
    if (!(id >= 0 && id < this.V && id === Math.floor(id))) { throw new Error("token id must be an int in [0, " + this.V + "), got " + id); }
    var D = this.D, x = new Float64Array(D), e = this.w["tok_emb.weight"], p = this.w["pos_emb.emb.weight"];
    for (var i = 0; i < D; i++) {
      x[i] = Math.fround(e[id * D + i] * this.embScale) + (p ? p[pos * D + i] : 0);
    }
    return x;
  };
  Model.prototype.forward = function (ids, cache, options) {
    var opt = options || {}, D = this.D, H = this.H, Hkv = this.Hkv, Dh = this.Dh, T = ids.length, w = this.w;
    if (!T) { throw new Error("forward needs at least one token"); }
    cache = cache || this.newCache(T);
    var past = cache.length, group = H / Hkv, scale = 1 / Math.sqrt(Dh), l, t, h, i, j;
    if (past + T > cache.maxLen || past + T > this.config.max_seq_len) {
      throw new Error(past + " cached + " + T + " new tokens exceed the cache (" + cache.maxLen + ") or max_seq_len=" + this.config.max_seq_len);
    }
    var xs = ids.map(function (id, k) { return this.embed(id, past + k); }, this);
    var attention = opt.weights ? [] : null, norms = [xs.map(size)], lens = opt.weights ? [this.readout(xs[T - 1])] : null;
    for (l = 0; l < this.L; l++) {
      var pre = "layers." + l + ".", a = pre + "self_attn.", lc = cache.layers[l], qs = [], maps = [];
      for (t = 0; t < T; t++) {
        var hx = this.norm(xs[t], pre + "attn_norm"), q = linear(w[a + "q_proj.weight"], w[a + "q_proj.bias"], hx, D);
        var k = linear(w[a + "k_proj.weight"], w[a + "k_proj.bias"], hx, Hkv * Dh);
        var v = linear(w[a + "v_proj.weight"], w[a + "v_proj.bias"], hx, Hkv * Dh);
        if (this.invFreq) { this.rope(q, H, past + t); this.rope(k, Hkv, past + t); }
        for (h = 0; h < Hkv; h++) {
          lc.k.set(k.subarray(h * Dh, h * Dh + Dh), (h * cache.maxLen + past + t) * Dh);
          lc.v.set(v.subarray(h * Dh, h * Dh + Dh), (h * cache.maxLen + past + t) * Dh);
        }
        qs.push(q);
      }
      for (h = 0; h < H; h++) { maps.push([]); }
      for (t = 0; t < T; t++) {
        var n = past + t + 1, out = new Float64Array(D);  // causal: keys 0 .. past + t
        for (h = 0; h < H; h++) {
          var kv = Math.floor(h / group), base = kv * cache.maxLen * Dh, sc = new Float64Array(n), mx = -Infinity, sum = 0;
          for (j = 0; j < n; j++) {
            var dot = 0;
            for (i = 0; i < Dh; i++) { dot += qs[t][h * Dh + i] * lc.k[base + j * Dh + i]; }
            sc[j] = dot * scale;
            if (sc[j] > mx) { mx = sc[j]; }
          }
          for (j = 0; j < n; j++) { sc[j] = Math.exp(sc[j] - mx); sum += sc[j]; }
          for (j = 0; j < n; j++) {
            sc[j] /= sum;
            for (i = 0; i < Dh; i++) { out[h * Dh + i] += sc[j] * lc.v[base + j * Dh + i]; }
          }
          if (attention) { maps[h].push(Float32Array.from(sc)); }
        }
        var o = linear(w[a + "out_proj.weight"], w[a + "out_proj.bias"], out, D);
        for (i = 0; i < D; i++) { xs[t][i] += o[i]; }
      }
      for (t = 0; t < T; t++) {
        var f = this.ffn(this.norm(xs[t], pre + "ffn_norm"), pre + "ffn.");
        for (i = 0; i < D; i++) { xs[t][i] += f[i]; }
      }
      if (attention) { attention.push(maps); lens.push(this.readout(xs[T - 1])); }
      norms.push(xs.map(size));
    }
    cache.length = past + T;
    var logits = [], last = opt.lastOnly ? T - 1 : 0;
    for (t = last; t < T; t++) { logits.push(this.readout(xs[t])); }
    return {logits: logits, attention: attention, norms: norms, lens: lens};
  };
  // the output head on a residual stream: the logits, or, on a block's output, the "logit lens"
  Model.prototype.readout = function (x) { return Float32Array.from(linear(this.headW, null, this.norm(x, "final_norm"), this.V)); };
  function size(x) { var s = 0; for (var i = 0; i < x.length; i++) { s += x[i] * x[i]; } return Math.sqrt(s); }

  // ------------------------------------------------------------------ sampling
  function rng(seed) {  // mulberry32: the same seed gives the same numbers in every browser (not torch's generator)
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  NS.rng = rng;
  function argmax(x) { var b = 0; for (var i = 1; i < x.length; i++) { if (x[i] > x[b]) { b = i; } } return b; }
  NS.argmax = argmax;
  // minitfm.generation.sampling's order: Temperature, TopK (keeps ties with the k-th), TopP (drops a token when the
  // tokens ranked above it already hold >= p) -> the probabilities sampling draws from (0 for removed tokens)
  function process(logits, o) {
    var V = logits.length, x = new Float64Array(V), i, temperature = o.temperature == null ? 1 : o.temperature;
    if (!(temperature > 0)) { throw new Error("temperature must be > 0 (greedy decoding is its limit), got " + temperature); }
    for (i = 0; i < V; i++) { x[i] = logits[i] / temperature; }
    if (o.topK > 0 && o.topK < V) {
      var kth = Array.from(x).sort(function (p, q) { return q - p; })[o.topK - 1];
      for (i = 0; i < V; i++) { if (x[i] < kth) { x[i] = -Infinity; } }
    }
    var mx = Math.max.apply(null, Array.from(x)), p = new Float64Array(V), sum = 0;
    for (i = 0; i < V; i++) { p[i] = Math.exp(x[i] - mx); sum += p[i]; }
    for (i = 0; i < V; i++) { p[i] /= sum; }
    if (o.topP != null && o.topP < 1) {
      var order = Array.from(p.keys()).sort(function (u, v) { return p[v] - p[u] || u - v; }), before = 0, kept = 0;
      order.forEach(function (id) { var q = p[id]; if (before >= o.topP) { p[id] = 0; } else { kept += q; } before += q; });
      for (i = 0; i < V; i++) { p[i] /= kept; }
    }
    return p;
  }
  NS.process = process;
  function draw(p, u) { var c = 0; for (var i = 0; i < p.length; i++) { c += p[i]; if (u < c && p[i] > 0) { return i; } } return argmax(p); }
  NS.draw = draw;

  Model.prototype.generate = function (ids, n, options) {
    var o = options || {}, cache = this.newCache(ids.length + n), random = rng(o.seed || 0), out = [];
    var eos = o.eos == null ? this.config.eos_id : o.eos, last = this.forward(ids, cache, {lastOnly: true}).logits[0];
    for (var s = 0; s < n; s++) {
      var id = o.sample ? draw(process(last, o), random()) : argmax(last);
      out.push(id);
      if (id === eos || s === n - 1) { break; }
      last = this.forward([id], cache).logits[0];
    }
    return out;
  };

  // ------------------------------------------------------------------ tokenizers
  // Python's str.split() and the regex module's \s: Unicode whitespace (str.split also splits at U+001C..U+001F)
  var SPACE = "\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
  var SPLIT = new RegExp("[" + SPACE + "\\u001c-\\u001f]+", "u");
  var GPT2 = null;
  function gpt2Pattern() {  // minitfm.text.pretokenize.GPT2_SPLIT_PATTERN with \s spelled as the regex module reads it
    GPT2 = GPT2 || new RegExp("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + SPACE + "\\p{L}\\p{N}]+|[" + SPACE +
                              "]+(?![^" + SPACE + "])|[" + SPACE + "]+", "gu");
    return GPT2;
  }
  function hexBytes(hex) { var b = new Uint8Array(hex.length / 2); for (var i = 0; i < b.length; i++) { b[i] = parseInt(hex.substr(2 * i, 2), 16); } return b; }
  function escapeRe(s) { return s.replace(/[.*+?^${}()|[\]\\\/-]/g, "\\$&"); }

  function WordTokenizer(spec) {
    this.spec = spec;
    this.stoi = new Map(spec.itos.map(function (wd, i) { return [wd, i]; }));
  }
  WordTokenizer.prototype.encode = function (text) {
    var s = this.spec, words = text.split(SPLIT).filter(function (wd) { return wd.length > 0; }), self = this;
    var ids = words.map(function (wd) { var i = self.stoi.get(wd); return i === undefined ? s.unk_id : i; });
    return {ids: (s.add_bos ? [s.bos_id] : []).concat(ids), pieces: (s.add_bos ? [s.itos[s.bos_id]] : []).concat(words)};
  };
  WordTokenizer.prototype.piece = function (id) { return this.spec.itos[id]; };
  WordTokenizer.prototype.decode = function (ids) {
    var s = this.spec, out = [];
    for (var k = 0; k < ids.length; k++) {
      if (ids[k] === s.eos_id) { break; }
      if (ids[k] !== s.pad_id && ids[k] !== s.bos_id) { out.push(s.itos[ids[k]]); }
    }
    return out.join(" ");
  };

  function BPETokenizer(spec) {
    this.spec = spec;
    this.bytes = {};
    var self = this;
    spec.vocab.forEach(function (e) { self.bytes[e[0]] = hexBytes(e[1]); });
    this.ranks = new Map();
    spec.merges.forEach(function (m, r) { self.ranks.set(m[0] * 4194304 + m[1], [r, m[2]]); });
    this.special = new Map(spec.special_tokens);
    var names = spec.special_tokens.map(function (e) { return e[0]; }).sort(function (a, b) { return b.length - a.length; });
    this.specialRe = names.length ? new RegExp(names.map(escapeRe).join("|"), "gu") : null;
    this.utf8 = new TextEncoder();
  }
  BPETokenizer.prototype.merge = function (ids) {  // the lowest rank first, the leftmost among equals
    for (;;) {
      var best = -1, rank = Infinity, made = 0;
      for (var i = 0; i + 1 < ids.length; i++) {
        var m = this.ranks.get(ids[i] * 4194304 + ids[i + 1]);
        if (m && m[0] < rank) { rank = m[0]; best = i; made = m[1]; }
      }
      if (best < 0) { return ids; }
      ids.splice(best, 2, made);
    }
  };
  BPETokenizer.prototype.encodeText = function (text, ids, pieces) {
    var self = this, parts = text.match(gpt2Pattern()) || [];
    parts.forEach(function (part) {
      var b = self.utf8.encode(part), one = [];
      for (var i = 0; i < b.length; i++) { one.push(self.spec.byte_ids[b[i]]); }
      self.merge(one).forEach(function (id) { ids.push(id); pieces.push(self.piece(id)); });
    });
  };
  BPETokenizer.prototype.encode = function (text, plain) {  // plain: special tokens' text is ordinary text (allowed_special=set())
    var lone = /[\uD800-\uDFFF]/u.exec(text);
    if (lone) { throw new Error("text holds a lone surrogate at index " + lone.index + ": half of a UTF-16 pair, not a character"); }
    var ids = [], pieces = [], start = 0, m, re = plain ? null : this.specialRe;
    if (re) {
      re.lastIndex = 0;
      while ((m = re.exec(text)) !== null) {
        if (m.index > start) { this.encodeText(text.slice(start, m.index), ids, pieces); }
        ids.push(this.special.get(m[0]));
        pieces.push(m[0]);
        start = m.index + m[0].length;
      }
    }
    if (start < text.length) { this.encodeText(text.slice(start), ids, pieces); }
    return {ids: ids, pieces: pieces};
  };
  BPETokenizer.prototype.piece = function (id) {  // a token's text, or its bytes (<E6>) when they cut a character
    var b = this.bytes[id];
    try { return new TextDecoder("utf-8", {fatal: true}).decode(b); } catch (e) {
      return Array.from(b).map(function (x) { return "<" + (x < 16 ? "0" : "") + x.toString(16).toUpperCase() + ">"; }).join("");
    }
  };
  BPETokenizer.prototype.decode = function (ids) {
    var self = this, n = 0, chunks = ids.map(function (id) { var b = self.bytes[id]; n += b.length; return b; }), all = new Uint8Array(n), at = 0;
    chunks.forEach(function (b) { all.set(b, at); at += b.length; });
    return new TextDecoder("utf-8").decode(all);
  };
  NS.tokenizer = function (spec) {
    if (spec.kind === "word") { return new WordTokenizer(spec); }
    if (spec.kind === "bpe") { return new BPETokenizer(spec); }
    throw new Error("unknown tokenizer kind " + JSON.stringify(spec.kind));
  };


  // ------------------------------------------------------------------ the registered assets, each made once
  NS.models = {};
  NS.load = function (name) {
    if (!NS.models[name]) {
      var asset = NS.assets[name];
      if (!asset) { throw new Error("no asset named " + JSON.stringify(name) + " was loaded"); }
      var spec = asset.header.tokenizer;  // an asset written without a tokenizer (a test's) runs ids only
      NS.models[name] = {model: new Model(asset), tokenizer: spec ? NS.tokenizer(spec) : null};
    }
    return NS.models[name];
  };


  // ------------------------------------------------------------------ the chat (a chat model: header.chat holds its template's ids)
  // One question, single-turn, as ChatTemplate(tokenizer, bos_id).prompt_ids([{role: "user", content: question}]) renders it:
  // [bos] <|user|> the question's bytes (a typed "<|end|>" stays bytes) <|end|> <|assistant|>
  NS.chatPrompt = function (name, question) {
    var loaded = NS.load(name), t = loaded.model.header.chat;
    if (!t) { throw new Error("the asset " + name + " is not a chat model (its header has no chat template)"); }
    return (t.bos == null ? [] : [t.bos]).concat([t.user], loaded.tokenizer.encode(question, true).ids, [t.end, t.assistant]);
  };
  // The reply to prompt ids, greedy (or sampled: {temperature, seed}), up to <|end|> included or until the conversation
  // holds the trained length (header.trained_length, else max_seq_len) -> {ids, ended, text}
  NS.chatReply = function (name, ids, options) {
    var loaded = NS.load(name), m = loaded.model, t = m.header.chat, o = options || {};
    var cap = Math.min(m.config.max_seq_len, m.header.trained_length || Infinity), room = cap - ids.length;
    if (room < 1) { throw new Error("the prompt holds " + ids.length + " tokens; the model reads at most " + cap); }
    var temperature = o.temperature || 0;
    var out = m.generate(ids, room, temperature > 0 ? {sample: true, temperature: temperature, seed: o.seed || 0, eos: t.end} : {eos: t.end});
    var ended = out[out.length - 1] === t.end;
    return {ids: out, ended: ended, text: loaded.tokenizer.decode(ended ? out.slice(0, -1) : out)};
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
