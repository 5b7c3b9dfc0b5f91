"""The live model of the book's pages: a trained model as a static asset that JavaScript runs in the browser.

Beside this module, ``live_engine.js`` is a dependency-free JavaScript forward pass of ``DecoderOnlyLM`` with its
tokenizers and sampling, with no DOM (it runs under Node too: tests/viz/test_live_model_node.py), and
``live_model.js`` the page interface, the live explorer and a chat; the site serves the two as one script,
``live_model.js`` (:func:`page_js`). This module writes what they run for each model the book ships
(:data:`SHIPPED`): its asset, ``NAME.bin`` and ``NAME.json`` in ``minitfm.viz.live_asset``'s format, with a chat
model's template ids and float16's error on a probe batch (:func:`write_asset`); it lists why one is not
current (:func:`asset_problems`) and writes the bundle the site serves from ``_assets/live/`` (:func:`bundle`: the
page script, and ``NAME.js``, the header and the .bin in base64: a ``file://`` page may load scripts, not fetch files).
:func:`live_explorer` is the cell output that mounts the explorer (a chat for a chat model) on a book page;
``compare_box.live_compare`` puts several shipped models side by side. :func:`chat_model` is the one-line
``SHIPPED`` entry of a chat model made from chapter 15's assistant (chapter 16's DPO and GRPO models).

    python -m minitfm.viz.live_model write        # rewrite the shipped assets from their checkpoints
    python -m minitfm.viz.live_model check        # exit 1, naming the problem, if an asset is not current
    python -m minitfm.viz.live_model bundle DIR   # engine + asset scripts for the site (tools/build_book.sh)

Glossary: B batch, T tokens, V vocab_size, D d_model.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import html as html_lib
import itertools
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Callable

import torch

from minitfm.finetuning.chat import ChatTemplate
from minitfm.lm import assistant_lm as A, base_lm as B, preference_lms as D, small_lm as S
from minitfm.lm.prose import byte_tokenizer, heldout_prose
from minitfm.lm.corpus import generate_sentences, make_tokenizer
# The asset format lives in live_asset; its names are this module's too (one import for a notebook or a test).
from minitfm.viz.live_asset import (ASSETS, DTYPES, ENGINE_FIELDS, FORMAT, FORMAT_VERSION, SUPPORTED,  # noqa: F401
                                    check_supported, encode_asset, model_from_asset, read_asset, rounding_error,
                                    save_asset, tokenizer_spec)

_instances = itertools.count()


@dataclasses.dataclass(frozen=True)
class Shipped:
    """A model the book's pages run: how to load it (model, tokenizer, checkpoint path) and a probe batch."""
    load: Callable[[], tuple]
    probe: Callable[[object], torch.Tensor]  # tokenizer -> (B, T) ids on which the float16 error is measured
    dtype: str
    description: dict  # {"en": ..., "zh": ...}: what the explorer's title calls the model
    trained_length: int | None = None  # the longest rows it was trained on: the page generates no further
    chat: bool = False  # a chat model: the header holds its template's ids and the page mounts a chat
    examples: tuple = ()  # a chat model's example questions, offered as buttons (a test checks its replies)
    continues: bool = False  # a base model: the comparison (compare_box.live_compare) has it continue the
    # question as plain text (a chat model is asked in its template)


def _prose_probe(tok) -> torch.Tensor:
    """16 held-out paragraphs of the book's prose, each its first 127 bytes after <|endoftext|>, 0-padded."""
    rows = [torch.tensor([B.base_lm_config().bos_id] + tok.encode(p, allowed_special=set())[:B.ROW_LEN - 1])
            for _, p in heldout_prose()[:16]]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=0)


def chat_model(load: Callable, checkpoint: Path, description: dict) -> Shipped:
    """A chat model made from chapter 15's assistant (chapter 16's DPO and GRPO models), as a SHIPPED entry: the
    assistant's byte tokenizer, probe batch, trained length and example questions. Adding one to the pages and
    to the comparison is one line: ``"dpo_lm": chat_model(D.load_dpo_lm, D.CHECKPOINT, {"en": ..., "zh": ...})``."""
    return Shipped(lambda: (load(), byte_tokenizer(), checkpoint), lambda tok: A.heldout_conversations(), "float16",
                   description, trained_length=A.trained_length(), chat=True,
                   examples=tuple(e.prompt for e in A.PAGE_QUESTIONS))


SHIPPED = {"small_lm": Shipped(lambda: (S.load_small_lm(), make_tokenizer(), S.CHECKPOINT),  # probe: 16 sentences
                               lambda tok: tok.encode_batch(generate_sentences(16, seed=S.VALID_SEED), side="right"),
                               "float16", {"en": "the grammar model of chapters 8 and 9", "zh": "第 8、9 章的语法模型"},
                               trained_length=32),
           # the base model never read a chat (its chat tokens' rows never met an input): the comparison lets it
           # continue the question as plain text, what it was trained to do, rather than feed it the template
           "base_lm": Shipped(lambda: (B.load_base_lm(), byte_tokenizer(), B.CHECKPOINT), _prose_probe, "float16",
                              {"en": "chapter 15's base model, pretrained on the book's prose, four skills and invented "
                                     "people, never on a chat",
                               "zh": "第 15 章的基础模型，在本书的文字、四种技能和虚构人物上预训练过，从未见过对话"},
                              trained_length=B.ROW_LEN, continues=True),  # probe: 16 held-out paragraphs
           "assistant_lm": Shipped(lambda: (A.load_assistant_lm(), byte_tokenizer(), A.CHECKPOINT),
                                   lambda tok: A.heldout_conversations(), "float16",  # probe: 20 conversations
                                   {"en": "chapter 15's assistant, fine-tuned to add two two-digit numbers, sort digits, "
                                          "reverse letters and count a letter",
                                    "zh": "第 15 章的助手，微调过两位数加法、数字排序、字母倒序和数字母"},
                                   trained_length=A.trained_length(), chat=True,
                                   examples=tuple(e.prompt for e in A.PAGE_QUESTIONS)),
           "dpo_lm": chat_model(D.load_dpo_lm, D.DPO_CHECKPOINT,
                                {"en": "chapter 16's assistant after DPO (beta 1) on its own right-versus-wrong sums",
                                 "zh": "第 16 章的助手，用 DPO（beta 1）在它自己答对与答错的加法上训练之后"}),
           "grpo_lm": chat_model(D.load_grpo_lm, D.GRPO_CHECKPOINT,
                                 {"en": "chapter 16's assistant after GRPO on sums, rewarded for the exact answer "
                                        "(only its final norm's per-feature scale trained)",
                                  "zh": "第 16 章的助手，用 GRPO 在加法上训练之后，答案完全正确才得奖励（只训练了最后"
                                        "一个归一化层的逐特征缩放）"})}


def _entry(name) -> Shipped:
    if name not in SHIPPED:
        raise ValueError(f"no shipped live model named {name!r}; choose one of {sorted(SHIPPED)}")
    return SHIPPED[name]


def _fresh(name: str) -> tuple[dict, bytes, object, object]:
    entry = _entry(name)
    model, tokenizer, checkpoint = entry.load()
    header, data = encode_asset(model, tokenizer, name, entry.dtype, source=checkpoint, description=entry.description)
    header["trained_length"] = entry.trained_length
    header["chat"] = ({**ChatTemplate(tokenizer, bos_id=model.config.bos_id).ids, "bos": model.config.bos_id}
                      if entry.chat else None)  # the chat template's ids: role (and "end", "bos") -> id
    header["examples"] = list(entry.examples)
    return header, data, model, tokenizer


def write_asset(name: str = "small_lm", folder: Path = ASSETS) -> tuple[Path, Path]:
    """Write ``NAME.json`` and ``NAME.bin`` of a shipped model into ``folder``, with the measured rounding error."""
    header, data, model, tokenizer = _fresh(name)
    header["rounding_error"] = rounding_error(model, header, data, SHIPPED[name].probe(tokenizer))
    return save_asset(header, data, folder)


def asset_problems(name: str = "small_lm", folder: Path = ASSETS) -> list[str]:
    """Why the asset on disk is not what :func:`write_asset` would write now (empty list: it is current)."""
    try:
        header, data = read_asset(name, folder)
    except (FileNotFoundError, ValueError) as err:
        return [str(err)]
    fresh, fresh_data, _, _ = _fresh(name)
    problems = [f"{key} differs from the current model's (rewrite: python -m minitfm.viz.live_model write)"
                for key in ("source", "config", "dtype", "tensors", "tokenizer", "trained_length", "chat", "examples")
                if header.get(key) != fresh[key]]
    if data != fresh_data:
        problems.append("the weights differ from the checkpoint's (rewrite: python -m minitfm.viz.live_model write)")
    return problems


# ---- the page: the scripts the site serves, and the cell output that mounts the explorer ---------------------

def engine_js() -> str:
    """The text of ``live_engine.js``: the model, tokenizers and sampling, without the page (Node can run it)."""
    return resources.files(__package__).joinpath("live_engine.js").read_text(encoding="utf-8")


def page_js() -> str:
    """What the site serves as ``_assets/live/live_model.js``: the engine, then the page interface that needs it."""
    return engine_js() + "\n" + resources.files(__package__).joinpath("live_model.js").read_text(encoding="utf-8")


def asset_script(name: str = "small_lm", folder: Path = ASSETS) -> str:
    """``NAME.js``: registers the asset (header and base64 .bin) as ``minitfmLive.assets[NAME]`` (a page's global,
    or Node's: the engine reads it in both)."""
    header, data = read_asset(name, folder)
    payload = json.dumps({"header": header, "b64": base64.b64encode(data).decode("ascii")}, ensure_ascii=True,
                         separators=(",", ":")).replace("</", "<\\/")  # inline in a <script>: no "</script>"
    return (f"// minitfm live asset {name}: written by python -m minitfm.viz.live_model bundle; do not edit\n"
            "(function (g) { var ns = g.minitfmLive = g.minitfmLive || {}; ns.assets = ns.assets || {};\n"
            f"ns.assets[{json.dumps(name)}] = {payload}; }})(typeof globalThis !== \"undefined\" ? globalThis : window);\n")


def bundle(out_dir, names=None, folder: Path = ASSETS) -> list[Path]:
    """Write ``live_model.js`` (:func:`page_js`: engine and page interface) and each asset's ``NAME.js`` into
    ``out_dir`` (the site's ``_assets/live/``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "live_model.js"]
    written[0].write_text(page_js(), encoding="utf-8")
    for name in sorted(SHIPPED) if names is None else names:
        written.append(out / f"{name}.js")
        written[-1].write_text(asset_script(name, folder), encoding="utf-8")
    return written


# What the explorer shows where no JavaScript runs, in both languages: each edition's page shows its own (the page's
# lang, _static/minitfm.css), and a notebook viewer without the book's CSS shows both.
NO_SCRIPT = ('<div lang="en">The live model needs JavaScript: it runs on the book\'s web page.</div>'
             '<div lang="zh-CN">实时模型需要 JavaScript：它在本书的网页上运行。</div>')
# the frame of a live cell's output (an explorer, a chat, a comparison): light on any page theme
BOX_STYLE = ("background:#fff;color:#1f2328;border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;margin:8px 0;"
             "max-width:100%;box-sizing:border-box;font:13px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
             "'Noto Sans','PingFang SC',sans-serif")


class LiveExplorer:
    """The cell output of a live explorer: a small HTML block whose script loads the engine and the asset from the
    site (``_assets/live/``) and mounts the explorer; ``inline=True`` embeds both instead (megabytes: for a local
    notebook, never for a committed output)."""

    def __init__(self, name: str, prompt: str, inline: bool):
        header, _ = read_asset(name)
        self.name, self.prompt = name, prompt
        self.engine_bytes = len(page_js().encode("utf-8"))  # the engine and the page interface
        self.asset_bytes = len(asset_script(name).encode("utf-8"))
        self.weight_bytes, self.dtype = header["nbytes"], header["dtype"]
        digest = hashlib.sha1(f"{name}|{prompt}".encode()).hexdigest()[:8]
        self.element_id = f"minitfm-live-{name}-{digest}-{next(_instances)}"
        loader = (ASSETS / "loader.js").read_text(encoding="utf-8").split("\n", 3)[3]  # without its comment lines
        loader = loader.replace("__ID__", self.element_id).replace("__NAME__", name)
        embedded = f"<script>{page_js()}</script><script>{asset_script(name)}</script>" if inline else ""
        self.html = (f'<div id="{self.element_id}" class="minitfm-live" data-minitfm-live="{name}" '
                     f'data-minitfm-prompt="{html_lib.escape(prompt)}" style="{BOX_STYLE}">'
                     f'<div data-minitfm-live-status role="status">{NO_SCRIPT}</div></div>'
                     + embedded + f"<script>{loader}</script>")

    @property
    def page_bytes(self) -> int:
        """What a page with this explorer downloads: the engine and the asset script (the .bin in base64)."""
        return self.engine_bytes + self.asset_bytes

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return (f"LiveExplorer({self.name!r}: engine {self.engine_bytes / 1e6:.2f} MB + weights {self.weight_bytes / 1e6:.2f}"
                f" MB of {self.dtype}, {self.asset_bytes / 1e6:.2f} MB as a script)")


def live_explorer(name: str = "small_lm", prompt: str = "the cat", *, inline: bool = False) -> LiveExplorer:
    """The live explorer of a shipped model for a notebook cell; on the book's page it runs the model in the browser
    (a chat model's is a chat: ``prompt`` is then the question its box starts with)."""
    _entry(name)
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if not isinstance(inline, bool):
        raise TypeError(f"inline must be a bool, got {type(inline).__name__}")
    return LiveExplorer(name, prompt, inline)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["write"]:
        for name in args[1:] or sorted(SHIPPED):
            print("wrote", *write_asset(name))
        return 0
    if args[:1] == ["check"]:
        problems = {name: asset_problems(name) for name in args[1:] or sorted(SHIPPED)}
        for name, found in problems.items():
            print(f"{name}: " + ("; ".join(found) or "current"))
        return 1 if any(problems.values()) else 0
    if args[:1] == ["bundle"] and len(args) == 2:
        for path in bundle(args[1]):
            print(f"{path} ({path.stat().st_size / 1e6:.2f} MB)")
        return 0
    print(__doc__.split("\n\n")[-2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
