"""Encoding and decoding with byte-level BPE merges (those :func:`minitfm.text.bpe_trainer.train_bpe` learns).

Glossary as in :mod:`minitfm.text.bpe_trainer`: *token* a byte string with an id, *pre-token* a piece cut out by
GPT-2's regex, *rank* a merge's position in the learned list.

Encoding a text:

1. Cut out the special tokens (the longest wins where two start at the same place, as ``<|a|><|b|>``
   over ``<|a|>``); each becomes its own id.
2. Cut the text between them into pre-tokens with GPT-2's regex (or the ``split_pattern`` given).
3. Write each pre-token as its UTF-8 bytes, then repeatedly fuse the adjacent pair whose merge has the
   lowest rank (was learned first), until no adjacent pair is a merge. This replays training's merges in
   training's order, so the text is cut as it was during training. A pre-token's ids are cached: in real
   text the same words come back again and again.

By default a special token's text inside the text to encode becomes the special token's id, as in Hugging
Face ``tokenizers``; ``encode(text, allowed_special=set())`` encodes it as ordinary text instead (see
:meth:`Tokenizer.encode`). Text holding a lone surrogate (half of a UTF-16 pair) is refused with a ValueError.

Decoding joins the tokens' bytes and decodes them as UTF-8; a sequence cut inside a character (a model may
generate one) gives U+FFFD there instead of an error. ``decode(encode(text)) == text`` for every string.
Saving and loading in GPT-2's ``vocab.json`` + ``merges.txt`` format live in :mod:`minitfm.text.gpt2_files`.
"""
from __future__ import annotations

import numbers
import os
import unicodedata
from typing import AbstractSet, Iterable, Iterator, Literal, Sequence, Union

import regex

from minitfm.text.bpe_vocab import check_vocabulary
from minitfm.text.gpt2_files import read_gpt2_files, write_gpt2_files
from minitfm.text.pretokenize import (GPT2_SPLIT_PATTERN, apply_merges, check_no_surrogates, pretokenize,
                                      special_token_regex, split_on_special_tokens, split_regex)

NORMAL_FORMS = ("NFC", "NFD", "NFKC", "NFKD")

# The last non-space that a space follows. Between the two, GPT-2's regex always cuts and no later text
# can move the cut: no pre-token but whitespace holds a space after a non-space, and what follows the
# cut is matched without looking back. ``(?r)`` makes ``search`` scan backwards from its end position.
_LAST_SPACE_AFTER_TEXT = regex.compile(r"(?r)\S(?=\s)")


class Tokenizer:
    """A byte-level BPE tokenizer: ``encode`` text to ids, ``decode`` ids to text.

    Args:
        vocab: id -> bytes. It must hold the 256 single bytes (under any ids), every merge's two parts and
            its result, and each special token as its UTF-8 bytes; no two ids may share bytes, and every
            entry must be one of these (a token that no merge makes and no special token names could never
            be produced: it is refused as a vocabulary that does not match its merges).
        merges: ``(bytes_a, bytes_b)`` in rank order, as :func:`minitfm.text.bpe_trainer.train_bpe` returns them; no pair
            twice.
        special_tokens: strings kept whole, such as ``"<|endoftext|>"``. A special token whose bytes are
            already a regular token (a merge's result) reuses that token's id.
        cache_size: how many pre-tokens' ids to remember (the cache is emptied when it is full), an int >= 1.
        split_pattern: the pre-tokenizer's regex, GPT-2's by default (Llama 3 and Qwen bring their own, read
            from their ``tokenizer.json`` by :mod:`minitfm.text.tokenizer_json`); the text between two matches,
            if any, is a pre-token too.
        normalization: None, or the Unicode normal form (``"NFC"``, as Qwen's) applied to the text between
            special tokens before it is cut.
        ignore_merges: a pre-token that is a token of the vocabulary as a whole becomes that token, merges
            or not (Llama 3's ``tokenizer.json`` asks for this).
    """

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                 special_tokens: Sequence[str] = (), cache_size: int = 100_000, *,
                 split_pattern: str = GPT2_SPLIT_PATTERN, normalization: str | None = None,
                 ignore_merges: bool = False):
        if isinstance(cache_size, bool) or not isinstance(cache_size, int):
            raise TypeError(f"cache_size must be an int >= 1, got {type(cache_size).__name__} {cache_size!r}")
        if cache_size < 1:
            raise ValueError(f"cache_size must be an int >= 1, got {cache_size}")
        if normalization is not None and normalization not in NORMAL_FORMS:
            raise ValueError(f"normalization must be None or one of {NORMAL_FORMS}, got {normalization!r}")
        if not isinstance(ignore_merges, bool):
            raise TypeError(f"ignore_merges must be a bool, got {type(ignore_merges).__name__}")
        self._split = split_regex(split_pattern)  # TypeError/ValueError for a pattern that is no regex
        self.split_pattern, self.normalization, self.ignore_merges = split_pattern, normalization, ignore_merges
        tables = check_vocabulary(vocab, merges, special_tokens)
        self.vocab, self.merges, self.special_tokens = tables.vocab, tables.merges, tables.special_tokens
        self.token_to_id, self.special_ids = tables.token_to_id, tables.special_ids
        self._byte_ids, self._ranks, self._merged_ids = tables.byte_ids, tables.ranks, tables.merged_ids
        self._special_regex = special_token_regex(self.special_tokens)
        self._longest_special = max(map(len, self.special_tokens), default=0)
        self._cache: dict[str, list[int]] = {}
        self._cache_size = cache_size

    def replace(self, **changes) -> "Tokenizer":
        """A new tokenizer with this one's settings except ``changes`` (``__init__``'s arguments by name), so that
        a copy with other special tokens keeps the regex, the normal form and ``ignore_merges`` (a test checks
        that every argument of ``__init__`` is carried over)."""
        args = dict(vocab=self.vocab, merges=self.merges, special_tokens=self.special_tokens,
                    cache_size=self._cache_size, split_pattern=self.split_pattern, normalization=self.normalization,
                    ignore_merges=self.ignore_merges)
        unknown = sorted(set(changes) - set(args))
        if unknown:
            raise TypeError(f"replace() takes Tokenizer's arguments {sorted(args)}, got {unknown}")
        return type(self)(**{**args, **changes})

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens})")

    @property
    def vocab_size(self) -> int:
        """How many ids the vocabulary has: bytes, merge results and special tokens."""
        return len(self.vocab)

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, *, allowed_special: Union[Literal["all"], AbstractSet[str]] = "all") -> list[int]:
        """The ids of ``text``: special tokens first, then GPT-2's pre-tokens, then merges by rank.

        ``allowed_special`` says which special tokens' text becomes their id: ``"all"`` (the default, as in
        Hugging Face ``tokenizers``) or a set of this tokenizer's special tokens; the text of any other is
        encoded as ordinary bytes (``allowed_special=set()``: none is special). Text from users or the web can
        hold ``"<|endoftext|>"`` literally, and with the default it becomes the control token, so such text
        can inject an end of text, or any control token, where none was meant (tiktoken refuses such text
        unless told otherwise). ValueError if ``text`` holds a lone surrogate.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        specials = self._allowed(allowed_special)
        ids = []
        try:
            for piece, is_special in split_on_special_tokens(text, specials):
                if is_special:
                    ids.append(self.special_ids[piece])
                else:
                    if self.normalization is not None:
                        piece = unicodedata.normalize(self.normalization, piece)
                    for pretoken in pretokenize(piece, self._split):
                        ids.extend(self._encode_pretoken(pretoken))
        except UnicodeEncodeError:
            check_no_surrogates(text)  # names the first one
            raise
        return ids

    def _allowed(self, allowed_special) -> tuple[str, ...]:
        """The special tokens that ``allowed_special`` lets through, as a tuple in this tokenizer's order."""
        if isinstance(allowed_special, str):
            if allowed_special != "all":
                raise ValueError(f"allowed_special must be 'all' or a set of special tokens, got {allowed_special!r}")
            return self.special_tokens
        if not isinstance(allowed_special, AbstractSet):
            raise TypeError(f"allowed_special must be 'all' or a set of special tokens, got "
                            f"{type(allowed_special).__name__}")
        unknown = sorted(t for t in allowed_special if t not in self.special_ids)
        if unknown:
            raise ValueError(f"allowed_special names {unknown}, which are not special tokens of this tokenizer "
                             f"{list(self.special_tokens)}")
        return tuple(t for t in self.special_tokens if t in allowed_special)

    def _encode_pretoken(self, pretoken: str) -> list[int]:
        ids = self._cache.get(pretoken)
        if ids is None:
            whole = self.token_to_id.get(pretoken.encode("utf-8")) if self.ignore_merges else None
            ids = [whole] if whole is not None else apply_merges(
                [self._byte_ids[b] for b in pretoken.encode("utf-8")], self._ranks, self._merged_ids)
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[pretoken] = ids
        return ids

    def encode_iterable(self, chunks: Iterable[str], *,
                        allowed_special: Union[Literal["all"], AbstractSet[str]] = "all") -> Iterator[int]:
        """Yield the ids of ``"".join(chunks)`` lazily, exactly ``encode``'s, holding little text in memory.

        ``chunks`` is any iterable of str: a file opened in text mode (its lines), a list of lines, a
        generator of blocks. Text is encoded up to the last place where a pre-token must end whatever follows
        (a space after a non-space, outside any special token); the rest waits for the next chunk. A run of
        spaces or newlines split across lines is therefore cut exactly as ``encode`` cuts it. Memory grows only
        with a run of text that has no space after a non-space. ``allowed_special`` as in :meth:`encode`.
        That rule is proved for GPT-2's regex only: with another ``split_pattern`` nothing is encoded before the
        last chunk (the ids are the same, but the whole text is held in memory).

        The work is linear in the length of the text for any chunking: each chunk is searched for a cut once
        (with the last ``2 * longest special token + 1`` characters before it), pending text is kept as a list
        of chunks and joined only when a cut is found, and each character is encoded once.
        """
        if isinstance(chunks, (str, bytes)):
            raise TypeError(f"encode_iterable takes an iterable of str (lines, a text file), got one "
                            f"{type(chunks).__name__}: use encode(text)" + (" after decoding it" if isinstance(
                                chunks, bytes) else ""))
        if not isinstance(chunks, Iterable):
            raise TypeError(f"encode_iterable takes an iterable of str (lines, a text file), got "
                            f"{type(chunks).__name__}")
        self._allowed(allowed_special)  # checked now, not when the first id is asked for
        return self._encode_chunks(chunks, allowed_special)

    def _encode_chunks(self, chunks: Iterable[str], allowed_special) -> Iterator[int]:
        margin = self._longest_special
        parts: list[str] = []
        size = searched = 0  # pending text's length; every cut before ``searched`` was tried already
        for number, chunk in enumerate(chunks):
            if not isinstance(chunk, str):
                raise TypeError(f"encode_iterable takes an iterable of str, got an item of type "
                                f"{type(chunk).__name__} (item {number})")
            if not chunk:
                continue
            parts.append(chunk)
            size += len(chunk)
            end = size - margin  # a special token may straddle a cut closer to the end than this
            if end <= searched:
                continue
            start = max(0, searched - margin - 1)
            window = _tail(parts, size - start)
            cut = self._safe_cut(window, searched - start, end - start)
            searched = end
            if cut:
                text = "".join(parts)
                cut += start
                yield from self.encode(text[:cut], allowed_special=allowed_special)
                parts = [text[cut:]] if cut < len(text) else []
                size, searched = size - cut, searched - cut
        yield from self.encode("".join(parts), allowed_special=allowed_special)

    def _safe_cut(self, text: str, low: int, end: int) -> int:
        """The last position in ``(low, end)`` where ``text`` can be cut without changing its encoding, or 0.

        A cut lies after a non-space that a space follows and inside no occurrence of any special token
        (occurrences that overlap one another included, so a cut is never inside the one ``encode`` matches).
        ``text`` must reach ``_longest_special`` characters past ``end`` and as far before ``low``."""
        if self.split_pattern != GPT2_SPLIT_PATTERN:
            return 0  # another regex may join a space to what precedes it (Llama 3: "!\n")
        margin = self._longest_special
        while end > low:
            match = _LAST_SPACE_AFTER_TEXT.search(text, max(0, low - 1), end)
            if match is None:
                return 0
            cut = match.end()  # the \S is text[cut - 1], the space text[cut]
            if cut <= low:
                return 0
            if self._special_regex is None or not any(
                    m.start() < cut < m.end() for m in self._special_regex.finditer(
                        text, max(0, cut - margin), min(len(text), cut + margin), overlapped=True)):
                return cut
            end = cut - 1
        return 0

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: their bytes joined, decoded as UTF-8 (U+FFFD where a character is cut).

        ``ids`` is one sequence of int ids: a list or tuple, or a 1-D integer tensor or array of shape (T,).
        A batch (B, T) is decoded row by row, ``[tok.decode(row) for row in batch]``."""
        ids = id_list(ids)
        try:
            data = b"".join([self.vocab[i] for i in ids])
        except KeyError:
            bad = next(i for i in ids if i not in self.vocab)
            raise ValueError(f"token id {bad!r} is not in the vocabulary (vocab_size {self.vocab_size}, "
                             f"ids {min(self.vocab)}..{max(self.vocab)})") from None
        return data.decode("utf-8", errors="replace")

    def save(self, directory: str | os.PathLike) -> tuple[str, str]:
        """Write ``vocab.json`` and ``merges.txt`` in GPT-2's format; return their paths."""
        if (self.split_pattern, self.normalization, self.ignore_merges) != (GPT2_SPLIT_PATTERN, None, False):
            raise ValueError("vocab.json and merges.txt hold GPT-2's pre-tokenizer only, and this tokenizer has "
                             f"split_pattern={self.split_pattern!r}, normalization={self.normalization!r}, "
                             f"ignore_merges={self.ignore_merges}: keep its tokenizer.json instead")
        return write_gpt2_files(directory, self.vocab, self.merges, self.special_tokens)

    @classmethod
    def load(cls, directory: str | os.PathLike, **kwargs) -> "Tokenizer":
        """The tokenizer saved in ``directory`` (by :meth:`save`, or GPT-2's own files)."""
        vocab, merges, special_tokens = read_gpt2_files(directory)
        return cls(vocab, merges, special_tokens, **kwargs)


def id_list(ids) -> list[int]:
    """``ids`` (a list or tuple of ints, or a tensor or array of shape (T,)) as a list of int; TypeError or
    ValueError naming what arrived otherwise."""
    if isinstance(ids, (str, bytes, AbstractSet, dict)) or isinstance(ids, numbers.Number) or not isinstance(
            ids, Iterable):
        raise TypeError(f"decode takes one sequence of int ids (a list, or a tensor of shape (T,)), got "
                        f"{type(ids).__name__} {ids!r}")
    shape = getattr(ids, "shape", None)
    if shape is not None and hasattr(ids, "tolist"):  # a torch tensor or NumPy array
        if len(shape) != 1:
            raise ValueError(f"decode takes one sequence of shape (T,), got shape {tuple(shape)}"
                             + ("; decode each row" if len(shape) == 2 else "; wrap one id in a list, [id]"
                                if len(shape) == 0 else ""))
        ids = ids.tolist()
    ids = list(ids)
    if not all(type(i) is int for i in ids):  # bools and floats would pass as dict keys (True == 1, 5.0 == 5)
        bad = next(i for i in ids if type(i) is not int)
        if isinstance(bad, bool) or not isinstance(bad, numbers.Integral):
            raise TypeError(f"decode takes int ids, got {type(bad).__name__} {bad!r}")
        ids = [int(i) for i in ids]  # NumPy's integer scalars
    return ids


def _tail(parts: list[str], n: int) -> str:
    """The last ``n`` characters of ``"".join(parts)``, reading only the parts they lie in."""
    pieces, have = [], 0
    for part in reversed(parts):
        if have >= n:
            break
        pieces.append(part)
        have += len(part)
    return "".join(reversed(pieces))[-n:] if n else ""
