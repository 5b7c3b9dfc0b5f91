"""A chat box for a running notebook (ipywidgets): a question box, an Ask button and a temperature slider over a
reply function, with the conversation above them (chapter 15's "Talk to it").

Both editions of a notebook run the same code, so the box's labels follow the edition the notebook runs from: the
Chinese notebooks live under ``zh_CN/`` (Jupyter gives the kernel the notebook's path as ``$JPY_SESSION_NAME`` and
starts it in the notebook's folder). Where neither says (Colab), pass ``lang``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

LABELS = {
    "en": {"you": "You:", "temperature": "temperature", "ask": "Ask", "turn": "you: {question}\nassistant: {reply}\n"},
    "zh": {"you": "你：", "temperature": "温度", "ask": "提问", "turn": "你：{question}\n助手：{reply}\n"},
}


def edition_language(*paths: str | os.PathLike) -> str:
    """``"zh"`` if a ``zh_CN`` folder is part of any of ``paths`` (default: the notebook's path from Jupyter and the
    working directory), else ``"en"``."""
    paths = paths or (os.environ.get("JPY_SESSION_NAME", ""), os.getcwd())
    return "zh" if any("zh_CN" in Path(p).parts for p in paths if p) else "en"


def chat_box(reply: Callable[[str, float], str], placeholder: str = "", lang: str | None = None):
    """The chat box: Enter (or leaving the box) or Ask sends the question to ``reply(question, temperature)`` and
    adds the turn to the conversation. ``lang`` is ``"en"`` or ``"zh"`` (default: :func:`edition_language`); the
    placeholder stays as given (the book's small models know English questions only)."""
    import ipywidgets as widgets

    if not callable(reply):
        raise TypeError(f"reply must be a function (question, temperature) -> str, got {type(reply).__name__}")
    lang = edition_language() if lang is None else lang
    if lang not in LABELS:
        raise ValueError(f"lang must be one of {sorted(LABELS)}, got {lang!r}")
    text = LABELS[lang]
    history = widgets.Output()
    question_box = widgets.Text(placeholder=placeholder, description=text["you"], continuous_update=False,
                                layout=widgets.Layout(width="90%"))
    temperature = widgets.FloatSlider(value=0.0, min=0.0, max=1.5, step=0.1, description=text["temperature"])
    ask = widgets.Button(description=text["ask"])

    def answer(_=None):
        question = question_box.value.strip()
        if not question:
            return
        history.append_stdout(text["turn"].format(question=question, reply=reply(question, temperature.value)))
        question_box.value = ""

    question_box.observe(lambda change: answer(), names="value")  # Enter (or leaving the box) sends the question
    ask.on_click(answer)
    return widgets.VBox([history, widgets.HBox([question_box, ask]), temperature])
