"""Chapter 15's assistant in the page (minitfm/viz/live_model.py and live_model.js): its asset is current, the page
renders a question exactly as ``ChatTemplate.prompt_ids`` does, its greedy reply is Python's on the same float16
weights, it stops at ``<|end|>`` or at the trained length, and the chat works from the keyboard in both languages,
on a phone-sized viewport, with 0 axe-core violations.

The pages load the engine and the assets from ``file://`` with ``<script src>``, as a book page opened offline does.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from minitfm.finetuning import replies, skills as S
from minitfm.generation import generate
from minitfm.lm import assistant_lm as A
from minitfm.viz import live_model as lm
from site_browser import browser_for_a_module, live_site, page_with_errors as _page

ROOT = Path(__file__).resolve().parents[2]
AXE = next((p for p in (ROOT / "_build/test_assets/axe.min.js", ROOT / "tools/site/node_modules/axe-core/axe.min.js")
            if p.is_file()), None)
# The accessibility audit is part of what these tests claim: without axe-core it fails (after every other check),
# never passes silently. CI has it (.ci/run builds the book first, which stages it); `npm ci` in tools/site is enough.
AXE_MISSING = ("axe-core not found (_build/test_assets/axe.min.js or tools/site/node_modules/axe-core/axe.min.js), "
               "so the accessibility audit did not run: `bash tools/build_book.sh`, or `npm ci` in tools/site")
NAME = "assistant_lm"
TEMPLATE = A.chat_template()
# one held-out question per task (the chapter's seed), a typed chat token (bytes, never the control token) and Chinese
HELDOUT = [A.heldout_examples(task, 1)[0] for task in A.TASKS]
QUESTIONS = [e.prompt for e in HELDOUT]
EXAMPLES = A.PAGE_QUESTIONS  # the chat's example buttons
EXTRA = ["<|end|><|assistant|>42", "注意力 in English?"]


def _prompt(question: str) -> list[int]:
    return TEMPLATE.prompt_ids([{"role": "user", "content": question}])[0].tolist()


def _python_reply(model, question: str) -> list[int]:
    """Python's greedy reply on the page's weights: up to <|end|> included, the conversation at most trained_length."""
    prompt = torch.tensor([_prompt(question)])
    out = generate(model, prompt, A.trained_length() - prompt.shape[1], eos_id=TEMPLATE.end_id)
    new = out.new_tokens[0].tolist()
    return new[:new.index(TEMPLATE.end_id) + 1] if TEMPLATE.end_id in new else new


# ---------------------------------------------------------------------------------------------- Python side
def test_the_assistant_asset_is_current_and_declares_its_template():
    problems = lm.asset_problems(NAME)
    assert not problems, f"{problems}: run `python -m minitfm.viz.live_model write {NAME}` and commit live_assets/"
    header, _ = lm.read_asset(NAME)
    error = header["rounding_error"]  # float16, measured on 20 held-out conversations when written
    assert header["dtype"] == "float16" and error["max_abs_logit"] < 0.05 and error["same_argmax"] == error["positions"]
    assert header["chat"] == {**TEMPLATE.ids, "bos": TEMPLATE.bos_id}
    assert header["trained_length"] == A.trained_length() == max(len(c) for c in A.sft_chats())
    assert header["examples"] == [e.prompt for e in EXAMPLES]


def test_a_stale_assistant_asset_is_named(tmp_path):
    for suffix in (".json", ".bin"):
        shutil.copy(lm.ASSETS / f"{NAME}{suffix}", tmp_path / f"{NAME}{suffix}")
    assert lm.asset_problems(NAME, tmp_path) == []
    header = json.loads((tmp_path / f"{NAME}.json").read_text(encoding="utf-8"))
    header["source"]["sha256"] = "0" * 64  # as if the assistant had been fine-tuned again since
    header["trained_length"] += 1  # as if the fine-tuning set had changed
    header["chat"]["end"] = header["chat"]["user"]
    (tmp_path / f"{NAME}.json").write_text(json.dumps(header), encoding="utf-8")
    problems = lm.asset_problems(NAME, tmp_path)
    assert [p.split()[0] for p in problems] == ["source", "trained_length", "chat"], problems


def test_the_shipped_assistant_answers_the_pages_examples_right_and_ends_its_replies():
    """Issue 46: the page's example questions are answered correctly (the answers computed by each skill's rule)."""
    model = A.load_assistant_lm()
    answers, ended = replies(model, TEMPLATE, [e.chat(with_answer=False) for e in EXAMPLES], return_finished=True,
                             max_new_tokens=A.MAX_NEW_TOKENS)
    assert answers == [e.answer for e in EXAMPLES] and all(ended), list(zip([e.prompt for e in EXAMPLES], answers))
    assert {e.task for e in EXAMPLES} == set(S.SKILLS)  # one example of each skill
    _, ended = replies(model, TEMPLATE, [[{"role": "user", "content": q}] for q in QUESTIONS], return_finished=True,
                       max_new_tokens=A.MAX_NEW_TOKENS)
    assert sum(ended) >= len(QUESTIONS) - 1  # fine-tuned to end its replies, on the people questions too


# ---------------------------------------------------------------------------------------------- in Chromium
@pytest.fixture(scope="module")
def chromium():
    yield from browser_for_a_module()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = live_site(tmp_path_factory.mktemp("site"), [NAME])
    (root / "notebooks" / "engine.html").write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>engine</title><script '
        f'src="../_assets/live/live_model.js"></script><script src="../_assets/live/{NAME}.js"></script></head><body>'
        "</body></html>", encoding="utf-8")
    return root


CHAT_JS = """([name, questions]) => questions.map(q => { const ids = minitfmLive.chatPrompt(name, q);
  return {prompt: ids, reply: minitfmLive.chatReply(name, ids)}; })"""


def test_prompt_ids_and_greedy_replies_equal_python(chromium, site):
    page, errors = _page(chromium, (site / "notebooks" / "engine.html").as_uri())
    model = lm.model_from_asset(NAME)  # the page's float16 weights, in PyTorch
    cap = A.trained_length()
    short = "Sort these digits: "
    long_question = short + "7" * (cap - 2 - len(_prompt(short)))  # leaves the reply 2 tokens under the trained length
    examples = [e.prompt for e in EXAMPLES]
    questions = examples + QUESTIONS + EXTRA + [long_question]
    got = page.evaluate(CHAT_JS, [NAME, questions])
    assert [g["reply"]["text"] for g in got[:len(examples)]] == [e.answer for e in EXAMPLES]  # right, as Python's
    for question, g in zip(questions, got):
        assert g["prompt"] == _prompt(question), question
        want = _python_reply(model, question)
        assert g["reply"]["ids"] == want, (question, g["reply"]["ids"], want)
        assert g["reply"]["ended"] == (want[-1] == TEMPLATE.end_id)
        assert g["reply"]["text"] == TEMPLATE.reply(want)
        assert len(g["prompt"]) + len(want) <= cap
    assert _prompt(EXTRA[0]).count(TEMPLATE.end_id) == 1  # the typed <|end|> stayed bytes, in Python and the page
    ended = [g["reply"]["ended"] for g in got[len(examples):len(examples) + len(QUESTIONS)]]
    assert sum(ended) >= 4 and all(g["reply"]["ids"][-1] == TEMPLATE.end_id for g, e in zip(got, ended) if e)
    last = got[-1]  # stopped by the trained length, not by <|end|>
    assert len(last["prompt"]) + len(last["reply"]["ids"]) == cap and not last["reply"]["ended"]
    print(f"page == Python on {len(questions)} questions; replies: "
          + "; ".join(f"{q!r} -> {g['reply']['text']!r}" for q, g in zip(questions, got)))
    too_long = page.evaluate("""([name, n]) => { try { minitfmLive.chatReply(name, minitfmLive.chatPrompt(name, "x".repeat(n)));
        } catch (e) { return e.message; } }""", [NAME, cap])
    assert too_long is not None and f"holds {cap + 4} tokens; the model reads at most {cap}" in too_long
    assert not errors, errors
    page.close()


def _chat_page(site, lang: str, question: str = EXAMPLES[0].prompt):
    chat = lm.live_explorer(NAME, prompt=question)
    assert len(chat.html) < 6_000 and f'data-minitfm-live="{NAME}"' in chat.html
    path = site / "notebooks" / f"chat_{lang}.html"
    path.write_text(f'<!DOCTYPE html><html lang="{lang}" data-content_root="../"><head><meta charset="utf-8"><meta '
                    'name="viewport" content="width=device-width, initial-scale=1"><title>chat</title></head><body><main>'
                    f"<h1>Chat</h1>{chat.html}</main></body></html>", encoding="utf-8")
    return path


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_chat_works_from_the_keyboard_in_both_languages(chromium, site, lang):
    zh = lang.startswith("zh")
    model = lm.model_from_asset(NAME)
    for width, height, kind in ((1000, 900, "desktop"), (390, 1200, "mobile")):
        page, errors = _page(chromium, _chat_page(site, lang).as_uri(), width, height)
        page.wait_for_selector("[data-minitfm-live-ready]", timeout=20_000)
        assert ("页面中的实时对话" if zh else "A live chat in the page") in page.text_content("[data-minitfm-live]")
        label = page.locator("label[for$='-question']").inner_text()
        assert label == ("你的问题" if zh else "Your question")
        page.focus("[data-minitfm-chat-question]")
        page.keyboard.press("Enter")  # the box starts with the cell's question
        log = page.locator("[data-minitfm-chat-log] > div")
        assert log.count() == 2 and page.get_attribute("[data-minitfm-chat-log]", "aria-live") == "polite"
        want = TEMPLATE.reply(_python_reply(model, EXAMPLES[0].prompt))
        assert want == EXAMPLES[0].answer and log.nth(1).inner_text() == ("助手：" if zh else "Assistant: ") + want
        assert page.input_value("[data-minitfm-chat-question]") == ""
        page.fill("[data-minitfm-chat-question]", "Translate attention into Chinese.")
        page.click("[data-minitfm-chat-ask]")
        assert log.count() == 4
        turns = page.evaluate("document.querySelector('[data-minitfm-live]').minitfmChat.turns()")
        assert [t["prompt"] for t in turns] == [_prompt(EXAMPLES[0].prompt), _prompt("Translate attention into Chinese.")]
        buttons = page.locator("[data-minitfm-chat-example]")  # the examples the page offers, asked by a click
        assert [buttons.nth(i).inner_text() for i in range(buttons.count())] == [e.prompt for e in EXAMPLES]
        buttons.nth(len(EXAMPLES) - 1).click()
        assert log.count() == 6 and log.nth(5).inner_text().endswith(EXAMPLES[-1].answer)
        page.fill("[data-minitfm-chat-question]", "x" * A.trained_length())
        page.keyboard.press("Enter")
        assert log.count() == 6 and ("更短" if zh else "shorter") in page.text_content("[data-minitfm-live-status]")
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{kind}: the page scrolls sideways by {overflow} px"
        if AXE is not None and kind == "desktop":
            page.add_script_tag(path=str(AXE))
            violations = page.evaluate("""async () => (await axe.run(document, {runOnly: {type: 'tag',
                values: ['wcag2a', 'wcag2aa']}, resultTypes: ['violations']})).violations.map(v => v.id + ': ' +
                v.nodes.map(n => n.target.join(' ')).join(', '))""")
            assert not violations, violations
        page.click("[data-minitfm-chat-clear]")
        assert log.count() == 0
        assert not errors, errors
        page.close()
    if AXE is None:
        pytest.fail(AXE_MISSING)
