"""A SentencePiece ``.model`` file (Llama 2's and Mistral's ``tokenizer.model``) read into the book's BPE.

The file is a Protocol Buffers message (``ModelProto`` of ``sentencepiece_model.proto``): the pieces (text,
score, type), the trainer's settings and the normalizer's. Protocol Buffers' wire format is small enough to
read here in a few lines (each field a number and a wire type, then a varint, 4 or 8 bytes, or a length and
that many bytes), so neither ``sentencepiece`` nor ``protobuf`` is needed.

SentencePiece's BPE merges the adjacent pair whose result is the piece with the highest score, the leftmost
of equal scores first; :func:`read_sentencepiece_model` writes that as merges ranked by score for
:class:`minitfm.text.sentencepiece_bpe.SentencePieceBPE`. Supported: BPE models with byte fallback, the
identity normalizer, the dummy prefix on or off, and user-defined pieces (kept whole, as Hugging Face's
converter keeps them: a word that is a piece as a whole becomes that piece). Anything else (a Unigram model,
an NFKC normalizer, extra-whitespace removal) is refused with a ValueError naming the setting.
"""
from __future__ import annotations

import os
import pathlib
import struct

import regex

from minitfm.text.sentencepiece_bpe import SPACE, SentencePieceBPE
from minitfm.text.tokenizer_steps import split

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6  # SentencePiece.Type
MODEL_TYPES = {1: "Unigram", 2: "BPE", 3: "Word", 4: "Char"}


def read_sentencepiece_model(path: str | os.PathLike) -> SentencePieceBPE:
    """The BPE tokenizer of a SentencePiece ``.model`` file, its ids equal to ``sentencepiece``'s ``encode``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a SentencePiece .model file (str or pathlib.Path), got {type(path).__name__}")
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not a file: expected a SentencePiece .model")
    try:
        fields = _message(path.read_bytes())
        pieces = [_piece(_message(data)) for data in fields.get(1, [])]
        trainer = _message(fields.get(2, [b""])[-1])
        normalizer = _message(fields.get(3, [b""])[-1])
    except (IndexError, KeyError, struct.error, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{path} is not a SentencePiece model (a ModelProto message): {error}") from None
    if not pieces:
        raise ValueError(f"{path} holds no pieces: it is not a SentencePiece model")
    _check_settings(path, trainer, normalizer, pieces)
    add_dummy_prefix = bool(normalizer.get(3, [1])[-1])
    merges, ranks = _merges_by_score(pieces)
    user_defined = sorted((text for text, _, kind in pieces if kind == USER_DEFINED), key=len, reverse=True)
    cut = regex.compile("|".join(map(regex.escape, user_defined))) if user_defined else None

    def words(text: str, at_start: bool) -> list[str]:
        text = (SPACE if at_start and add_dummy_prefix else "") + text.replace(" ", SPACE)
        return split(text, cut, "Isolated") if cut is not None else [text]

    vocab = {i: text for i, (text, _, _) in enumerate(pieces)}
    return SentencePieceBPE(vocab, merges, merge_ranks=ranks, words=words, ignore_merges=bool(user_defined),
                            strip_spaces=int(add_dummy_prefix))


def _check_settings(path, trainer: dict, normalizer: dict, pieces: list) -> None:
    """ValueError naming each setting of the model that minitfm does not read as SentencePiece would."""
    setting = {
        "model_type": MODEL_TYPES.get(trainer.get(3, [1])[-1], "unknown"),  # proto2 default: Unigram
        "byte_fallback": bool(trainer.get(35, [0])[-1]),
        "treat_whitespace_as_suffix": bool(trainer.get(24, [0])[-1]),
        "normalization rule": normalizer.get(1, [b"?"])[-1].decode() if normalizer.get(2, [b""])[-1] else "identity",
        "remove_extra_whitespaces": bool(normalizer.get(4, [1])[-1]),
        "escape_whitespaces": bool(normalizer.get(5, [1])[-1]),
        "unused pieces": sum(kind == UNUSED for _, _, kind in pieces),
    }
    wanted = {"model_type": "BPE", "byte_fallback": True, "treat_whitespace_as_suffix": False,
              "normalization rule": "identity", "remove_extra_whitespaces": False, "escape_whitespaces": True,
              "unused pieces": 0}
    wrong = {key: value for key, value in setting.items() if value != wanted[key]}
    if wrong:
        raise ValueError(f"{path} has {wrong}; minitfm reads SentencePiece models with {wanted} (Llama 2's and "
                         f"Mistral's settings)")


def _merges_by_score(pieces: list) -> tuple[list[tuple[str, str]], list[int]]:
    """Every split of a normal piece into two normal pieces, as merges ranked by the piece's score (highest
    first; equal scores share a rank, so that the leftmost pair merges first, as in SentencePiece)."""
    normal = {text: (score, i) for i, (text, score, kind) in enumerate(pieces) if kind == NORMAL}
    ranked = sorted((-score, i, text[:k], text[k:]) for text, (score, i) in normal.items()
                    for k in range(1, len(text)) if text[:k] in normal and text[k:] in normal)
    rank_of = {neg: rank for rank, neg in enumerate(sorted({neg for neg, *_ in ranked}))}
    return [(a, b) for _, _, a, b in ranked], [rank_of[neg] for neg, *_ in ranked]


def _piece(fields: dict) -> tuple[str, float, int]:
    """(text, score, type) of one ``SentencePiece`` message."""
    score = fields.get(2, [b"\0\0\0\0"])[-1]
    return fields[1][-1].decode("utf-8"), struct.unpack("<f", score)[0], fields.get(3, [NORMAL])[-1]


def _message(data: bytes) -> dict[int, list]:
    """field number -> its values in order: ints for varints, bytes for lengths and fixed widths."""
    fields: dict[int, list] = {}
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
            if i > len(data):
                raise ValueError(f"field {number} runs past the end")
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, i = data[i:i + width], i + width
        else:
            raise ValueError(f"field {number} has the unknown wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if byte < 0x80:
            return value, i
