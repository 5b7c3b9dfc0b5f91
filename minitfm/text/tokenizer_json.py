"""A Hugging Face ``tokenizer.json`` read into the book's tokenizers (Llama 2 and 3, Qwen, Mistral, Gemma).

Two kinds of BPE cover today's open decoders, and :func:`read_tokenizer_json` tells them apart:

- **byte-level**, as GPT-2: a ``ByteLevel`` pre-tokenizer writes each byte as one character (``Ġ`` for the
  space, :func:`minitfm.text.gpt2_files.bytes_to_unicode`). Llama 3 and Qwen 2/3 cut the text with their own
  regex first (a ``Split`` step: digits in runs of at most three for Llama 3, one by one for Qwen, newlines
  on their own) and Qwen normalises it to ``NFC``. This becomes the book's
  :class:`minitfm.text.bpe_tokenizer.Tokenizer`, given the file's ``split_pattern``;
- **SentencePiece-style with byte fallback** (Llama 2, Mistral, Gemma): characters, ``▁`` for the space, the
  256 byte pieces ``<0x00>``..``<0xFF>`` for any character outside the vocabulary. This becomes a
  :class:`minitfm.text.sentencepiece_bpe.SentencePieceBPE`, with the file's normalizer and pre-tokenizer
  (:mod:`minitfm.text.tokenizer_steps`).

Any other model (WordPiece for BERT, Unigram for T5, WordLevel) or step is refused with a ValueError naming
what the file holds. The ``added_tokens`` become special tokens, cut out of the text whole. ``encode``
returns the text's ids only, as ``tokenizers``' ``encode(text, add_special_tokens=False)`` does;
:func:`template_ids` gives the ids that the file's ``post_processor`` adds around a text (Llama's BOS,
``<s>`` or ``<|begin_of_text|>``).
"""
from __future__ import annotations

import os
import pathlib

from minitfm.text.bpe_tokenizer import Tokenizer
from minitfm.text.gpt2_files import bytes_to_unicode, read_json_file
from minitfm.text.pretokenize import GPT2_SPLIT_PATTERN
from minitfm.text.sentencepiece_bpe import SentencePieceBPE
from minitfm.text.tokenizer_steps import NORMAL_FORMS, flatten, leading_spaces_stripped, normalizer, word_splitter

OTHER_MODELS = {"WordPiece": "BERT's", "Unigram": "T5's and ALBERT's", "WordLevel": "a word-level"}
SUPPORTED = ("minitfm reads BPE tokenizers: byte-level (GPT-2, Llama 3, Qwen 2/3) or SentencePiece-style with "
             "byte fallback (Llama 2, Mistral, Gemma)")


def read_tokenizer_json(path: str | os.PathLike) -> Tokenizer | SentencePieceBPE:
    """The tokenizer of a ``tokenizer.json`` file (or of the folder holding one), its ids equal to Hugging Face's.

    Returns a :class:`minitfm.text.bpe_tokenizer.Tokenizer` for byte-level BPE, a
    :class:`minitfm.text.sentencepiece_bpe.SentencePieceBPE` for BPE with byte fallback. ValueError names
    what is not supported (the model's type, a normalizer, a pre-tokenizer, an added token's option) or
    damaged; FileNotFoundError a missing file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a tokenizer.json file or its folder (str or pathlib.Path), got "
                        f"{type(path).__name__}")
    path = pathlib.Path(path)
    path = path / "tokenizer.json" if path.is_dir() else path
    data = read_json_file(path, "a Hugging Face tokenizer.json")
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise ValueError(f"{path} has no 'model' object: it is not a Hugging Face tokenizer.json")
    kind = model.get("type", "BPE" if "merges" in model else None)
    if kind != "BPE":
        raise ValueError(f"{path} holds a {kind} model ({OTHER_MODELS.get(kind, 'an unknown')} kind of tokenizer); "
                         f"{SUPPORTED}")
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(key):
            raise ValueError(f"{path}: the BPE model has {key}={model[key]!r}, which minitfm does not support; "
                             f"{SUPPORTED}")
    vocab, merges, added = _model_tables(path, model), _merges(path, model), _added_tokens(path, data)
    pre_steps = flatten(data.get("pre_tokenizer"), "pre-tokenizer")
    norm_steps = flatten(data.get("normalizer"), "normalizer")
    ignore_merges = bool(model.get("ignore_merges", False))
    if any(step["type"] == "ByteLevel" for step in pre_steps):
        if model.get("byte_fallback"):
            raise ValueError(f"{path} has a ByteLevel pre-tokenizer and byte_fallback=true; {SUPPORTED}")
        return _byte_level(path, vocab, merges, added, pre_steps, norm_steps, ignore_merges)
    if not model.get("byte_fallback"):
        raise ValueError(f"{path} holds a BPE model with neither a ByteLevel pre-tokenizer nor byte_fallback (a "
                         f"character outside its vocabulary would be unknown); {SUPPORTED}")
    for i, content in added.items():
        if vocab.setdefault(i, content) != content:
            raise ValueError(f"{path}: the added token {content!r} has the id {i} of the model's {vocab[i]!r}")
    normalize, words = normalizer(norm_steps), word_splitter(pre_steps)
    return SentencePieceBPE(vocab, merges, special_tokens=list(added.values()), ignore_merges=ignore_merges,
                            words=lambda text, at_start: words(normalize(text), at_start),
                            strip_spaces=leading_spaces_stripped(flatten(data.get("decoder"), "decoder")))


def template_ids(path: str | os.PathLike) -> tuple[list[int], list[int]]:
    """The ids that the ``post_processor`` of a ``tokenizer.json`` puts before and after one text: ``([1], [])``
    for Llama 2's ``<s> $A``, ``([], [])`` when it adds none (Qwen, GPT-2). So ``before + encode(text) + after``
    is ``tokenizers``' ``encode(text).ids``. ValueError for a post-processor other than TemplateProcessing,
    ByteLevel or a Sequence of them (BERT's and RoBERTa's add [CLS] and [SEP] in their own way)."""
    path = pathlib.Path(path)
    data = read_json_file(path / "tokenizer.json" if path.is_dir() else path, "a Hugging Face tokenizer.json")
    steps = flatten(data.get("post_processor") if isinstance(data, dict) else None, "post-processor")
    before, after, text_seen = [], [], False
    for step in steps:
        if step["type"] == "TemplateProcessing":
            specials = step.get("special_tokens") or {}
            for item in step.get("single") or []:
                if "Sequence" in item:
                    text_seen = True
                elif "SpecialToken" in item and item["SpecialToken"].get("id") in specials:
                    (after if text_seen else before).extend(specials[item["SpecialToken"]["id"]]["ids"])
                else:
                    raise ValueError(f"{path}: the TemplateProcessing item {item!r} names no special token")
        elif step["type"] != "ByteLevel":
            raise ValueError(f"{path}: the post-processor {step['type']} is not supported (minitfm reads "
                             f"TemplateProcessing and ByteLevel)")
    return before, after


def _byte_level(path, vocab, merges, added, pre_steps, norm_steps, ignore_merges) -> Tokenizer:
    """The byte-level kind as the book's Tokenizer: one Split regex (or GPT-2's), at most one normal form."""
    forms = [step["type"] for step in norm_steps]
    if len(forms) > 1 or (forms and forms[0] not in NORMAL_FORMS):
        raise ValueError(f"{path}: with byte-level BPE minitfm reads no normalizer or one of {NORMAL_FORMS}, got "
                         f"{forms}")
    byte_of = {char: byte for byte, char in bytes_to_unicode().items()}
    as_bytes = {}
    for i, text in vocab.items():
        if i in added:
            as_bytes[i] = added[i].encode("utf-8")
        elif all(char in byte_of for char in text):
            as_bytes[i] = bytes(byte_of[char] for char in text)
        else:
            raise ValueError(f"{path}: the token {text!r} (id {i}) is not written in GPT-2's byte characters, and "
                             f"no added token names it")
    for i, content in added.items():
        if as_bytes.setdefault(i, content.encode("utf-8")) != content.encode("utf-8"):
            raise ValueError(f"{path}: the added token {content!r} has the id {i} of the model's {vocab[i]!r}")
    byte_merges = [(bytes(byte_of[c] for c in a), bytes(byte_of[c] for c in b)) for a, b in merges]
    return Tokenizer(as_bytes, byte_merges, list(added.values()), split_pattern=_split_pattern(path, pre_steps),
                     normalization=forms[0] if forms else None, ignore_merges=ignore_merges)


def _split_pattern(path, pre_steps: list[dict]) -> str:
    """The one regex of a byte-level pre-tokenizer: a Split's, then ByteLevel(use_regex=false); or GPT-2's."""
    *splits, byte_level = pre_steps
    if byte_level["type"] != "ByteLevel" or byte_level.get("add_prefix_space"):
        raise ValueError(f"{path}: minitfm reads a byte-level pre-tokenizer as an optional Split then ByteLevel "
                         f"with add_prefix_space=false, got {[s['type'] for s in pre_steps]} "
                         f"(add_prefix_space={byte_level.get('add_prefix_space')})")
    if len(splits) > 1 or (splits and (splits[0]["type"] != "Split" or byte_level.get("use_regex", True))) or (
            not splits and not byte_level.get("use_regex", True)):
        raise ValueError(f"{path}: minitfm's Tokenizer cuts text with one regex, GPT-2's (ByteLevel with "
                         f"use_regex=true) or a Split's (then ByteLevel with use_regex=false), got "
                         f"{[s['type'] for s in pre_steps]} with use_regex={byte_level.get('use_regex', True)}")
    pattern = GPT2_SPLIT_PATTERN
    if splits:
        split = splits[0]
        if split.get("behavior") != "Isolated" or split.get("invert") or "Regex" not in (split.get("pattern") or {}):
            raise ValueError(f"{path}: minitfm reads a Split with a Regex pattern, behavior Isolated and invert=false, "
                             f"got {split!r:.200}")
        pattern = split["pattern"]["Regex"]
    return pattern


def _model_tables(path, model: dict) -> dict[int, str]:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
        raise ValueError(f"{path}: the BPE model's vocab must be an object token -> id >= 0")
    by_id = {i: text for text, i in vocab.items()}
    if len(by_id) != len(vocab):
        raise ValueError(f"{path}: the BPE model's vocab gives one id to two tokens")
    return by_id


def _merges(path, model: dict) -> list[tuple[str, str]]:
    """The merges, written ``"a b"`` (older files) or ``["a", "b"]`` (tokenizers 0.20 on)."""
    merges = []
    for number, merge in enumerate(model.get("merges") or []):
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(p, str) and p for p in pair):
            raise ValueError(f"{path}: merge {number} must be 'a b' or ['a', 'b'], got {merge!r}")
        merges.append(tuple(pair))
    return merges


def _added_tokens(path, data: dict) -> dict[int, str]:
    """id -> content of the added tokens, in id order; each must be matched as plain text (no lstrip ...)."""
    added = {}
    for token in data.get("added_tokens") or []:
        if not isinstance(token, dict) or not isinstance(token.get("id"), int) or not token.get("content"):
            raise ValueError(f"{path}: an added token must be an object with an 'id' and a 'content', got {token!r}")
        options = [key for key in ("lstrip", "rstrip", "single_word") if token.get(key)]
        if options:
            raise ValueError(f"{path}: the added token {token['content']!r} has {options} set, which minitfm does "
                             f"not support (it cuts added tokens out of the text exactly as written)")
        added[token["id"]] = token["content"]
    return dict(sorted(added.items()))
