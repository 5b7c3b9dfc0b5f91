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
from typing import Sequence

from minitfm.text.bpe_vocab import check_vocabulary
from minitfm.text.pretokenize import check_no_surrogates

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
    if not isinstance(token, (bytes, bytearray)):
        raise TypeError(f"token must be bytes, got {type(token).__name__} {token!r}"
                        + ("; encode it first, token.encode('utf-8')" if isinstance(token, str) else ""))
    table = bytes_to_unicode()
    return "".join(table[byte] for byte in token)


ADDED_TOKENS = "added_tokens.json"  # special tokens that vocab.json alone cannot tell from regular ones


def write_gpt2_files(directory: str | os.PathLike, vocab: dict[int, bytes],
                     merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str] = ()) -> tuple[str, str]:
    """Write ``vocab.json`` and ``merges.txt`` into ``directory`` (created if needed); return their paths.

    The three arguments are checked as :class:`minitfm.text.bpe_tokenizer.Tokenizer` checks them (a file that
    could not be read back is never written)."""
    check_vocabulary(vocab, merges, special_tokens)  # TypeError/ValueError naming what is wrong
    directory = _folder(directory, create=True)
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
    # A special token whose bytes are also a byte or a merge's result shares that id, and vocab.json alone cannot
    # say it is special: such tokens also go to added_tokens.json (Hugging Face's name), which read_gpt2_files reads.
    regular = {bytes([b]) for b in range(256)} | {a + b for a, b in merges}
    shared = {t: json_vocab[t] for t in special_tokens if t.encode("utf-8") in regular}
    added_path = directory / ADDED_TOKENS
    if shared:
        added_path.write_text(json.dumps(shared, ensure_ascii=False), encoding="utf-8")
    elif added_path.exists():  # a file from an earlier save into this folder would name tokens that are not special
        added_path.unlink()
    return str(vocab_path), str(merges_path)


def read_gpt2_files(directory: str | os.PathLike):
    """Read ``vocab.json`` and ``merges.txt`` from ``directory``.

    The vocabulary must be the 256 bytes, the merges' results and the special tokens: an entry that is
    neither one byte nor a merge's result is a special token, and one written in GPT-2's shifted byte
    characters (``Ġ`` for the space, ``Ċ`` ...) is refused as the sign of a ``merges.txt`` cut short or
    belonging to another vocabulary. ValueError names any other inconsistency: a repeated token or id, a
    line of ``merges.txt`` that is not two tokens of ``vocab.json``, a repeated merge, an empty file, a file
    that is not UTF-8 or not JSON, a Git LFS pointer instead of the file; FileNotFoundError a missing one.

    Returns:
        ``(vocab, merges, special_tokens)`` as :class:`minitfm.text.bpe_tokenizer.Tokenizer` takes them: id -> bytes,
        ``(bytes_a, bytes_b)`` in rank order, and the specials (the vocabulary entries that are neither one
        byte nor a merge's result) in id order.
    """
    directory = _folder(directory)
    json_vocab = _read_vocab_json(directory / "vocab.json")
    merge_texts = _read_merges_txt(directory / "merges.txt", json_vocab)
    regular = set(bytes_to_unicode().values()) | {a + b for a, b in merge_texts}
    added = _read_added_tokens(directory / ADDED_TOKENS, json_vocab)  # specials that are also regular tokens
    special_tokens = [text for text, i in sorted(json_vocab.items(), key=lambda item: item[1])
                      if text not in regular or text in added]
    shifted = {char for byte, char in bytes_to_unicode().items() if ord(char) != byte}  # Ġ for the space, Ċ ...
    suspicious = [text for text in special_tokens if len(text) > 1 and set(text) & shifted]
    if suspicious:
        raise ValueError(f"{directory / 'vocab.json'} does not match {directory / 'merges.txt'} "
                         f"({len(merge_texts)} merges): {len(suspicious)} entries such as {suspicious[:3]} are neither "
                         f"one byte nor a merge's result, and are written in GPT-2's byte characters (Ġ is a space), "
                         f"so they are no special tokens; merges.txt is truncated or belongs to another vocabulary")
    vocab = {i: text.encode("utf-8") if text not in regular else _token_bytes(text) for text, i in json_vocab.items()}
    merges = [(_token_bytes(a), _token_bytes(b)) for a, b in merge_texts]
    return vocab, merges, special_tokens


def _read_added_tokens(path: pathlib.Path, json_vocab: dict) -> set:
    """The special tokens ``added_tokens.json`` names ({text: id}, each as in vocab.json), or none without the file."""
    if not path.exists():
        return set()
    try:
        added = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a UTF-8 JSON object of special tokens ({error})") from error
    if not isinstance(added, dict) or any(json_vocab.get(t) != i for t, i in added.items()):
        raise ValueError(f"{path} must map special tokens to their ids in vocab.json, got {str(added)[:80]}")
    return set(added)


def _folder(directory, create: bool = False) -> pathlib.Path:
    """``directory`` as a Path, after checking it is a folder (created first when ``create``)."""
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a folder's path (str or pathlib.Path), got {type(directory).__name__}")
    folder = pathlib.Path(directory)
    if create and not folder.exists():
        folder.mkdir(parents=True)
    if not folder.exists():
        raise FileNotFoundError(f"no folder {str(folder)!r}: expected a folder holding vocab.json and merges.txt")
    if not folder.is_dir():
        raise ValueError(f"{folder} is a file, expected a folder (the one holding vocab.json and merges.txt)")
    return folder


LFS_POINTER = "version https://git-lfs.github.com/spec/v1"


def read_text_file(path: pathlib.Path, what: str) -> str:
    """The UTF-8 text of ``path``; FileNotFoundError if missing, ValueError if a folder, empty, not UTF-8 or
    a Git LFS pointer (the small text file a clone without ``git lfs`` leaves in place of the real one)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: expected {what}")
    if path.is_dir():
        raise ValueError(f"{path} is a folder, expected {what} (a file)")
    data = path.read_bytes()
    if not data.strip():
        raise ValueError(f"{path} is empty ({len(data)} bytes), expected {what}")
    if data.startswith(LFS_POINTER.encode()):
        raise ValueError(f"{path} is a Git LFS pointer ('{LFS_POINTER} ...'), not {what}: the repository was "
                         f"cloned without git-lfs; run 'git lfs pull' there, or download the file itself")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start}), "
                         f"expected {what} in UTF-8") from None


def read_json_file(path: pathlib.Path, what: str):
    """The JSON value of ``path`` (see :func:`read_text_file`); ValueError if not JSON or a key repeats."""
    text = read_text_file(path, what)
    try:
        return json.loads(text, object_pairs_hook=functools.partial(_no_repeated_keys, path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}), expected {what}") from None


def _no_repeated_keys(path, pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"{path} repeats the key {key!r} (values {out[key]!r} and {value!r}): JSON would keep "
                             f"the last one silently")
        out[key] = value
    return out


@functools.lru_cache(maxsize=1)
def _byte_of() -> dict[str, int]:
    return {char: byte for byte, char in bytes_to_unicode().items()}


def _token_bytes(text: str) -> bytes:
    byte_of = _byte_of()
    return bytes(byte_of[char] for char in text)


def _read_vocab_json(path: pathlib.Path) -> dict[str, int]:
    json_vocab = read_json_file(path, "a vocab.json (one JSON object, token -> id)")
    if not isinstance(json_vocab, dict):
        raise ValueError(f"{path} must hold one JSON object (token -> id), got a {type(json_vocab).__name__}")
    owner: dict[int, str] = {}
    for token, i in json_vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise ValueError(f"{path} must map each token to an integer id >= 0, got {token!r}: {i!r}")
        if not token:
            raise ValueError(f"{path} holds the empty token '' (id {i}): a token has one byte or more")
        if i in owner:
            raise ValueError(f"{path} gives the id {i} to two tokens, {owner[i]!r} and {token!r}")
        owner[i] = token
        _check_no_surrogates(token, f"{path}: the token {token!r}")
    return json_vocab


def _check_no_surrogates(text: str, what: str) -> None:

    check_no_surrogates(text, what)


def _read_merges_txt(path: pathlib.Path, json_vocab: dict[str, int]) -> list[tuple[str, str]]:
    """The merges of ``path`` as pairs of token texts, each line checked; errors name the line."""
    lines = read_text_file(path, "a merges.txt ('#version: 0.2', then one merge per line)").split("\n")
    while lines and lines[-1].strip("\r") == "":
        lines.pop()  # the newline that ends the last line, and any blank lines after it
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]  # a file saved with Windows newlines
    first = 1 if lines and lines[0].startswith("#version") else 0
    alphabet = set(bytes_to_unicode().values())
    merges, seen = [], {}
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
        if line in seen:
            raise ValueError(f"{path} line {number}: {line!r} repeats line {seen[line]}")
        seen[line] = number
        merges.append((parts[0], parts[1]))
    return merges
