"""The notebook chat box (minitfm.viz.chat_box): its labels follow the edition the notebook runs from, and a
question goes to the reply function and into the conversation."""
from __future__ import annotations

import pytest

import ipywidgets  # noqa: E402,F401  requirements.txt installs it: a missing one fails, never skips

from minitfm.viz.chat_box import chat_box, edition_language  # noqa: E402


def parts(box):
    history, row, temperature = box.children
    question, ask = row.children
    return history, question, ask, temperature


@pytest.mark.parametrize("paths, lang", [
    (("/home/me/minitfm/zh_CN/notebooks/15_finetuning.ipynb",), "zh"),
    (("", "/home/me/minitfm/zh_CN/notebooks"), "zh"),
    (("/home/me/minitfm/notebooks/15_finetuning.ipynb", "/home/me/minitfm/notebooks"), "en"),
    (("/home/me/zh_CN_notes/15.ipynb",), "en"),  # a folder named like it is not the edition's
])
def test_the_edition_is_read_from_the_notebooks_path(paths, lang):
    assert edition_language(*paths) == lang


def test_the_default_reads_jupyters_notebook_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "zh_CN" / "notebooks" / "15_finetuning.ipynb"))
    assert edition_language() == "zh"
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "notebooks" / "15_finetuning.ipynb"))
    assert edition_language() == "en"


@pytest.mark.parametrize("lang, you, ask, temperature, turn", [
    ("en", "You:", "Ask", "temperature", "you: What is 2 + 3?\nassistant: 5 (t=0.5)\n"),
    ("zh", "你：", "提问", "温度", "你：What is 2 + 3?\n助手：5 (t=0.5)\n"),
])
def test_the_labels_and_a_turn_in_each_language(lang, you, ask, temperature, turn):
    calls = []
    box = chat_box(lambda q, t: calls.append((q, t)) or f"5 (t={t})", placeholder="What is 12 + 7?", lang=lang)
    history, question, button, slider = parts(box)
    assert (question.description, button.description, slider.description) == (you, ask, temperature)
    assert question.placeholder == "What is 12 + 7?"  # the model knows English questions only
    slider.value = 0.5
    question.value = "  What is 2 + 3? "
    assert calls == [("What is 2 + 3?", 0.5)] and question.value == ""
    assert [o["text"] for o in history.outputs] == [turn]
    button.click()  # an empty box sends nothing
    assert len(calls) == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"lang must be one of \['en', 'zh'\], got 'fr'"):
        chat_box(lambda q, t: "", lang="fr")
    with pytest.raises(TypeError, match="reply must be a function"):
        chat_box("not a function", lang="en")
