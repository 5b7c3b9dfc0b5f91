"""The live model's engine (minitfm/viz/live_engine.js) under Node, with no browser and no DOM, against PyTorch and
minitfm's tokenizers: so a machine without Chromium still checks the page's numerics (test_live_model.py and
test_live_chat.py keep the page itself, in Chromium).

One Node process (tests/viz/live_model_node.js) loads the engine and the asset scripts exactly as the site serves them
(``live_model.bundle``: the header and the weights in base64) and runs every task; this module compares:
- logits of a whole prompt, the same logits one token at a time through the KV cache and in chunks after a cached
  prefix, the attention weights and the logit lens, on the shipped float16 assets (``small_lm``, chapter 15's
  ``assistant_lm``), the float32 checkpoint and four tiny configurations, each with one prompt of the longest length
  it was trained on (``trained_length``: 32 and 68 tokens; the tiny ones' ``max_seq_len``, 48);
- greedy tokens generated up to that length, and the chat's prompts and replies;
- the tokenizers' ids and decoded text (word-level, byte-level BPE with merges, chapter 15's bytes; Chinese, emoji,
  whitespace classes, special tokens as specials and as plain text, a lone surrogate refused);
- the sampling probabilities of temperature, top-k and top-p, and a sampling seed replaying its text.

Tolerances. The engine reads the float32 weights exactly and computes in float64, rounding where float32 PyTorch
rounds by definition (the scaled embedding, RoPE's angles) and its outputs (logits, attention as Float32Array). So:
- against PyTorch in float64 on the same weights it differs by that output rounding, |logit| * 2^-24 (about 8e-7 for
  logits near 13), and by RoPE's cos/sin, which minitfm computes in float32 even for a float64 model
  (``complex_rotation``) and the engine in double: a relative 6e-8 on every rotated query and key, measured at up to
  4.5e-6 over 68 tokens. TIGHT = 2e-5 is four times that, and five times below LOOSE;
- against PyTorch in float32 it differs by float32's own error (float32 vs float64 PyTorch: about 1.4e-5 here at 68
  tokens, BLAS-dependent): LOOSE = 1e-4, the page tests' bound, leaves a margin for another CPU's kernels;
- probabilities (softmax of float64 in the engine, float32 in PyTorch): 1e-6, float32's rounding of values <= 1;
  attention weights against float32 PyTorch: 1e-5, the page tests' bound.
Greedy tokens must be equal; where they differ, the test passes only if PyTorch's top two logits at that step are
within 2 * LOOSE (a tie that rounding may break either way) and the engine chose one of the two.
"""
from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from minitfm.generation import generate
from minitfm.generation.sampling import Temperature, TopK, TopP, apply_processors
from minitfm.lm import assistant_lm as A
from minitfm.lm.prose import byte_tokenizer
from minitfm.lm.corpus import generate_sentences, make_tokenizer
from minitfm.lm.small_lm import load_small_lm
from minitfm.viz import live_model as lm
from test_live_chat import EXTRA, QUESTIONS, TEMPLATE, _prompt, _python_reply
from test_live_model import PROMPTS, SETTINGS, SPECIALS, TEXTS, TINY, _bpe, _byte_tokenizer, _tiny_model

SCRIPT = Path(__file__).with_name("live_model_node.js")
TIGHT, LOOSE, PROB, ATTENTION = 2e-5, 1e-4, 1e-6, 1e-5
NODE_TIMEOUT_S = 300


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js (`node`, 18 or newer) is not on PATH: the live engine's numerics are tested under Node, "
                    "which the book build needs too (README: install Node.js/npm)")
    return node


def run_engine(tasks: list[dict], scripts: list[Path], folder: Path) -> list:
    """Every task's result from one Node process that loads live_engine.js and the asset scripts."""
    job = folder / "job.json"
    job.write_text(json.dumps({"engine": str(Path(lm.__file__).with_name("live_engine.js")),
                               "scripts": [str(s) for s in scripts], "tasks": tasks}), encoding="utf-8")
    proc = subprocess.run([_node(), str(SCRIPT), str(job)], capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
    assert proc.returncode == 0, f"node {SCRIPT.name} failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    results = json.loads(proc.stdout)
    assert len(results) == len(tasks)
    return results


def _tiny_models() -> dict:
    models = {name: _tiny_model(seed, **TINY[name]) for seed, name in enumerate(sorted(TINY))}
    models["byte_tiny"] = _tiny_model(7, vocab_size=256 + len(SPECIALS), pad_id=0, bos_id=256, eos_id=256,
                                      scale_embeddings=False)  # chapter 15's kind: bytes, special tokens from 256
    return models


def _long(ids: list[int], length: int, vocab: int) -> list[int]:
    """``ids`` continued to ``length`` tokens (a deterministic walk over the vocabulary, ids >= 3)."""
    return (ids + [3 + (7 * k + 5) % (vocab - 3) for k in range(length)])[:length]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """Builds the cases (model, prompts) and runs them all in one Node process -> {case: (model, prompts, results)}."""
    folder = tmp_path_factory.mktemp("live_node")
    live = folder / "_assets" / "live"
    scripts = [p for p in lm.bundle(live) if p.name != "live_model.js"]  # the shipped assets as the site serves them
    words = make_tokenizer()
    sentences = sum((words.encode(s) for s in generate_sentences(8, seed=5)), [])
    small_len, chat_len = lm.SHIPPED["small_lm"].trained_length, A.trained_length()
    small_prompts = [words.encode(p) for p in PROMPTS] + [sentences[:small_len]]
    chat_prompts = [_prompt(q) for q in QUESTIONS]
    chat_prompts.append(_long(chat_prompts[0], chat_len, 256))
    models = {"small_lm": (lm.model_from_asset("small_lm"), small_prompts, small_len),  # the page's float16 weights
              "small_lm32": (load_small_lm(), small_prompts, small_len),  # float32: the checkpoint itself
              "assistant_lm": (lm.model_from_asset("assistant_lm"), chat_prompts, chat_len)}
    model, tokenizer = load_small_lm(), make_tokenizer()
    lm.save_asset(*lm.encode_asset(model, tokenizer, "small_lm32", "float32"), folder)
    for name, tiny in _tiny_models().items():
        c = tiny.config
        models[name] = (tiny, [[1, 5, 7, 2, 9, 30, 3], [4], _long([1], c.max_seq_len, c.vocab_size)], c.max_seq_len)
        lm.save_asset(*lm.encode_asset(tiny, _byte_tokenizer() if name == "byte_tiny" else None, name, "float32"),
                      folder)
    for name in ["small_lm32"] + sorted(_tiny_models()):
        scripts.append(live / f"{name}.js")
        scripts[-1].write_text(lm.asset_script(name, folder), encoding="utf-8")
    tasks, where = [], {}
    for name, (model, prompts, length) in models.items():
        for k, ids in enumerate(prompts):
            where[name, k] = len(tasks)
            tasks.append({"kind": "forward", "asset": name, "ids": ids, "chunk": max(1, len(ids) // 2),
                          "generate": length - len(ids), "weights": True})
    results = run_engine(tasks, scripts, folder)
    for (name, k), i in where.items():
        assert "error" not in results[i], (name, k, results[i])
    return {name: (model, prompts, [results[where[name, k]] for k in range(len(prompts))])
            for name, (model, prompts, _) in models.items()}, scripts, folder


def test_a_missing_node_fails_by_name(monkeypatch):
    monkeypatch.setenv("PATH", "")  # CI installs Node: its absence is a failure that says so, never a skip
    with pytest.raises(pytest.fail.Exception, match=r"Node.js \(`node`, 18 or newer\) is not on PATH"):
        _node()


def test_the_engine_has_no_dom_and_the_page_script_is_engine_then_interface():
    engine_text = lm.engine_js()
    assert not re.search(r"\b(document|window)\b", engine_text), "live_engine.js must not touch the DOM"
    assert lm.page_js().startswith(engine_text) and "NS.mount = function" in lm.page_js()
    assert "NS.mount" not in engine_text and "NS.Model = Model" in engine_text


def test_logits_and_the_kv_cache_equal_pytorch_up_to_the_trained_length(engine):
    cases, _, _ = engine
    worst = {}
    for name, (model, prompts, results) in cases.items():
        double = _copy_double(model)
        for ids, got in zip(prompts, results):
            x = torch.tensor([ids])
            with torch.no_grad():
                f32, inter = model(x, return_intermediates=True)
                f64 = double(x)
                lens = torch.stack([model.lm_head(model.final_norm(h[0, -1])) for h in inter.decoder_hidden])
            for key in ("logits", "steps", "chunked"):  # all at once, one by one through the cache, chunked
                js = torch.tensor(got[key], dtype=torch.float64)
                assert js.shape == f32[0].shape, (name, key, js.shape)
                err64, err32 = (js - f64[0]).abs().max().item(), (js - f32[0].double()).abs().max().item()
                worst[name] = max(worst.get(name, (0, 0)), (err64, err32))
                assert err64 <= TIGHT and err32 <= LOOSE, (name, len(ids), key, err64, err32)
            assert got["cached"] == len(ids)
            assert (torch.tensor(got["lens"], dtype=torch.float64) - lens.double()).abs().max().item() <= LOOSE, name
            for layer, weights in enumerate(inter.decoder_self):  # (1, H, T, T): the engine gives the causal rows
                rows = [[row + [0.0] * (len(ids) - len(row)) for row in head] for head in got["attention"][layer]]
                assert (torch.tensor(rows) - weights[0]).abs().max().item() <= ATTENTION, (name, layer)
        assert max(len(p) for p in prompts) == _longest(name, model), name  # one prompt at the trained length
    print("max |Δ logit| engine under Node vs PyTorch float64 / float32: "
          + ", ".join(f"{n} {a:.1e} / {b:.1e}" for n, (a, b) in worst.items()))


def _copy_double(model):
    return copy.deepcopy(model).double().eval()


def _longest(name: str, model) -> int:
    return {"small_lm": 32, "small_lm32": 32, "assistant_lm": A.trained_length()}.get(name, model.config.max_seq_len)


def _same_greedy(model, ids: list[int], got: list[int], n: int, what) -> float:
    """Asserts the engine's greedy tokens are PyTorch's (a near-tie aside, see the module's docstring); returns the
    smallest gap between PyTorch's top two logits along the way."""
    out = generate(model, torch.tensor([ids]), n, eos_id=-1, return_logits=True)
    want, logits = out.new_tokens[0].tolist(), out.logits[0]  # (n, V) raw logits at every step
    top2 = logits.topk(2, dim=-1).values
    gaps = (top2[:, 0] - top2[:, 1]).tolist()
    assert len(got) == len(want) == n, (what, len(got), len(want), n)
    if got != want:
        i = next(k for k in range(n) if got[k] != want[k])
        tied = logits[i] >= logits[i].max() - 2 * LOOSE
        assert gaps[i] <= 2 * LOOSE and bool(tied[got[i]]), (what, i, got, want, gaps[i])
    return min(gaps)


def test_greedy_tokens_up_to_the_trained_length_equal_pytorch(engine):
    cases, _, _ = engine
    smallest = {}
    for name, (model, prompts, results) in cases.items():
        for ids, got in zip(prompts, results):
            n = _longest(name, model) - len(ids)
            if n:
                smallest[name] = min(smallest.get(name, 1e9), _same_greedy(model, ids, got["greedy"], n, (name, ids)))
    assert {"small_lm", "assistant_lm"} <= set(smallest)
    print("greedy tokens equal to the trained length; smallest top-2 logit gap on the way: "
          + ", ".join(f"{n} {g:.2e}" for n, g in smallest.items()))


def test_the_chat_prompts_and_replies_equal_python(engine):
    _, scripts, folder = engine
    model = lm.model_from_asset("assistant_lm")
    cap, short = A.trained_length(), "Sort these digits: "
    long_question = short + "7" * (cap - 2 - len(_prompt(short)))  # the reply stops at the trained length, not <|end|>
    questions = QUESTIONS + EXTRA + [long_question]
    too_long = {"kind": "chat", "asset": "assistant_lm", "questions": ["x" * cap]}
    got, refused = run_engine([{"kind": "chat", "asset": "assistant_lm", "questions": questions}, too_long], scripts,
                              folder)
    for question, g in zip(questions, got):
        want = _python_reply(model, question)
        assert g["prompt"] == _prompt(question), question
        assert g["reply"]["ids"] == want and g["reply"]["ended"] == (want[-1] == TEMPLATE.end_id), question
        assert g["reply"]["text"] == TEMPLATE.reply(want)
    assert len(got[-1]["prompt"]) + len(got[-1]["reply"]["ids"]) == A.trained_length() and not got[-1]["reply"]["ended"]
    assert f"holds {cap + 4} tokens; the model reads at most {cap}" in refused["error"]


def test_the_tokenizers_equal_python(engine):
    _, scripts, folder = engine
    words, chat_bytes = make_tokenizer(), byte_tokenizer()
    word_texts = PROMPTS + ["", "  the\u2003cat\x1csees\u3000a dog  ", "cat\u00a0dog", "the Unicorn"]
    chat_texts = TEXTS + ["<|user|>What is 12 + 7?<|end|><|assistant|>", "术语 attention → 注意力"]
    shipped = {name: lm.read_asset(name)[0]["tokenizer"] for name in ("small_lm", "assistant_lm")}  # the page's specs
    assert shipped["small_lm"] == lm.tokenizer_spec(words) and shipped["assistant_lm"] == lm.tokenizer_spec(chat_bytes)
    cases = [(words, shipped["small_lm"], word_texts, False), (chat_bytes, shipped["assistant_lm"], chat_texts, False),
             (chat_bytes, shipped["assistant_lm"], chat_texts, True)]
    cases += [(tok, lm.tokenizer_spec(tok), TEXTS, plain)
              for tok in (_bpe(), _byte_tokenizer()) for plain in (False, True)]
    lone = {"kind": "tokenize", "spec": lm.tokenizer_spec(_byte_tokenizer()), "texts": ["a\ud83d b"], "plain": False}
    tasks = [{"kind": "tokenize", "spec": spec, "texts": texts, "plain": plain} for _, spec, texts, plain in cases]
    results = run_engine(tasks + [lone], scripts, folder)
    for (tok, _, texts, plain), got in zip(cases, results):
        for text, g in zip(texts, got):
            if tok is words:
                assert g["ids"] == tok.encode(text) and g["pieces"][1:] == text.split(), text
                assert g["text"] == tok.decode(tok.encode(text)), text
            else:
                want = tok.encode(text, allowed_special=set()) if plain else tok.encode(text)
                assert g["ids"] == want, (text, plain)
                assert g["text"] == tok.decode(want) == text, (text, plain)
    bpe = _bpe()  # the plain cases differ from the others somewhere
    assert any(bpe.encode(t) != bpe.encode(t, allowed_special=set()) for t in TEXTS)
    assert "lone surrogate at index 1" in results[-1][0]["error"]


def test_sampling_probabilities_and_seeds_equal_minitfm(engine):
    _, scripts, folder = engine
    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(0)) * 3
    logits[0, :4] = logits[0, 4]  # ties at the top-k cut
    logits = torch.cat([logits, torch.tensor([[0.0] * 4 + [-1e4] * 36])])  # 1/4 each: top-p 0.5 cuts exactly at 0.5
    ids = make_tokenizer().encode("the cat")
    sample = {"kind": "sample", "asset": "small_lm", "ids": ids, "seeds": [3, 3, 4, 5, 6, 7], "n": 10,
              "options": {"temperature": 1.5, "topK": 0, "topP": 1}}
    alibi = {"norm": "rms", "pos": "alibi", "ffn": "swiglu", "norm_first": True}
    process = {"kind": "process", "rows": logits.tolist(), "settings": SETTINGS}
    got, runs, refused = run_engine([process, sample, {"kind": "model", "header": {"config": alibi}}], scripts, folder)
    for row, per_setting in zip(logits, got):
        for o, probs in zip(SETTINGS, per_setting):
            processors = [Temperature(o["temperature"])] + ([TopK(o["topK"])] if o["topK"] else []) + [TopP(o["topP"])]
            want = apply_processors(torch.ones(1, 1, dtype=torch.long), row[None], processors).softmax(-1)[0]
            assert (torch.tensor(probs, dtype=torch.float64) - want.double()).abs().max().item() <= PROB, o
    assert runs[0] == runs[1] and any(run != runs[0] for run in runs[2:])  # a seed replays its text; others differ
    assert 'pos="alibi"' in refused["error"]
