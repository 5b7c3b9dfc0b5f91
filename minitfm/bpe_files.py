"""GPT-2's tokenizer files, ``vocab.json`` and ``merges.txt``, written and read.

Tokens are bytes, but both files are text. GPT-2 writes each byte as one printable character
(:func:`bytes_to_unicode`): the 188 bytes that are printable characters of Latin-1 (``!``..``~``,
``¡``..``¬``, ``®``..``ÿ``) stand for themselves, and the other 68 (controls, the space, the soft hyphen)
take the characters from U+0100 on, in order; so the space is ``Ġ`` (U+0120) and the newline ``Ċ``
(U+010A). A token's text is then the characters of its bytes, one each: ``b" the"`` is ``"Ġthe"``.

- ``vocab.json``: one JSON object, token text -> id. Special tokens are written as themselves
  (``"<|endoftext|>"``), not byte by byte; reading tells them apart as the entries that are neither one
  byte nor the result of a merge.
- ``merges.txt``: a first line ``#version: 0.2``, then one merge per line in rank order, its two tokens'
  texts separated by one space (no token's text holds a space: the space byte is ``Ġ``).

Hugging Face ``tokenizers`` (``ByteLevelBPETokenizer(vocab_file, merges_file)``) and GPT-2's own code read
the same files.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
import warnings
from typing import Sequence

VERSION_LINE = "#version: 0.2"


@functools.lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: each byte 0..255 -> the one printable character that stands for it in the files."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, n_shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:  # not printable: the next character from U+0100 on
            table[byte] = chr(256 + n_shifted)
            n_shifted += 1
    return table


def token_text(token: bytes) -> str:
    """How ``token`` is written in the files: one character per byte, ``b" the"`` -> ``"Ġthe"``."""
    table = bytes_to_unicode()
    return "".join(table[byte] for byte in token)


def write_gpt2_files(directory: str | os.PathLike, vocab: dict[int, bytes],
                     merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str] = ()) -> tuple[str, str]:
    """Write ``vocab.json`` and ``merges.txt`` into ``directory`` (created if needed); return their paths."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    specials = {token.encode("utf-8") for token in special_tokens}
    json_vocab: dict[str, int] = {}
    for i in sorted(vocab):
        text = vocab[i].decode("utf-8") if vocab[i] in specials else token_text(vocab[i])
        if text in json_vocab:
            raise ValueError(f"ids {json_vocab[text]} and {i} would both be written {text!r} in vocab.json")
        json_vocab[text] = i
    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    vocab_path.write_text(json.dumps(json_vocab, ensure_ascii=False), encoding="utf-8")
    lines = [VERSION_LINE] + [f"{token_text(a)} {token_text(b)}" for a, b in merges]
    merges_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(vocab_path), str(merges_path)


def read_gpt2_files(directory: str | os.PathLike):
    """Read ``vocab.json`` and ``merges.txt`` from ``directory``.

    Returns:
        ``(vocab, merges, special_tokens)`` as :class:`minitfm.bpe_tokenizer.Tokenizer` takes them: id -> bytes,
        ``(bytes_a, bytes_b)`` in rank order, and the specials (the vocabulary entries that are neither one
        byte nor a merge's result) in id order.
    """
    directory = pathlib.Path(directory)
    json_vocab = _read_vocab_json(directory / "vocab.json")
    merge_texts = _read_merges_txt(directory / "merges.txt", json_vocab)
    regular = set(bytes_to_unicode().values()) | {a + b for a, b in merge_texts}
    special_tokens = [text for text, i in sorted(json_vocab.items(), key=lambda item: item[1]) if text not in regular]
    shifted = {char for byte, char in bytes_to_unicode().items() if ord(char) != byte}  # Ġ for the space, Ċ ...
    suspicious = [text for text in special_tokens if len(text) > 1 and set(text) & shifted]
    if suspicious:
        warnings.warn(f"{directory / 'vocab.json'}: {len(suspicious)} entries such as {suspicious[:3]} are neither one "
                      f"byte nor a merge of merges.txt, so they are read as special tokens matched literally; they "
                      f"are written in GPT-2's byte characters (Ġ is a space), so merges.txt may be truncated",
                      stacklevel=2)
    vocab = {i: text.encode("utf-8") if text not in regular else _token_bytes(text) for text, i in json_vocab.items()}
    merges = [(_token_bytes(a), _token_bytes(b)) for a, b in merge_texts]
    return vocab, merges, special_tokens


@functools.lru_cache(maxsize=1)
def _byte_of() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}


def _token_bytes(text: str) -> bytes:
    byte_of = _byte_of()
    return bytes(byte_of[char] for char in text)


def _read_vocab_json(path: pathlib.Path) -> dict[str, int]:
    try:
        json_vocab = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(json_vocab, dict):
        raise ValueError(f"{path} must hold one JSON object (token -> id), got a {type(json_vocab).__name__}")
    bad = [(t, i) for t, i in json_vocab.items() if not isinstance(i, int) or isinstance(i, bool)]
    if bad:
        raise ValueError(f"{path} must map each token to an integer id, got {bad[0][0]!r}: {bad[0][1]!r}")
    return json_vocab


def _read_merges_txt(path: pathlib.Path, json_vocab: dict[str, int]) -> list[tuple[str, str]]:
    """The merges of ``path`` as pairs of token texts, each line checked; errors name the line."""
    lines = path.read_text(encoding="utf-8").split("\n")
    while lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line, and any blank lines after it
    first = 1 if lines and lines[0].startswith("#version") else 0
    alphabet = set(bytes_to_unicode().values())
    merges = []
    for number, line in enumerate(lines[first:], start=first + 1):
        if not line.strip():
            raise ValueError(f"{path} line {number} is blank: expected two tokens separated by one space")
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{path} line {number}: expected two tokens separated by one space, got {line!r}")
        strange = sorted(set("".join(parts)) - alphabet)
        if strange:
            raise ValueError(f"{path} line {number}: {line!r} holds {strange[0]!r}, which is not one of GPT-2's "
                             f"256 byte characters")
        missing = [text for text in (*parts, "".join(parts)) if text not in json_vocab]
        if missing:
            raise ValueError(f"{path} line {number}: {line!r} needs {missing[0]!r}, which is not in vocab.json")
        merges.append((parts[0], parts[1]))
    return merges
