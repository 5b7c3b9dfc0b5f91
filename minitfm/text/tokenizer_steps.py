"""The steps around the model in a Hugging Face ``tokenizer.json``: normalizers, pre-tokenizers, decoders.

A ``tokenizer.json`` describes a tokenizer as a pipeline: a *normalizer* rewrites the text (``NFC``; Llama 2's
``Prepend("▁")`` and ``Replace(" ", "▁")``), a *pre-tokenizer* cuts it into words (a ``Split`` by a regex;
``Metaspace``, SentencePiece's ``▁``; ``ByteLevel``, GPT-2's bytes as characters), the *model* (BPE) encodes
each word, and a *decoder* turns the pieces back into text. Each step is a JSON object with a ``"type"``,
and ``"Sequence"`` chains several. This module turns the steps minitfm supports into plain functions and
refuses the others with a ValueError naming the step; :mod:`minitfm.text.tokenizer_json` puts them together.
"""
from __future__ import annotations

import unicodedata
from typing import Callable

import regex

NORMAL_FORMS = ("NFC", "NFD", "NFKC", "NFKD")
BEHAVIORS = ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def flatten(step: dict | None, what: str) -> list[dict]:
    """The steps of ``step`` in order (a ``Sequence`` opened, ``null`` no step); ValueError if one is no step."""
    if step is None:
        return []
    if not isinstance(step, dict) or not isinstance(step.get("type"), str):
        raise ValueError(f"the {what} must be null or an object with a 'type', got {step!r:.80}")
    if step["type"] == "Sequence":
        inner = next((step[key] for key in ("normalizers", "pretokenizers", "decoders", "processors") if key in step),
                     None)
        if not isinstance(inner, list):
            raise ValueError(f"the {what} Sequence must hold a list of steps, got {step!r:.80}")
        return [s for one in inner for s in flatten(one, what)]
    return [step]


def pattern_regex(step: dict, what: str) -> regex.Pattern:
    """The ``pattern`` of a ``Split`` or ``Replace`` step (``{"String": ...}`` or ``{"Regex": ...}``), compiled."""
    pattern = step.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return regex.compile(regex.escape(pattern["String"]))
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        try:
            return regex.compile(pattern["Regex"])
        except regex.error as error:
            raise ValueError(f"the {what} {step['type']} pattern {pattern['Regex']!r} is not a regular expression "
                             f"that Python's regex module reads ({error})") from None
    raise ValueError(f"the {what} {step['type']} needs a pattern {{'String': ...}} or {{'Regex': ...}}, got "
                     f"{pattern!r}")


def normalizer(steps: list[dict]) -> Callable[[str], str]:
    """The normalizer ``steps`` (from :func:`flatten`) as one function of the text."""
    functions = []
    for step in steps:
        kind = step["type"]
        if kind in NORMAL_FORMS:
            functions.append(lambda text, form=kind: unicodedata.normalize(form, text))
        elif kind == "Prepend":
            functions.append(lambda text, p=step["prepend"]: p + text if text else text)
        elif kind == "Replace":
            functions.append(lambda text, r=pattern_regex(step, "normalizer"), c=step["content"]: r.sub(
                lambda _: c, text))
        else:
            raise ValueError(f"the normalizer {kind} is not supported by minitfm (it reads NFC, NFD, NFKC, NFKD, "
                             f"Prepend and Replace, the steps of GPT-2, Llama, Qwen, Mistral and Gemma)")

    def normalize(text: str) -> str:
        for function in functions:
            text = function(text)
        return text
    return normalize


def split(text: str, pattern: regex.Pattern, behavior: str) -> list[str]:
    """``text`` cut by the matches of ``pattern`` as Hugging Face's ``Split`` does with ``behavior``."""
    pieces, start = [], 0  # (start, end, is_match), the text between matches included
    for match in pattern.finditer(text):
        if match.start() > start:
            pieces.append([start, match.start(), False])
        if match.end() > match.start():
            pieces.append([match.start(), match.end(), True])
        start = match.end()
    if start < len(text):
        pieces.append([start, len(text), False])
    if behavior == "Removed":
        pieces = [p for p in pieces if not p[2]]
    elif behavior in ("MergedWithPrevious", "MergedWithNext", "Contiguous"):
        backwards = behavior == "MergedWithNext"
        merged, previous_match = [], False
        for piece in (reversed(pieces) if backwards else pieces):
            joins = piece[2] and (previous_match if behavior == "Contiguous" else not previous_match)
            if joins and merged:
                merged[-1][0 if backwards else 1] = piece[0 if backwards else 1]
            else:
                merged.append(list(piece))
            previous_match = piece[2]
        pieces = merged[::-1] if backwards else merged
    return [text[a:b] for a, b, _ in pieces]


def metaspace(text: str, at_start: bool, step: dict) -> list[str]:
    """Hugging Face's ``Metaspace``: spaces become ``▁`` (``replacement``), one goes in front (``prepend_scheme``
    ``"always"``, or ``"first"``: at the start of the text only), and ``split`` cuts before each ``▁``."""
    space = step.get("replacement", "▁")
    scheme = step.get("prepend_scheme", "always" if step.get("add_prefix_space", True) else "never")
    text = text.replace(" ", space)
    if text and not text.startswith(space) and (scheme == "always" or scheme == "first" and at_start):
        text = space + text
    return split(text, regex.compile(regex.escape(space)), "MergedWithNext") if step.get("split", True) else [text]


def word_splitter(steps: list[dict]) -> Callable[[str, bool], list[str]]:
    """The pre-tokenizer ``steps`` (``Split``, ``Metaspace``) as one function ``(text, at_start) -> words``."""
    cuts = []  # one function (text, at_start) -> words per step
    for step in steps:
        if step["type"] == "Split":
            if step.get("invert", False) or step.get("behavior") not in BEHAVIORS:
                raise ValueError(f"the pre-tokenizer Split with invert={step.get('invert')} and behavior="
                                 f"{step.get('behavior')!r} is not supported (minitfm reads invert=false, {BEHAVIORS})")
            cuts.append(lambda t, first, r=pattern_regex(step, "pre-tokenizer"), b=step["behavior"]: split(t, r, b))
        elif step["type"] == "Metaspace":
            cuts.append(lambda t, first, step=step: metaspace(t, first, step))
        else:
            raise ValueError(f"the pre-tokenizer {step['type']} is not supported with byte fallback (minitfm reads "
                             f"Split and Metaspace there, the steps of Llama 2, Mistral and Gemma)")

    def words(text: str, at_start: bool) -> list[str]:
        pieces = [(text, at_start)]  # only the first word of the text's start is still "at the start"
        for cut in cuts:
            pieces = [(w, first and k == 0) for t, first in pieces for k, w in enumerate(cut(t, first))]
        return [w for w, _ in pieces]
    return words


def leading_spaces_stripped(steps: list[dict]) -> int:
    """How many leading spaces the decoder ``steps`` strip (Llama's ``Strip``, ``Metaspace``'s prefix)."""
    strip = 0
    for step in steps:
        kind = step["type"]
        if kind == "Strip" and step.get("content") == " " and not step.get("stop", 0):
            strip += step.get("start", 0)
        elif kind == "Metaspace":
            scheme = step.get("prepend_scheme", "always" if step.get("add_prefix_space", True) else "never")
            strip += scheme != "never"
        elif not (kind in ("ByteFallback", "Fuse") or kind == "Replace" and step.get("content") == " "):
            raise ValueError(f"the decoder {kind} {step!r:.80} is not supported with byte fallback (minitfm reads "
                             f"Replace('▁', ' '), ByteFallback, Fuse, Strip(' ', start) and Metaspace)")
    return strip
