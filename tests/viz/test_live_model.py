"""The live model of the pages (minitfm/viz/live_model.py, live_engine.js, live_model.js): the shipped asset is current,
the JavaScript forward pass equals PyTorch's (max |Δ logit| <= 1e-4 in float32), its greedy tokens equal
``minitfm.generation.generate``'s, its tokenizers give minitfm's ids (Chinese and emoji included), and the explorer
mounts from ``file://`` in both languages, on a phone-sized viewport, with 0 axe-core violations.

One headless Chromium (the system's, as in the site tests) serves every browser test of this module; the pages load
the engine and the assets from ``file://`` with ``<script src>``, as a book page opened offline does. The engine's
numerics are checked without a browser too, under Node: test_live_model_node.py.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from minitfm.config import ModelConfig
from minitfm.generation import generate
from minitfm.generation.sampling import Temperature, TopK, TopP, apply_processors
from minitfm.lm.corpus import make_tokenizer
from minitfm.lm.small_lm import load_small_lm
from minitfm.models import DecoderOnlyLM
from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.bpe_trainer import train_bpe
from minitfm.viz import live_model as lm
from minitfm.viz.static_explorers import _viridis
from site_browser import browser_for_a_module, live_site, page_with_errors as _page

ROOT = Path(__file__).resolve().parents[2]
AXE = next((p for p in (ROOT / "_build/test_assets/axe.min.js", ROOT / "tools/site/node_modules/axe-core/axe.min.js")
            if p.is_file()), None)
# The accessibility audit is part of what these tests claim: without axe-core it fails (after every other check),
# never passes silently. CI has it (.ci/run builds the book first, which stages it); `npm ci` in tools/site is enough.
AXE_MISSING = ("axe-core not found (_build/test_assets/axe.min.js or tools/site/node_modules/axe-core/axe.min.js), "
               "so the accessibility audit did not run: `bash tools/build_book.sh`, or `npm ci` in tools/site")
PROMPTS = ["the cat sees a dog .", "the", "some old farmers near the river laugh . a", "The Cat\u3000sees\ta unicorn ."]
TOLERANCE = 1e-4  # max |Δ logit| between the page and PyTorch, both float32
# small configs covering every choice the engine computes; each differs from the shipped model somewhere
TINY = {
    "layer_learned_gelu_untied_gqa": dict(norm="layer", pos="learned", ffn="gelu", tie_embeddings=False, bias=True,
                                          n_heads=4, n_kv_heads=2),
    "rms_rope_gelu_tanh_unscaled_mqa": dict(norm="rms", pos="rope", ffn="gelu_tanh", scale_embeddings=False, bias=False,
                                            n_heads=4, n_kv_heads=1, rope_base=500.0, rope_scale=2.0),
    "rms_rope_swiglu_bias": dict(norm="rms", pos="rope", ffn="swiglu", bias=True, n_heads=2),
}
TEXTS = ["hello world", "  two  spaces\n\nand lines\t\ttabs ", "it's they're we'll I'd 12345 3.14",
         "注意力机制 attention 是什么？", "emoji 🙂👍🏽 and 🇨🇳 flags", "<|endoftext|>a<|im_start|>user\n你好<|im_end|>",
         "<|endoftext|><|endoftext|> trailing   ", "tabs\u3000ideographic\u00a0nbsp \u2028 line sep", ""]
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _tiny_model(seed: int, **overrides) -> DecoderOnlyLM:
    torch.manual_seed(seed)
    base = dict(vocab_size=40, d_model=32, n_layers=2, max_seq_len=48, pos="rope", ffn="swiglu")
    model = DecoderOnlyLM(ModelConfig(**{**base, **overrides}))
    with torch.no_grad():  # trained-looking norms and biases, not ones and zeros
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.3 * torch.randn_like(p))
    return model.eval()


def _bpe() -> Tokenizer:
    text = "\n".join(TEXTS[:6]) * 3 + " the attention 注意力 注意 🙂🙂 it's 2024 " * 5
    vocab, merges = train_bpe(text, 256 + 60 + len(SPECIALS), SPECIALS)
    return Tokenizer(vocab, merges, SPECIALS)


def _byte_tokenizer() -> Tokenizer:  # chapter 15's kind: bytes, no merges, special tokens from id 256
    vocab = {i: bytes([i]) for i in range(256)} | {256 + i: t.encode() for i, t in enumerate(SPECIALS)}
    return Tokenizer(vocab, [], SPECIALS)


# ---------------------------------------------------------------------------------------------- Python side
def test_the_shipped_asset_is_current():
    problems = lm.asset_problems("small_lm")
    assert not problems, f"{problems}: run `python -m minitfm.viz.live_model write` and commit minitfm/viz/live_assets/"
    header, _ = lm.read_asset("small_lm")
    error = header["rounding_error"]  # float16: measured when written; the page states it
    assert header["dtype"] == "float16" and error["max_abs_logit"] < 0.02 and error["same_argmax"] == error["positions"]


def test_the_currency_check_can_fail(tmp_path):
    for suffix in (".json", ".bin"):
        shutil.copy(lm.ASSETS / f"small_lm{suffix}", tmp_path / f"small_lm{suffix}")
    header = json.loads((tmp_path / "small_lm.json").read_text(encoding="utf-8"))
    header["source"]["sha256"] = "0" * 64  # as if the checkpoint had been retrained since
    (tmp_path / "small_lm.json").write_text(json.dumps(header), encoding="utf-8")
    assert any(p.startswith("source differs") for p in lm.asset_problems("small_lm", tmp_path))
    data = bytearray((tmp_path / "small_lm.bin").read_bytes())
    data[100] ^= 1
    (tmp_path / "small_lm.bin").write_bytes(bytes(data))
    assert "does not match its header" in lm.asset_problems("small_lm", tmp_path)[0]
    assert "no live asset" in lm.asset_problems("small_lm", tmp_path / "empty")[0]


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_float32_asset_reads_back_bit_for_bit(name, tmp_path):
    model = _tiny_model(0, **TINY[name])
    lm.save_asset(*lm.encode_asset(model, None, name, "float32"), tmp_path)
    rebuilt = lm.model_from_asset(name, tmp_path)
    for key, value in model.state_dict().items():
        assert torch.equal(rebuilt.state_dict()[key], value), key
    assert (rebuilt.lm_head.weight is rebuilt.tok_emb.weight) == model.config.tie_embeddings


def test_float16_rounding_error_is_measured():
    model, tokenizer = load_small_lm(), make_tokenizer()
    header, data = lm.encode_asset(model, tokenizer, "small_lm", "float16")
    error = lm.rounding_error(model, header, data, lm.SHIPPED["small_lm"].probe(tokenizer))
    assert 0 < error["max_abs_logit"] < 0.02 and 0 < error["max_abs_prob"] < 0.01
    exact = lm.rounding_error(model, *lm.encode_asset(model, tokenizer, "small_lm", "float32"), torch.tensor([[1, 5]]))
    assert exact["max_abs_logit"] == 0.0


def test_unsupported_models_and_bad_input_are_refused():
    with pytest.raises(ValueError, match="pos in .*got pos='alibi'"):
        lm.check_supported(_tiny_model(0, pos="alibi"))
    with pytest.raises(ValueError, match="ffn in .*got ffn='relu'"):
        lm.check_supported(_tiny_model(0, ffn="relu"))
    with pytest.raises(ValueError, match="Pre-LN"):
        lm.check_supported(_tiny_model(0, norm_first=False))
    with pytest.raises(TypeError, match="runs a minitfm DecoderOnlyLM, got Linear"):
        lm.check_supported(torch.nn.Linear(2, 2))
    fields = {f for f in ModelConfig.__dataclass_fields__}
    if "qk_norm" in fields:  # a field the engine does not read must keep its default
        with pytest.raises(ValueError, match="does not compute qk_norm='head'"):
            lm.check_supported(_tiny_model(0, qk_norm="head"))
    with pytest.raises(ValueError, match="dtype must be one of"):
        lm.encode_asset(_tiny_model(0), None, "x", "bfloat16")
    with pytest.raises(ValueError, match="tokenizer has 83 tokens, the model's vocab_size is 40"):
        lm.encode_asset(_tiny_model(0), make_tokenizer(), "x")
    with pytest.raises(TypeError, match="WordTokenizer or a byte-level BPE"):
        lm.tokenizer_spec(object())
    with pytest.raises(ValueError, match="no shipped live model named 'gpt2'"):
        lm.live_explorer("gpt2")
    with pytest.raises(TypeError, match="prompt must be a str, got int"):
        lm.live_explorer(prompt=3)


def test_the_cell_output_is_light_and_loads_from_the_site():
    explorer = lm.live_explorer(prompt='say "hi" </script>')
    assert len(explorer.html) < 6_000, "the weights travel as a site file, never inside a notebook output"
    assert "_assets/live/live_model.js" in explorer.html and "http://" not in explorer.html
    assert explorer.html.count("</script>") == 1 and "&quot;hi&quot; &lt;/script&gt;" in explorer.html
    assert explorer.page_bytes == explorer.engine_bytes + explorer.asset_bytes > explorer.weight_bytes
    assert explorer.engine_bytes == len(lm.page_js().encode()) and lm.page_js().startswith(lm.engine_js())
    colours = re.search(r"var VIRIDIS = (\[\[.*?\]\]);", lm.page_js(), re.S).group(1)
    assert json.loads(colours) == json.loads(_viridis()), "live_model.js's VIRIDIS must be the static explorers' map"


# ---------------------------------------------------------------------------------------------- in Chromium
@pytest.fixture(scope="module")
def chromium():
    yield from browser_for_a_module()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder laid out like the built book: the bundle in _assets/live/, pages in notebooks/."""
    root = live_site(tmp_path_factory.mktemp("site"))
    live = root / "_assets" / "live"
    folder = root / "tiny_assets"
    for seed, name in enumerate(sorted(TINY)):
        lm.save_asset(*lm.encode_asset(_tiny_model(seed, **TINY[name]), None, name, "float32"), folder)
        (live / f"{name}.js").write_text(lm.asset_script(name, folder), encoding="utf-8")
    byte_model = _tiny_model(7, vocab_size=256 + len(SPECIALS), pad_id=0, bos_id=256, eos_id=256, scale_embeddings=False)
    lm.save_asset(*lm.encode_asset(byte_model, _byte_tokenizer(), "byte_tiny", "float32"), folder)  # chapter 15's kind
    (live / "byte_tiny.js").write_text(lm.asset_script("byte_tiny", folder), encoding="utf-8")
    model, tokenizer = load_small_lm(), make_tokenizer()
    lm.save_asset(*lm.encode_asset(model, tokenizer, "small_lm32", "float32"), folder)  # the checkpoint, unrounded
    (live / "small_lm32.js").write_text(lm.asset_script("small_lm32", folder), encoding="utf-8")
    scripts = "".join(f'<script src="../_assets/live/{p.name}"></script>' for p in sorted(live.glob("*.js"))
                      if p.name != "live_model.js")
    (root / "notebooks" / "engine.html").write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>engine</title>'
        f'<script src="../_assets/live/live_model.js"></script>{scripts}</head><body></body></html>', encoding="utf-8")
    return root


FORWARD_JS = """([name, prompts]) => prompts.map(ids => {
  const m = minitfmLive.load(name).model, full = m.forward(ids, null, {weights: true});
  const cache = m.newCache(ids.length), steps = ids.map(id => Array.from(m.forward([id], cache).logits[0]));
  return {logits: full.logits.map(a => Array.from(a)), steps: steps, greedy: m.generate(ids, 12, {eos: -1}),
          lens: full.lens.map(a => Array.from(a)),
          attention: full.attention.map(l => l.map(h => h.map(r => Array.from(r))))};
})"""


def _check_forward(page, name: str, model: DecoderOnlyLM, prompts: list[list[int]]) -> float:
    worst = 0.0
    for ids, got in zip(prompts, page.evaluate(FORWARD_JS, [name, prompts])):
        x = torch.tensor([ids])
        with torch.no_grad():
            logits, inter = model(x, return_intermediates=True)
        worst = max(worst, (torch.tensor(got["logits"]) - logits[0]).abs().max().item())
        worst = max(worst, (torch.tensor(got["steps"]) - logits[0]).abs().max().item())  # with the KV cache
        with torch.no_grad():  # the logit lens: the head on the last token's stream after the embedding and each block
            lens = torch.stack([model.lm_head(model.final_norm(h[0, -1])) for h in inter.decoder_hidden])
        worst = max(worst, (torch.tensor(got["lens"]) - lens).abs().max().item())
        for layer, weights in enumerate(inter.decoder_self):
            causal = torch.tensor([[row + [0.0] * (len(ids) - len(row)) for row in head] for head in got["attention"][layer]])
            assert (causal - weights[0]).abs().max().item() < 1e-5, (name, layer)
        want = generate(model, x, 12, eos_id=-1).new_tokens[0].tolist()
        assert got["greedy"] == want, (name, ids, got["greedy"], want)
    return worst


def test_logits_attention_and_greedy_tokens_equal_pytorch(chromium, site):
    page, errors = _page(chromium, (site / "notebooks" / "engine.html").as_uri())
    tokenizer = make_tokenizer()
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    shipped = _check_forward(page, "small_lm", lm.model_from_asset("small_lm"), prompts)  # the page's float16 weights
    checkpoint = _check_forward(page, "small_lm32", load_small_lm(), prompts)  # float32: the checkpoint itself
    tiny = [_check_forward(page, name, _tiny_model(seed, **TINY[name]), [[1, 5, 7, 2, 9, 30, 3], [4]])
            for seed, name in enumerate(sorted(TINY))]
    print(f"max |Δ logit| page vs PyTorch: shipped float16 asset {shipped:.2e}, float32 checkpoint {checkpoint:.2e}, "
          f"tiny configs {max(tiny):.2e}")
    assert max([shipped, checkpoint] + tiny) <= TOLERANCE
    refused = page.evaluate("""() => { try { new minitfmLive.Model({header: {config: {norm: "rms", pos: "alibi",
        ffn: "swiglu", norm_first: true}}}); return null; } catch (e) { return e.message; } }""")
    assert refused and "pos=\"alibi\"" in refused
    assert not errors, errors
    page.close()


ENCODE_JS = """([spec, texts]) => { const t = minitfmLive.tokenizer(spec);
  return texts.map(s => { const e = t.encode(s); return {ids: e.ids, text: t.decode(e.ids)}; }); }"""


SETTINGS = [dict(temperature=0.7, topK=5, topP=0.9), dict(temperature=1.3, topK=0, topP=0.5),
            dict(temperature=1.0, topK=3, topP=1.0), dict(temperature=0.5, topK=0, topP=1.0)]


def test_tokenizer_ids_and_sampling_probabilities_equal_minitfm(chromium, site):
    page, errors = _page(chromium, (site / "notebooks" / "engine.html").as_uri())
    logits = torch.randn(3, 40, generator=torch.Generator().manual_seed(0)) * 3
    logits[0, :4] = logits[0, 4]  # ties at the top-k cut
    logits = torch.cat([logits, torch.tensor([[0.0] * 4 + [-1e4] * 36])])  # 1/4 each: top-p 0.5 cuts exactly at 0.5
    got = page.evaluate("([rows, settings]) => rows.map(r => settings.map(o => Array.from(minitfmLive.process(r, o))))",
                        [logits.tolist(), SETTINGS])
    for row, per_setting in zip(logits, got):
        for o, probs in zip(SETTINGS, per_setting):
            processors = [Temperature(o["temperature"])] + ([TopK(o["topK"])] if o["topK"] else []) + [TopP(o["topP"])]
            want = apply_processors(torch.ones(1, 1, dtype=torch.long), row[None], processors).softmax(-1)[0]
            assert (torch.tensor(probs) - want).abs().max().item() < 1e-6, o
    runs = page.evaluate("""(ids) => [3, 3, 4, 5, 6, 7].map(seed => minitfmLive.load("small_lm").model.generate(ids, 10,
        {sample: true, seed: seed, temperature: 1.5, topK: 0, topP: 1}))""", make_tokenizer().encode("the cat"))
    assert runs[0] == runs[1] and any(run != runs[0] for run in runs[2:])  # a seed replays its text; others differ
    words = make_tokenizer()
    word_texts = PROMPTS + ["", "  the\u2003cat\x1csees\u3000a dog  ", "cat\u00a0dog"]
    got = page.evaluate(ENCODE_JS, [lm.tokenizer_spec(words), word_texts])
    assert [g["ids"] for g in got] == [words.encode(t) for t in word_texts]
    assert [g["text"] for g in got] == [words.decode(words.encode(t)) for t in word_texts]
    for tokenizer in (_bpe(), _byte_tokenizer()):
        got = page.evaluate(ENCODE_JS, [lm.tokenizer_spec(tokenizer), TEXTS])
        for text, g in zip(TEXTS, got):
            assert g["ids"] == tokenizer.encode(text), text
            assert g["text"] == text
    lone = page.evaluate("(spec) => { try { minitfmLive.tokenizer(spec).encode('a\\ud83d b'); } catch (e) { return e.message; } }",
                         lm.tokenizer_spec(_byte_tokenizer()))
    assert lone is not None and "lone surrogate" in lone
    assert not errors, errors
    page.close()


def _explorer_page(site: Path, lang: str, name: str = "small_lm", content_root: bool = True, before: str = "",
                   tag: str = "") -> Path:
    explorer = lm.live_explorer(name, prompt="the cat sees a dog . the")
    root = ' data-content_root="../"' if content_root else ""
    path = site / "notebooks" / f"explorer_{lang}_{name}_{int(content_root)}_{len(before)}{tag}.html"
    path.write_text(f'<!DOCTYPE html><html lang="{lang}"{root}><head><meta charset="utf-8"><meta name="viewport" '
                    'content="width=device-width, initial-scale=1"><title>live model</title></head><body><main>'
                    f"<h1>Live model</h1>{before}{explorer.html}</main></body></html>", encoding="utf-8")
    return path


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_explorer_runs_offline_in_both_languages(chromium, site, lang):
    shots = ROOT / "_build" / "screenshots" / "live_model"
    for width, height, kind in ((1100, 1300, "desktop"), (390, 1700, "mobile")):
        page, errors = _page(chromium, _explorer_page(site, lang).as_uri(), width, height)
        page.wait_for_selector("[data-minitfm-live-ready]", timeout=20_000)
        first_ms = float(page.get_attribute("[data-minitfm-live]", "data-minitfm-live-ready"))
        title = page.text_content("[data-minitfm-live] > div")
        assert ("页面中的实时模型" if lang.startswith("zh") else "A live model in the page") in title, title
        chips = page.locator("[data-minitfm-live-tokens] > span")
        assert chips.count() == 8  # <bos> the cat sees a dog . the
        page.click("[data-minitfm-live-step]")
        assert chips.count() == 9
        page.focus("[data-minitfm-live-heatmap]")
        page.keyboard.press("ArrowLeft")
        assert ("键" if lang.startswith("zh") else "key") in page.text_content("[data-minitfm-live-readout]")
        page.fill("[data-minitfm-live-prompt]", "the Unicorn")
        page.keyboard.press("Enter")
        assert chips.count() == 3 and page.locator("[data-minitfm-live-tokens] > span").nth(2).inner_text().endswith("3")
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{kind}: the page scrolls sideways by {overflow} px"
        if AXE is not None and kind == "desktop":  # one audit per language: the phone layout has the same elements
            page.add_script_tag(path=str(AXE))
            violations = page.evaluate("""async () => (await axe.run(document, {runOnly: {type: 'tag',
                values: ['wcag2a', 'wcag2aa']}, resultTypes: ['violations']})).violations.map(v => v.id + ': ' +
                v.nodes.map(n => n.target.join(' ')).join(', '))""")
            assert not violations, violations
        page.fill("[data-minitfm-live-prompt]", "the cat sees a dog . the")
        page.keyboard.press("Enter")
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"{lang}_{kind}.png"), full_page=True)
        print(f"{lang} {kind}: explorer ready (first forward pass drawn) {first_ms:.0f} ms after its script ran")
        assert first_ms < 5_000
        assert not errors, errors
        page.close()
    if AXE is None:
        pytest.fail(AXE_MISSING)


def test_the_explorer_says_what_it_needs(chromium, site):
    cases = [(_explorer_page(site, "en", content_root=False), "runs on the book's web page"),
             (_explorer_page(site, "zh-CN", content_root=False), "在本书的网页上运行"),
             (_explorer_page(site, "en", before="<script>window.TextEncoder = undefined;</script>"), "needs a browser with TextEncoder")]
    for path, expected in cases:
        page, _ = _page(chromium, path.as_uri())
        page.wait_for_function("document.querySelector('[data-minitfm-live-status]').textContent.indexOf('needs JavaScript') < 0",
                               timeout=20_000)
        assert expected in page.text_content("[data-minitfm-live-status]")
        page.close()
    inline = lm.live_explorer(prompt="the dog", inline=True).html  # a local notebook: no site, everything inside
    assert inline.count("</script>") == 3 and "http://" not in inline
    path = site / "notebooks" / "inline.html"
    path.write_text(f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>inline</title></head><body>{inline}'
                    "</body></html>", encoding="utf-8")
    page, errors = _page(chromium, path.as_uri())
    page.wait_for_selector("[data-minitfm-live-ready]", timeout=20_000)
    assert not errors, errors
    page.close()
    missing = _explorer_page(site, "en", tag="_missing")
    missing.write_text(missing.read_text(encoding="utf-8").replace('data-content_root="../"', 'data-content_root="../nowhere/"'),
                       encoding="utf-8")
    page, _ = _page(chromium, missing.as_uri())
    page.wait_for_function("document.querySelector('[data-minitfm-live-status]').textContent.indexOf('Could not load') >= 0",
                           timeout=20_000)
    page.close()


def test_a_byte_level_model_runs_in_the_explorer(chromium, site):
    """Chapter 15's kind of model (bytes, no merges, special tokens) in the same explorer: <|endoftext|> first."""
    prompt = "注意力 ok 🙂"
    path = site / "notebooks" / "byte.html"
    html = lm.live_explorer(prompt=prompt).html.replace("small_lm", "byte_tiny")
    path.write_text('<!DOCTYPE html><html lang="en" data-content_root="../"><head><meta charset="utf-8"><title>bytes'
                    f"</title></head><body><main>{html}</main></body></html>", encoding="utf-8")
    page, errors = _page(chromium, path.as_uri())
    page.wait_for_selector("[data-minitfm-live-ready]", timeout=20_000)
    state = "document.querySelector('[data-minitfm-live]').minitfmLive.state()"
    assert page.evaluate(f"{state}.ids") == [256] + _byte_tokenizer().encode(prompt)
    assert page.evaluate(f"{state}.pieces")[1:4] == ["<E6>", "<B3>", "<A8>"]  # 注 is three bytes
    page.click("[data-minitfm-live-step]")
    assert len(page.evaluate(f"{state}.ids")) == 2 + len(prompt.encode())
    assert not errors, errors
    page.close()
