// Runs the live model's engine (minitfm/viz/live_engine.js) under Node, without a browser or a DOM, for
// tests/viz/test_live_model_node.py, which compares what it prints with PyTorch and minitfm's tokenizers.
//
//   node live_model_node.js JOB.json > RESULTS.json
//
// JOB.json: {engine: path of live_engine.js, scripts: [asset scripts NAME.js, as the site serves them], tasks: [...]};
// each task gives one result (a task that throws gives {error: message}), in order:
//   {kind: "forward", asset, ids, chunk, generate, weights}  logits of the whole prompt at once; "steps": the same
//       logits one token at a time through the KV cache; "chunked": the first `chunk` tokens at once, then 3 at a time
//       through the cache; "greedy": model.generate(ids, generate, {eos: -1}); with weights: attention, logit lens
//   {kind: "tokenize", spec, texts, plain}  per text {ids, pieces, text: decode(ids)} or {error}
//   {kind: "process", rows, settings}       minitfmLive.process(row, setting) per row and setting
//   {kind: "sample", asset, ids, seeds, n, options}  model.generate(ids, n, {sample: true, seed, ...options}) per seed
//   {kind: "chat", asset, questions}        per question {prompt: chatPrompt(...), reply: chatReply(...)}
//   {kind: "model", header}                 new Model({header, bytes}) of a header, no weights: the refusal's message
"use strict";
const fs = require("fs");
const path = require("path");

const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
if (typeof document !== "undefined" || typeof window !== "undefined") {
  throw new Error("this check runs the engine without a DOM, but this Node defines document or window");
}
const live = require(path.resolve(job.engine));  // the engine exports its namespace; the asset scripts fill its assets
for (const script of job.scripts) { require(path.resolve(script)); }
if (live !== globalThis.minitfmLive) { throw new Error("require(live_engine.js) is not globalThis.minitfmLive"); }

const arrays = (rows) => rows.map((a) => Array.from(a));

function forward(task) {
  const model = live.load(task.asset).model, ids = task.ids;
  const full = model.forward(ids, null, {weights: !!task.weights});
  let cache = model.newCache(ids.length);
  const steps = ids.map((id) => Array.from(model.forward([id], cache).logits[0]));
  cache = model.newCache(ids.length);
  const chunked = [];
  for (let at = 0; at < ids.length;) {
    const size = at === 0 ? Math.max(1, task.chunk) : 3, out = model.forward(ids.slice(at, at + size), cache);
    out.logits.forEach((a) => chunked.push(Array.from(a)));
    at += size;
  }
  const result = {logits: arrays(full.logits), steps: steps, chunked: chunked, cached: cache.length,
                  greedy: task.generate ? model.generate(ids, task.generate, {eos: -1}) : null};
  if (task.weights) {
    result.lens = arrays(full.lens);
    result.attention = full.attention.map((layer) => layer.map(arrays));
  }
  return result;
}

function tokenize(task) {
  const tok = live.tokenizer(task.spec);
  return task.texts.map((text) => {
    try {
      const e = tok.encode(text, task.plain);
      return {ids: e.ids, pieces: e.pieces, text: tok.decode(e.ids)};
    } catch (err) { return {error: err.message}; }
  });
}

const RUN = {
  forward: forward,
  tokenize: tokenize,
  process: (task) => task.rows.map((row) => task.settings.map((o) => Array.from(live.process(row, o)))),
  sample: (task) => task.seeds.map((seed) => live.load(task.asset).model.generate(task.ids, task.n,
    Object.assign({sample: true, seed: seed}, task.options))),
  chat: (task) => task.questions.map((q) => { const ids = live.chatPrompt(task.asset, q);
    return {prompt: ids, reply: live.chatReply(task.asset, ids)}; }),
  model: (task) => { new live.Model({header: task.header, bytes: new Uint8Array(0)}); return null; },
};

const results = job.tasks.map((task) => {
  try {
    if (!RUN[task.kind]) { throw new Error("unknown task kind " + JSON.stringify(task.kind)); }
    return RUN[task.kind](task);
  } catch (err) { return {error: err.message}; }
});
process.stdout.write(JSON.stringify(results));
