"""Encoding and decoding with byte-level BPE merges (those :func:`minitfm.bpe.train_bpe` learns).

Glossary as in :mod:`minitfm.bpe`: *token* a byte string with an id, *pre-token* a piece cut out by
GPT-2's regex, *rank* a merge's position in the learned list.

Encoding a text:

1. Cut out the special tokens (the longest wins where two start at the same place, as ``<|a|><|b|>``
   over ``<|a|>``); each becomes its own id.
2. Cut the text between them into pre-tokens with GPT-2's regex.
3. Write each pre-token as its UTF-8 bytes, then repeatedly fuse the adjacent pair whose merge has the
   lowest rank (was learned first), until no adjacent pair is a merge. This replays training's merges in
   training's order, so the text is cut as it was during training. A pre-token's ids are cached: in real
   text the same words come back again and again.

By default a special token's text inside the text to encode becomes the special token's id, as in Hugging
Face ``tokenizers``; ``encode(text, allowed_special=set())`` encodes it as ordinary text instead (see
:meth:`Tokenizer.encode`). Text holding a lone surrogate (half of a UTF-16 pair) is refused with a ValueError.

Decoding joins the tokens' bytes and decodes them as UTF-8; a sequence cut inside a character (a model may
generate one) gives U+FFFD there instead of an error. ``decode(encode(text)) == text`` for every string.
Saving and loading in GPT-2's ``vocab.json`` + ``merges.txt`` format live in :mod:`minitfm.bpe_files`.
"""
from __future__ import annotations

import numbers
import os
from typing import AbstractSet, Iterable, Iterator, Literal, Sequence, Union

import regex

from .bpe import (check_no_surrogates, check_special_tokens, merge_pair, pretokenize, special_token_regex,
                  split_on_special_tokens)
from .bpe_files import read_gpt2_files, write_gpt2_files

# The last non-space that a space follows. Between the two, GPT-2's regex always cuts and no later text
# can move the cut: no pre-token but whitespace holds a space after a non-space, and what follows the
# cut is matched without looking back. ``(?r)`` makes ``search`` scan backwards from its end position.
_LAST_SPACE_AFTER_TEXT = regex.compile(r"(?r)\S(?=\s)")


class Tokenizer:
    """A byte-level BPE tokenizer: ``encode`` text to ids, ``decode`` ids to text.

    Args:
        vocab: id -> bytes. It must hold the 256 single bytes (under any ids), every merge's two parts and
            its result, and each special token as its UTF-8 bytes; no two ids may share bytes.
        merges: ``(bytes_a, bytes_b)`` in rank order, as :func:`minitfm.bpe.train_bpe` returns them.
        special_tokens: strings kept whole, such as ``"<|endoftext|>"``.
        cache_size: how many pre-tokens' ids to remember (the cache is emptied when it is full).
    """

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                 special_tokens: Sequence[str] = (), cache_size: int = 100_000):
        self.vocab = _checked_vocab(vocab)
        self.merges = [tuple(merge) for merge in merges]
        self.special_tokens = check_special_tokens(special_tokens)
        self.token_to_id = {token: i for i, token in self.vocab.items()}
        self._byte_ids = [self._id_of(bytes([b]), "the single byte") for b in range(256)]
        self.special_ids = {t: self._id_of(t.encode("utf-8"), "special token") for t in self.special_tokens}
        self._ranks, self._merged_ids = self._merge_tables()
        self._special_regex = special_token_regex(self.special_tokens)
        self._longest_special = max(map(len, self.special_tokens), default=0)
        self._cache: dict[str, list[int]] = {}
        self._cache_size = cache_size

    def _id_of(self, token: bytes, what: str) -> int:
        if token not in self.token_to_id:
            raise ValueError(f"the vocabulary must contain {what} {token!r}, it does not "
                             f"({len(self.vocab)} tokens)")
        return self.token_to_id[token]

    def _merge_tables(self):
        """(id_a, id_b) -> rank, and (id_a, id_b) -> the id of their merge."""
        ranks, merged_ids = {}, {}
        for rank, merge in enumerate(self.merges):
            if len(merge) != 2 or not all(isinstance(part, bytes) for part in merge):
                raise TypeError(f"merge {rank} must be a pair of bytes, got {merge!r}")
            what = f"merge {rank}'s"
            pair = (self._id_of(merge[0], what + " first part"), self._id_of(merge[1], what + " second part"))
            merged_ids[pair] = self._id_of(merge[0] + merge[1], what + " result")
            ranks.setdefault(pair, rank)
        return ranks, merged_ids

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
                    for pretoken in pretokenize(piece):
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
            ids = self._apply_merges([self._byte_ids[b] for b in pretoken.encode("utf-8")])
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[pretoken] = ids
        return ids

    def _apply_merges(self, ids: list[int]) -> list[int]:
        """Fuse the lowest-rank adjacent pair, everywhere it occurs, until no adjacent pair is a merge."""
        ranks, not_a_merge = self._ranks, float("inf")
        while len(ids) > 1:
            pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, not_a_merge))
            if pair not in ranks:
                break
            ids = merge_pair(ids, pair, self._merged_ids[pair])
        return ids

    def encode_iterable(self, chunks: Iterable[str], *,
                        allowed_special: Union[Literal["all"], AbstractSet[str]] = "all") -> Iterator[int]:
        """Yield the ids of ``"".join(chunks)`` lazily, exactly ``encode``'s, holding little text in memory.

        ``chunks`` is any iterable of str: a file opened in text mode (its lines), a list of lines, a
        generator of blocks. Text is encoded up to the last place where a pre-token must end whatever follows
        (a space after a non-space, outside any special token); the rest waits for the next chunk. A run of
        spaces or newlines split across lines is therefore cut exactly as ``encode`` cuts it. Memory grows only
        with a run of text that has no space after a non-space. ``allowed_special`` as in :meth:`encode`.
        """
        if isinstance(chunks, str):
            raise TypeError("encode_iterable takes an iterable of str (lines, a text file), got one str: "
                            "use encode(text)")
        self._allowed(allowed_special)  # checked before the first chunk is read
        pending = ""
        for chunk in chunks:
            if not isinstance(chunk, str):
                raise TypeError(f"encode_iterable takes an iterable of str, got an item of type "
                                f"{type(chunk).__name__}")
            pending += chunk
            cut = self._safe_cut(pending)
            if cut:
                yield from self.encode(pending[:cut], allowed_special=allowed_special)
                pending = pending[cut:]
        yield from self.encode(pending, allowed_special=allowed_special)

    def _safe_cut(self, text: str) -> int:
        """The last position where ``text`` can be cut without changing its encoding, or 0 if none is known.

        It stops ``_longest_special`` characters before the end, so that a special token that may straddle
        the cut lies wholly inside ``text`` and is seen (a cut inside one is moved to before it).
        """
        specials = [m.span() for m in self._special_regex.finditer(text)] if self._special_regex else []
        end = len(text) - self._longest_special
        while end > 0:
            match = _LAST_SPACE_AFTER_TEXT.search(text, 0, end)
            if match is None:
                return 0
            cut = match.end()  # the \S is text[cut - 1], the space text[cut]
            inside = [start for start, stop in specials if start < cut < stop]
            if not inside:
                return cut
            end = inside[0] + 1
        return 0

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: their bytes joined, decoded as UTF-8 (U+FFFD where a character is cut).

        ``ids`` is one sequence of int ids: a list or tuple, or a 1-D integer tensor or array of shape (T,).
        A batch (B, T) is decoded row by row, ``[tok.decode(row) for row in batch]``."""
        if isinstance(ids, (str, bytes)) or isinstance(ids, numbers.Number):
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
        try:
            data = b"".join([self.vocab[i] for i in ids])
        except KeyError:
            bad = next(i for i in ids if i not in self.vocab)
            raise ValueError(f"token id {bad!r} is not in the vocabulary (vocab_size {self.vocab_size}, "
                             f"ids {min(self.vocab)}..{max(self.vocab)})") from None
        return data.decode("utf-8", errors="replace")

    def save(self, directory: str | os.PathLike) -> tuple[str, str]:
        """Write ``vocab.json`` and ``merges.txt`` in GPT-2's format; return their paths."""
        return write_gpt2_files(directory, self.vocab, self.merges, self.special_tokens)

    @classmethod
    def load(cls, directory: str | os.PathLike, **kwargs) -> "Tokenizer":
        """The tokenizer saved in ``directory`` (by :meth:`save`, or GPT-2's own files)."""
        vocab, merges, special_tokens = read_gpt2_files(directory)
        return cls(vocab, merges, special_tokens, **kwargs)


def _checked_vocab(vocab) -> dict[int, bytes]:
    if not isinstance(vocab, dict):
        raise TypeError(f"vocab must be a dict of id -> bytes, got {type(vocab).__name__}")
    seen: dict[bytes, int] = {}
    for i, token in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or not isinstance(token, bytes):
            raise TypeError(f"vocab must map int ids to bytes, got {i!r}: {token!r}")
        if token in seen:
            raise ValueError(f"vocab gives the bytes {token!r} two ids, {seen[token]} and {i}")
        seen[token] = i
    return dict(vocab)
