"""The models side by side in the page (minitfm/viz/compare_box.py, live_model.js's mountCompare; issue 47 item 4):
the base model's asset is current, the comparison takes every shipped chat model and base model and refuses the
rest by name, a new chat model joins it by its SHIPPED line alone, and in Chromium each panel's reply to the example
questions and to a typed one is Python's greedy reply on the same float16 weights, in both languages, from the
keyboard, on a phone-sized viewport, with 0 axe-core violations.

The pages load the engine and the assets from ``file://`` with ``<script src>``, as a book page opened offline does.
"""
from __future__ import annotations

import json
import shutil

import pytest
import torch

from minitfm.generation import generate
from minitfm.lm import assistant_lm as A, base_lm as B
from minitfm.lm.prose import byte_tokenizer
from minitfm.viz import compare_box as cb, live_model as lm
from site_browser import browser_for_a_module, live_site, page_with_errors as _page
from test_live_chat import AXE, AXE_MISSING, QUESTIONS, TEMPLATE

NAMES = ["base_lm", "assistant_lm", "dpo_lm", "grpo_lm"]  # chapter 16's two models after chapter 15's
EXAMPLES = [e.prompt for e in A.PAGE_QUESTIONS]  # the comparison's buttons: the chat models' examples
MAX_NEW = A.MAX_NEW_TOKENS
KIND = {"en": {"base_lm": "base model: continues the text", "assistant_lm": "chat model: replies in its chat template"},
        "zh": {"base_lm": "基础模型：续写文本", "assistant_lm": "对话模型：按对话模板回复"}}
for _lang in KIND:  # chapter 16's models are asked as the assistant is
    KIND[_lang].update(dict.fromkeys(("dpo_lm", "grpo_lm"), KIND[_lang]["assistant_lm"]))


def python_reply(model, name: str, question: str, max_new: int = MAX_NEW) -> tuple[list[int], str]:
    """Python's greedy reply of a compared model on the page's weights: a chat model's in its template up to <|end|>
    (included), the base model's continuation of ``<|endoftext|>`` + the question up to its eos; at most ``max_new``
    tokens and the conversation at most the trained length. -> (ids, text without the end token)."""
    tok, entry = byte_tokenizer(), lm.SHIPPED[name]
    if entry.chat:
        prompt, stop = TEMPLATE.prompt_ids([{"role": "user", "content": question}])[0].tolist(), TEMPLATE.end_id
    else:
        prompt, stop = [model.config.bos_id] + tok.encode(question, allowed_special=set()), model.config.eos_id
    room = min(max_new, min(model.config.max_seq_len, entry.trained_length) - len(prompt))
    new = generate(model, torch.tensor([prompt]), room, eos_id=stop).new_tokens[0].tolist()
    new = new[:new.index(stop) + 1] if stop in new else new
    return new, tok.decode(new[:-1] if new[-1] == stop else new)


# ---------------------------------------------------------------------------------------------- Python side
def test_the_base_model_asset_is_current_and_small():
    problems = lm.asset_problems("base_lm")
    assert not problems, f"{problems}: run `python -m minitfm.viz.live_model write base_lm` and commit live_assets/"
    header, _ = lm.read_asset("base_lm")
    error = header["rounding_error"]  # float16, measured on 16 held-out paragraphs of the book's prose when written
    assert header["dtype"] == "float16" and error["max_abs_logit"] < 0.05 and error["same_argmax"] == error["positions"]
    assert header["chat"] is None and header["examples"] == [] and header["trained_length"] == B.ROW_LEN
    assert len(lm.asset_script("base_lm").encode()) < 8e6  # what the page downloads for it


def test_the_comparison_takes_the_chat_and_base_models_and_refuses_the_rest():
    assert cb.comparable() == NAMES
    assert {n for n, e in lm.SHIPPED.items() if e.chat} <= set(cb.comparable())
    box = cb.live_compare(prompt='What is "25 + 17"?')
    assert box.names == NAMES and box.max_new_tokens == MAX_NEW
    assert f'data-minitfm-compare="{" ".join(NAMES)}"' in box.html and 'data-minitfm-max-new="48"' in box.html
    assert 'data-minitfm-prompt="What is &quot;25 + 17&quot;?"' in box.html and lm.NO_SCRIPT in box.html
    assert json.dumps(NAMES) in box.html and "_assets/live/live_model.js" in box.html
    assert len(box.html) < 6_000 and "http://" not in box.html and "__ID__" not in box.html
    assert box.descriptions["base_lm"] == lm.SHIPPED["base_lm"].description
    assert box.page_bytes == len(lm.page_js().encode()) + sum(len(lm.asset_script(n).encode()) for n in NAMES)
    assert "base_lm 3." in repr(box) and "at most 48 new tokens" in repr(box)
    inline = cb.live_compare(["assistant_lm"], inline=True)
    assert len(inline.html) > inline.page_bytes and lm.asset_script("assistant_lm") in inline.html
    with pytest.raises(ValueError, match=r"'small_lm' is shipped but is neither a chat model.*\['base_lm', 'assistant_lm', 'dpo_lm', 'grpo_lm'\]"):
        cb.live_compare(["small_lm"])
    with pytest.raises(ValueError, match=r"'gpt4' is not a shipped live model; the comparison takes"):
        cb.live_compare(["base_lm", "gpt4"])
    with pytest.raises(ValueError, match="each model may appear once"):
        cb.live_compare(["base_lm", "base_lm"])
    with pytest.raises(ValueError, match="at least one model"):
        cb.live_compare([])
    with pytest.raises(TypeError, match="names must be a list or tuple of model names, got str"):
        cb.live_compare("base_lm")
    with pytest.raises(TypeError, match="each name must be a str, got int"):
        cb.live_compare([1])
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1, got 0"):
        cb.live_compare(max_new_tokens=0)
    with pytest.raises(TypeError, match="max_new_tokens must be an int, got float"):
        cb.live_compare(max_new_tokens=4.0)
    with pytest.raises(TypeError, match="prompt must be a str, got int"):
        cb.live_compare(prompt=3)


def test_a_new_chat_model_joins_by_its_shipped_line_alone(tmp_path, monkeypatch):
    """What chapter 16's DPO and GRPO models will do: one ``chat_model`` line in SHIPPED (here the assistant's
    checkpoint under another name), its asset written, and the comparison takes it and lists it by default."""
    monkeypatch.setitem(lm.SHIPPED, "twin_lm", lm.chat_model(A.load_assistant_lm, A.CHECKPOINT,
                                                              {"en": "a twin of the assistant", "zh": "助手的双胞胎"}))
    for suffix in (".json", ".bin"):
        shutil.copy(lm.ASSETS / f"base_lm{suffix}", tmp_path / f"base_lm{suffix}")
    lm.write_asset("twin_lm", tmp_path)
    assert lm.asset_problems("twin_lm", tmp_path) == []
    twin, _ = lm.read_asset("twin_lm", tmp_path)
    assistant, _ = lm.read_asset("assistant_lm")
    for key in ("chat", "examples", "trained_length", "tokenizer", "sha256", "dtype"):
        assert twin[key] == assistant[key], key
    monkeypatch.setattr(cb, "ASSETS", tmp_path)
    assert cb.comparable() == NAMES + ["twin_lm"]
    box = cb.live_compare(["base_lm", "twin_lm"])
    assert 'data-minitfm-compare="base_lm twin_lm"' in box.html and box.descriptions["twin_lm"]["zh"] == "助手的双胞胎"
    with pytest.raises(ValueError, match="not a shipped live model"):  # only under its own name
        cb.live_compare(["triplet_lm"])


# ---------------------------------------------------------------------------------------------- in Chromium
@pytest.fixture(scope="module")
def chromium():
    yield from browser_for_a_module()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return live_site(tmp_path_factory.mktemp("site"), NAMES)


@pytest.fixture(scope="module")
def want():
    """Python's greedy reply of each model to each question the browser test asks (the examples, a held-out one)."""
    models = {name: lm.model_from_asset(name) for name in NAMES}
    return {(name, q): python_reply(models[name], name, q) for name in NAMES
            for q in EXAMPLES + QUESTIONS[:1] + (["x" * A.trained_length()] if name == "base_lm" else [])}


def _compare_page(site, lang: str):
    box = cb.live_compare(NAMES, prompt=EXAMPLES[0])
    path = site / "notebooks" / f"compare_{lang}.html"
    path.write_text(f'<!DOCTYPE html><html lang="{lang}" data-content_root="../"><head><meta charset="utf-8"><meta '
                    'name="viewport" content="width=device-width, initial-scale=1"><title>compare</title></head><body>'
                    f"<main><h1>Compare</h1>{box.html}</main></body></html>", encoding="utf-8")
    return path


def _panels(page) -> dict:
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('[data-minitfm-compare-panel]')].map(p =>
        [p.getAttribute('data-minitfm-compare-panel'), {text: p.querySelector('[data-minitfm-compare-text]').textContent,
         end: p.querySelector('[data-minitfm-compare-end]').textContent, kind: p.querySelector('[data-minitfm-compare-kind]').textContent,
         label: document.getElementById(p.getAttribute('aria-labelledby')).textContent}]))""")


def _asked(page, n: int) -> None:
    page.wait_for_function(f"document.querySelector('[data-minitfm-compare]').getAttribute('data-minitfm-compare-done') === '{n}'",
                           timeout=30_000)


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_each_panel_shows_pythons_greedy_reply_in_both_languages(chromium, site, want, lang):
    zh = lang.startswith("zh")
    key = "zh" if zh else "en"
    checked = 0
    for width, height, kind in ((1000, 1000, "desktop"), (390, 1400, "mobile")):
        page, errors = _page(chromium, _compare_page(site, lang).as_uri(), width, height)
        page.wait_for_selector("[data-minitfm-live-ready]", timeout=20_000)
        assert (f"一个问题，{len(NAMES)} 个模型" if zh else f"One question, {len(NAMES)} models") in page.text_content(
            "[data-minitfm-compare]")
        assert page.locator("label[for$='-question']").inner_text() == ("你的问题" if zh else "Your question")
        panels = _panels(page)
        assert list(panels) == NAMES
        for name in NAMES:  # each panel says what the model is, in the page's language, and how it is asked
            assert panels[name]["label"] == f"{name}: {lm.SHIPPED[name].description[key]}"
            assert panels[name]["kind"] == KIND[key][name]
        assert page.get_attribute("[data-minitfm-compare-temperature]", "value") == "0"  # greedy by default
        buttons = page.locator("[data-minitfm-compare-example]")
        assert [buttons.nth(i).inner_text() for i in range(buttons.count())] == EXAMPLES
        page.focus("[data-minitfm-compare-question]")
        page.keyboard.press("Enter")  # the box starts with the cell's question: the keyboard asks it
        asked = [EXAMPLES[0]]
        _asked(page, 1)
        _check(page, want, EXAMPLES[0], zh)
        checked += 1
        for i, question in enumerate(EXAMPLES[1:], start=1):  # the other examples, each by a click
            buttons.nth(i).click()
            asked.append(question)
            _asked(page, len(asked))
            _check(page, want, asked[-1], zh)
            checked += 1
        page.fill("[data-minitfm-compare-question]", QUESTIONS[0])  # a held-out question, typed, sent with Enter
        page.keyboard.press("Enter")
        _asked(page, len(asked) + 1)
        _check(page, want, QUESTIONS[0], zh)
        checked += 1
        page.fill("[data-minitfm-compare-question]", EXAMPLES[0])
        page.focus("[data-minitfm-compare-ask]")
        page.keyboard.press("Enter")  # the Ask button from the keyboard
        _asked(page, len(asked) + 2)
        _check(page, want, EXAMPLES[0], zh)
        checked += 1
        assert page.evaluate("document.querySelector('[data-minitfm-compare] [role=group][aria-busy]')") is None
        page.fill("[data-minitfm-compare-question]", "x" * A.trained_length())  # too long for the assistant only
        page.keyboard.press("Enter")
        _asked(page, len(asked) + 3)
        long = page.evaluate("document.querySelector('[data-minitfm-compare]').minitfmCompare.results()")
        assert [r.get("tooLong", False) for r in long] == [False] + [True] * (len(NAMES) - 1)
        assert long[0]["ids"] == want[("base_lm", "x" * A.trained_length())][0]  # the base model reads 128
        assert _panels(page)["assistant_lm"]["end"] == (f"这个问题占 {A.trained_length() + 4} 个词元；这个模型最多读 "
                                                         f"{A.trained_length()} 个：请问一个更短的问题。" if zh else
                                                         f"The question takes {A.trained_length() + 4} tokens; this "
                                                         f"model reads at most {A.trained_length()}: ask a shorter one.")
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{kind}: the page scrolls sideways by {overflow} px"
        if AXE is not None and kind == "desktop":
            page.add_script_tag(path=str(AXE))
            violations = page.evaluate("""async () => (await axe.run(document, {runOnly: {type: 'tag',
                values: ['wcag2a', 'wcag2aa']}, resultTypes: ['violations']})).violations.map(v => v.id + ': ' +
                v.nodes.map(n => n.target.join(' ')).join(', '))""")
            assert not violations, violations
            print(f"{lang}: axe-core wcag2a/wcag2aa violations: {len(violations)}")
        assert not errors, errors
        page.close()
    print(f"{lang}: {checked} questions x {len(NAMES)} panels equal to Python's greedy replies")
    if AXE is None:
        pytest.fail(AXE_MISSING)


def _check(page, want, question: str, zh: bool) -> None:
    results = page.evaluate("document.querySelector('[data-minitfm-compare]').minitfmCompare.results()")
    panels = _panels(page)
    assert [r["name"] for r in results] == NAMES
    for r in results:
        ids, text = want[(r["name"], question)]
        assert r["ids"] == ids, (r["name"], question, r["ids"], ids)
        assert panels[r["name"]]["text"] == r["text"] == text, (r["name"], question)
        ended = ids[-1] == (TEMPLATE.end_id if lm.SHIPPED[r["name"]].chat else B.base_lm_config().eos_id)
        assert r["ended"] == ended
        assert panels[r["name"]]["end"].startswith(("写了" if zh else "It wrote") if ended else
                                                   (f"{len(ids)} 个新词元内" if zh else f"No end token within {len(ids)}"))
    if question in EXAMPLES:  # the assistant answers its page's examples right
        answer = A.PAGE_QUESTIONS[EXAMPLES.index(question)].answer
        assert want[("assistant_lm", question)][1] == answer


def test_a_new_chat_model_answers_in_its_own_panel(chromium, tmp_path, monkeypatch, want):
    """End to end, what adding chapter 16's models will be: a third chat model (the assistant's checkpoint under
    another name, one ``chat_model`` line) gets its asset script from ``bundle`` and its panel in the page, and
    replies as the assistant does, token for token."""
    monkeypatch.setitem(lm.SHIPPED, "twin_lm", lm.chat_model(A.load_assistant_lm, A.CHECKPOINT,
                                                              {"en": "a twin of the assistant", "zh": "助手的双胞胎"}))
    for name in NAMES:
        for suffix in (".json", ".bin"):
            shutil.copy(lm.ASSETS / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    lm.write_asset("twin_lm", tmp_path)
    monkeypatch.setattr(cb, "ASSETS", tmp_path)
    names = NAMES + ["twin_lm"]
    lm.bundle(tmp_path / "site" / "_assets" / "live", names, folder=tmp_path)
    (tmp_path / "site" / "notebooks").mkdir()
    page_path = tmp_path / "site" / "notebooks" / "three.html"
    page_path.write_text('<!DOCTYPE html><html lang="en" data-content_root="../"><head><meta charset="utf-8"><title>three'
                         f"</title></head><body><main><h1>Three</h1>{cb.live_compare().html}</main></body></html>",
                         encoding="utf-8")
    page, errors = _page(chromium, page_path.as_uri())
    page.wait_for_selector("[data-minitfm-live-ready]", timeout=20_000)
    panels = _panels(page)
    assert list(panels) == names and panels["twin_lm"]["label"] == "twin_lm: a twin of the assistant"
    assert panels["twin_lm"]["kind"] == KIND["en"]["assistant_lm"]
    for question in EXAMPLES + QUESTIONS[:1]:
        results = page.evaluate("async q => await document.querySelector('[data-minitfm-compare]').minitfmCompare.ask(q)",
                                question)
        assert [r["name"] for r in results] == names
        assert results[-1]["ids"] == results[1]["ids"] == want[("assistant_lm", question)][0], question
        assert results[0]["ids"] == want[("base_lm", question)][0], question
    assert not errors, errors
    page.close()
