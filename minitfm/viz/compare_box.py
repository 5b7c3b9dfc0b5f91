"""The models side by side on a book page: one question, and every model's reply computed in the reader's browser.

:func:`live_compare` is the cell output, beside :func:`minitfm.viz.live_model.live_explorer`: a question box, the
chat models' example questions as buttons, and one reply panel per model, each labelled with what the model is (its
``SHIPPED`` description, in the page's language) and how it is asked. The page (``live_model.js``'s
``mountCompare``, on the engine of chapter 15's chat) decodes greedily by default, so the replies are comparable,
and Python's greedy replies on the same float16 weights are the same tokens (tests/viz/test_live_compare.py).

Which models it takes (:func:`comparable`): the shipped chat models, asked in the chat template they were fine-tuned
on, and the shipped base models (``Shipped.continues``), which never read a chat and so continue the question as
plain text. A model joins the default list, in ``SHIPPED`` order, by its ``SHIPPED`` entry alone: chapter 16's
``"dpo_lm": chat_model(...)`` is one line in ``minitfm.viz.live_model``.
"""
from __future__ import annotations

import hashlib
import html as html_lib
import itertools
import json

from minitfm.lm.assistant_lm import MAX_NEW_TOKENS
from minitfm.viz import live_model as lm
from minitfm.viz.live_asset import ASSETS, read_asset

_instances = itertools.count()
_LOADER = ASSETS / "compare_loader.js"  # the cell's inline script, with __ID__ and __NAMES__ to fill


def comparable() -> list[str]:
    """The names :func:`live_compare` accepts, in ``SHIPPED`` order: every chat model and every base model that
    continues text (``Shipped.continues``)."""
    return [name for name, entry in lm.SHIPPED.items() if entry.chat or entry.continues]


def _check_names(names) -> list[str]:
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"names must be a list or tuple of model names, got {type(names).__name__}")
    if not names:
        raise ValueError(f"names must hold at least one model; choose from {comparable()}")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"each name must be a str, got {type(name).__name__}")
        if name not in comparable():
            why = ("is shipped but is neither a chat model nor a base model that continues text" if name in lm.SHIPPED
                   else "is not a shipped live model")
            raise ValueError(f"{name!r} {why}; the comparison takes {comparable()}")
    if len(set(names)) != len(names):
        raise ValueError(f"each model may appear once, got {list(names)}")
    return list(names)


class LiveCompare:
    """The cell output of a comparison: a small HTML block whose script loads the engine and the models' assets from
    the site (``_assets/live/``) and mounts the panels; ``inline=True`` embeds them instead (megabytes: for a local
    notebook, never for a committed output)."""

    def __init__(self, names: list[str], prompt: str, max_new_tokens: int, inline: bool):
        self.names, self.prompt, self.max_new_tokens = names, prompt, max_new_tokens
        headers = [read_asset(name, ASSETS)[0] for name in names]
        self.descriptions = {name: h["description"] for name, h in zip(names, headers)}
        self.engine_bytes = len(lm.page_js().encode("utf-8"))
        scripts = [lm.asset_script(name, ASSETS) for name in names]
        self.asset_bytes = {name: len(s.encode("utf-8")) for name, s in zip(names, scripts)}
        digest = hashlib.sha1(f"{' '.join(names)}|{prompt}|{max_new_tokens}".encode()).hexdigest()[:8]
        self.element_id = f"minitfm-compare-{digest}-{next(_instances)}"
        loader = _LOADER.read_text(encoding="utf-8").split("\n", 3)[3]  # without its comments
        loader = loader.replace("__ID__", self.element_id).replace("__NAMES__", json.dumps(names))
        embedded = (f"<script>{lm.page_js()}</script>" + "".join(f"<script>{s}</script>" for s in scripts)
                    if inline else "")
        self.html = (f'<div id="{self.element_id}" class="minitfm-live" data-minitfm-compare="{" ".join(names)}" '
                     f'data-minitfm-prompt="{html_lib.escape(prompt)}" data-minitfm-max-new="{max_new_tokens}" '
                     f'style="{lm.BOX_STYLE}"><div data-minitfm-live-status role="status">{lm.NO_SCRIPT}</div></div>'
                     + embedded + f"<script>{loader}</script>")

    @property
    def page_bytes(self) -> int:
        """What a page with this comparison downloads: the engine and every model's asset script."""
        return self.engine_bytes + sum(self.asset_bytes.values())

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        models = ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in self.asset_bytes.items())
        return (f"LiveCompare({len(self.names)} models, greedy, at most {self.max_new_tokens} new tokens: engine "
                f"{self.engine_bytes / 1e6:.2f} MB + {models} as scripts)")


def live_compare(names=None, prompt: str = "", *, max_new_tokens: int = MAX_NEW_TOKENS,
                 inline: bool = False) -> LiveCompare:
    """The comparison of shipped models for a notebook cell (default: every model :func:`comparable` lists); on the
    book's page each reply is computed in the browser, greedily, up to the model's end token or ``max_new_tokens``
    (and its trained length). ``prompt`` is the question the box starts with."""
    names = _check_names(comparable() if names is None else names)
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise TypeError(f"max_new_tokens must be an int, got {type(max_new_tokens).__name__}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if not isinstance(inline, bool):
        raise TypeError(f"inline must be a bool, got {type(inline).__name__}")
    return LiveCompare(names, prompt, max_new_tokens, inline)
