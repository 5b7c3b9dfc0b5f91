"""SentencePiece-style BPE (Llama 2, Mistral, Gemma): characters, the ``▁`` space, and byte fallback.

Glossary: a *piece* is a token's text (``"▁the"``, where ``▁`` U+2581 stands for a space), a *byte piece* one of
the 256 ``<0x00>``..``<0xFF>``, a *word* a stretch of text that merges never cross.

Where the book's byte-level BPE (:mod:`minitfm.text.bpe_tokenizer`) starts from a text's UTF-8 bytes, this one
starts from its characters. Encoding a text:

1. Cut out the special tokens whole (Hugging Face's "added tokens": ``<s>``, ``</s>`` ...).
2. Normalise each piece of text between them: spaces become ``▁``, and a ``▁`` goes in front of the text (the
   "dummy prefix", so that ``"Hello"`` at the start is encoded as ``" Hello"`` in the middle is). A model's
   ``tokenizer.json`` says exactly how (:mod:`minitfm.text.tokenizer_json` reads it); the default is
   SentencePiece's own: a dummy prefix at the start of the text only.
3. Each character becomes its piece's id. A character that is no piece (a rare Chinese character, an emoji)
   becomes the byte pieces of its UTF-8 bytes: *byte fallback*, so no text is ever "unknown".
4. Merge by rank with the byte-level tokenizer's loop (:func:`minitfm.text.pretokenize.apply_merges`).

Decoding joins the pieces, ``▁`` read as a space and each byte piece as its byte, decodes the bytes as UTF-8
(U+FFFD where a character is cut) and strips the dummy prefix's space.

Why a class of its own, not :class:`minitfm.text.bpe_tokenizer.Tokenizer`: its vocabulary holds the character
``a`` *and* the byte piece ``<0x61>``, two ids with the same bytes, and the byte-level tokenizer refuses that by
design (each token there is one byte string, and each byte string one id).
"""
from __future__ import annotations

import re
from typing import AbstractSet, Callable, Literal, Sequence, Union

from minitfm.text.bpe_tokenizer import id_list
from minitfm.text.pretokenize import apply_merges, check_no_surrogates, split_on_special_tokens

SPACE = "▁"  # U+2581, SentencePiece's stand-in for the space
BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")


def sentencepiece_words(piece: str, at_start: bool) -> list[str]:
    """SentencePiece's own normalisation: spaces become ``▁``, and a ``▁`` goes in front of the text's start."""
    return [(SPACE if at_start else "") + piece.replace(" ", SPACE)]


class SentencePieceBPE:
    """A BPE tokenizer over characters with byte fallback, as Llama 2, Mistral and Gemma use.

    Args:
        vocab: id -> piece. It must hold the 256 byte pieces ``<0x00>``..``<0xFF>``, every merge's two parts and
            its result, and each special token; no piece twice.
        merges: ``(piece_a, piece_b)`` in rank order.
        special_tokens: pieces cut out of the text whole before anything else (``"<s>"``), each in ``vocab``
            (one character is allowed, unlike in the byte-level tokenizer: it is no byte piece here).
        merge_ranks: one int per merge, non-decreasing, if two merges must share a rank (SentencePiece ranks
            by the result's score; of two pairs with the same score the leftmost merges first); default
            ``0, 1, 2, ...``.
        words: ``(text, at_start) -> words``: how a piece of text between special tokens is normalised and
            cut into words; ``at_start`` says whether it starts the text. Default :func:`sentencepiece_words`.
        ignore_merges: a word that is a piece as a whole becomes that piece, merges or not.
        strip_spaces: how many leading spaces decoding strips (the dummy prefix's): 1, or 0 for a
            tokenizer without one (Gemma).
    """

    def __init__(self, vocab: dict[int, str], merges: Sequence[tuple[str, str]], *,
                 special_tokens: Sequence[str] = (), merge_ranks: Sequence[int] | None = None,
                 words: Callable[[str, bool], list[str]] = sentencepiece_words, ignore_merges: bool = False,
                 strip_spaces: int = 1):
        if not isinstance(vocab, dict) or not all(isinstance(i, int) and isinstance(p, str) and p
                                                  for i, p in vocab.items()):
            raise TypeError("vocab must be a dict of int id -> non-empty str piece")
        self.vocab = dict(vocab)
        self.piece_to_id = {}
        for i, piece in sorted(self.vocab.items()):
            if piece in self.piece_to_id:
                raise ValueError(f"vocab gives the piece {piece!r} two ids, {self.piece_to_id[piece]} and {i}")
            self.piece_to_id[piece] = i
        self.byte_ids = [self.piece_to_id.get(f"<0x{b:02X}>") for b in range(256)]
        missing = [f"<0x{b:02X}>" for b, i in enumerate(self.byte_ids) if i is None]
        if missing:
            raise ValueError(f"byte fallback needs the 256 byte pieces <0x00>..<0xFF>, and the vocabulary lacks "
                             f"{len(missing)} of them, such as {missing[:3]}")
        self.merges = [tuple(merge) for merge in merges]
        self._ranks, self._merged_ids = self._merge_tables(merge_ranks)
        if isinstance(special_tokens, str):
            raise TypeError(f"special_tokens must be a list of str, got the str {special_tokens!r}")
        self.special_tokens = tuple(special_tokens)
        absent = [t for t in self.special_tokens if t not in self.piece_to_id]
        if absent or len(set(self.special_tokens)) < len(self.special_tokens):
            raise ValueError(f"special tokens must be distinct pieces of the vocabulary, got {absent or 'repeats'}")
        self.special_ids = {t: self.piece_to_id[t] for t in self.special_tokens}
        if not callable(words):
            raise TypeError(f"words must be a function (text, at_start) -> list of words, got {type(words).__name__}")
        if not isinstance(strip_spaces, int) or isinstance(strip_spaces, bool) or strip_spaces < 0:
            raise ValueError(f"strip_spaces must be an int >= 0, got {strip_spaces!r}")
        self.words, self.ignore_merges, self.strip_spaces = words, bool(ignore_merges), strip_spaces
        self._texts = {i: self._piece_bytes(p) for i, p in self.vocab.items()}
        self._cache: dict[str, list[int]] = {}

    def _merge_tables(self, merge_ranks) -> tuple[dict, dict]:
        """(pair of ids -> rank, pair of ids -> the id of its result), each merge's pieces checked."""
        ranks = range(len(self.merges)) if merge_ranks is None else list(merge_ranks)
        if len(ranks) != len(self.merges) or any(b < a for a, b in zip(ranks, ranks[1:])):
            raise ValueError(f"merge_ranks must be {len(self.merges)} non-decreasing ints, one per merge")
        rank_of, merged_ids = {}, {}
        for rank, merge in zip(ranks, self.merges):
            if len(merge) != 2 or not all(isinstance(p, str) for p in merge):
                raise TypeError(f"each merge must be a pair of str pieces (a, b), got {merge!r}")
            a, b = merge
            unknown = [p for p in (a, b, a + b) if p not in self.piece_to_id]
            if unknown:
                raise ValueError(f"merge {a!r} + {b!r} (rank {rank}) needs the piece {unknown[0]!r}, which is not "
                                 f"in the vocabulary ({len(self.vocab)} pieces)")
            pair = (self.piece_to_id[a], self.piece_to_id[b])
            rank_of.setdefault(pair, rank)  # a pair listed twice keeps its first rank, as Hugging Face does
            merged_ids.setdefault(pair, self.piece_to_id[a + b])
        return rank_of, merged_ids

    def _piece_bytes(self, piece: str) -> bytes:
        byte = BYTE_PIECE.fullmatch(piece)
        if byte:
            return bytes([int(byte.group(1), 16)])
        return piece.encode("utf-8") if piece in self.special_ids else piece.replace(SPACE, " ").encode("utf-8")

    def __repr__(self) -> str:
        return (f"SentencePieceBPE(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={self.special_tokens})")

    @property
    def vocab_size(self) -> int:
        """How many ids the vocabulary has: byte pieces, characters, merge results and special tokens."""
        return len(self.vocab)

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, *, allowed_special: Union[Literal["all"], AbstractSet[str]] = "all") -> list[int]:
        """The ids of ``text``: special tokens first, then normalised words, characters (or their bytes), merges.

        ``allowed_special`` as in :meth:`minitfm.text.bpe_tokenizer.Tokenizer.encode`: ``"all"`` or the set of
        special tokens whose text becomes their id (``set()``: none). ValueError for a lone surrogate."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        check_no_surrogates(text)
        ids, start = [], 0
        for piece, is_special in split_on_special_tokens(text, self._allowed(allowed_special)):
            if is_special:
                ids.append(self.special_ids[piece])
            else:
                for word in self.words(piece, start == 0):
                    ids.extend(self._encode_word(word))
            start += len(piece)
        return ids

    def _allowed(self, allowed_special) -> tuple[str, ...]:
        if isinstance(allowed_special, str) and allowed_special == "all":
            return self.special_tokens
        if not isinstance(allowed_special, AbstractSet):
            raise TypeError(f"allowed_special must be 'all' or a set of special tokens, got {allowed_special!r}")
        unknown = sorted(t for t in allowed_special if t not in self.special_ids)
        if unknown:
            raise ValueError(f"allowed_special names {unknown}, which are not special tokens of this tokenizer "
                             f"{list(self.special_tokens)}")
        return tuple(t for t in self.special_tokens if t in allowed_special)

    def _encode_word(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            whole = self.piece_to_id.get(word) if self.ignore_merges else None
            if whole is not None:
                ids = [whole]
            else:
                ids = []
                for char in word:
                    i = self.piece_to_id.get(char)
                    ids.extend([i] if i is not None else [self.byte_ids[b] for b in char.encode("utf-8")])
                ids = apply_merges(ids, self._ranks, self._merged_ids)
            if len(word) < 256:  # without pre-tokenization a word can be a whole paragraph: not worth keeping
                if len(self._cache) >= 100_000:
                    self._cache.clear()
                self._cache[word] = ids
        return ids

    def decode(self, ids) -> str:
        """The text of ``ids`` (a list, or a tensor of shape (T,)): pieces joined, ``▁`` read as a space, byte
        pieces as their bytes, decoded as UTF-8 (U+FFFD where a character is cut), the dummy prefix stripped."""
        ids = id_list(ids)
        bad = next((i for i in ids if i not in self._texts), None)
        if bad is not None:
            raise ValueError(f"token id {bad!r} is not in the vocabulary (vocab_size {self.vocab_size}, "
                             f"ids {min(self.vocab)}..{max(self.vocab)})")
        text = b"".join(self._texts[i] for i in ids).decode("utf-8", errors="replace")
        for _ in range(self.strip_spaces):
            text = text[1:] if text.startswith(" ") else text
        return text
