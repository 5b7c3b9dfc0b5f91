"""Training a byte-level BPE tokenizer (byte-pair encoding, as in GPT-2), from scratch.

Glossary: *byte* one of the 256 values 0..255; *token* a byte string with an id; *pre-token* a piece of
text the splitting regex cuts out (a word with its leading space, a number, a run of punctuation or of
spaces); *pair* two adjacent tokens inside one pre-token; *merge* a pair fused into a new token; *rank* a
merge's position in the learned list (rank 0 was learned first).

The algorithm (Sennrich et al., 2016; byte-level as in Radford et al., 2019):

1. Start from the 256 single bytes: ids 0..255 are ``bytes([0])`` .. ``bytes([255])``, so every string,
   in any script, can be written with them (its UTF-8 bytes) and nothing is ever unknown.
2. Cut the text into pre-tokens with GPT-2's regex, after cutting out the special tokens (such as
   ``<|endoftext|>``), which are never split, merged or counted. A merge never crosses a pre-token
   boundary, so no token glues a word to the punctuation after it. Equal pre-tokens are counted once,
   with their frequency.
3. Count every adjacent pair of tokens, weighted by the pre-tokens' frequencies; fuse the most frequent
   pair into a new token everywhere; repeat until the vocabulary is full. Ties between pairs of equal
   counts are a convention, so two trainers can learn different merges from the same text. By default
   (``tie_break="bytes"``) the lexicographically greater pair of byte strings, ``(bytes_a, bytes_b)``,
   wins: the rule of Stanford's CS336 assignment 1. ``tie_break="huggingface"`` trains as Hugging Face
   ``tokenizers``' ``BpeTrainer`` does (see :func:`train_bpe`).

Ids (``tie_break="bytes"``): 0..255 the bytes, then one id per merge in the order learned, then the
special tokens in the order given, last (GPT-2 puts ``<|endoftext|>`` last too, at 50256). ``vocab_size``
counts all three.

Two trainers give identical results. :func:`train_bpe_naive` recounts every pair at every step: the
algorithm as stated, slow. :func:`train_bpe` counts once and then updates only the pre-tokens that contain
the merged pair, finding the most frequent pair with a heap. Encoding and decoding with the learned merges
live in :mod:`minitfm.text.bpe_tokenizer`.
"""
from __future__ import annotations

import heapq
import os
import pathlib
import warnings
from collections import Counter
from typing import Sequence, Union

from minitfm.text.gpt2_files import bytes_to_unicode, read_text_file

from minitfm.text.pretokenize import (Pair, check_no_surrogates, check_special_tokens, merge_pair, pretokenize,
                                      split_on_special_tokens)

TextOrPath = Union[str, os.PathLike]
TIE_BREAKS = ("bytes", "huggingface")


def train_bpe(text_or_path: TextOrPath, vocab_size: int, special_tokens: Sequence[str] = (), *,
              tie_break: str = "bytes"):
    """Learn byte-level BPE merges from a text, updating pair counts incrementally.

    Args:
        text_or_path: the training text as a ``str``, or a file (a ``pathlib.Path`` or any other
            ``os.PathLike``) read whole as UTF-8. A ``str`` is always the text itself, never a file name:
            wrap a file name in ``pathlib.Path`` (a short ``str`` that names a file gets a warning). A lone
            surrogate in the text is refused with a ValueError (see :func:`check_no_surrogates`).
        vocab_size: the size of the final vocabulary: 256 bytes + merges + special tokens. Training stops
            early (a smaller vocabulary) when no pre-token has two tokens left to merge.
        special_tokens: strings such as ``"<|endoftext|>"`` (two bytes or more each), given their own ids.
        tie_break: which pair wins among pairs of equal counts.

            - ``"bytes"`` (the default): the lexicographically greater pair of byte strings
              ``(bytes_a, bytes_b)``, the rule of Stanford's CS336 assignment 1. Special tokens are cut out
              of the text first (never split, merged or counted) and take the last ids.
            - ``"huggingface"``: train exactly as Hugging Face ``tokenizers``' ``BpeTrainer`` with a
              ``ByteLevel`` pre-tokenizer (GPT-2's regex, no prefix space) and
              ``initial_alphabet=ByteLevel.alphabet()`` (read from its ``trainer.rs``). Among equal counts the
              pair with the smaller token ids wins, ``(id_a, id_b)`` compared in order, with BpeTrainer's ids:
              the special tokens first (0, 1, ...), then the 256 bytes in the order of the code points of
              their byte-level characters (:func:`minitfm.text.gpt2_files.bytes_to_unicode`: ``!`` .. ``~``, ``¡``
              .. ``ÿ``, then the bytes written U+0100 on, such as the space ``Ġ``), then each new token in the
              order learned. The returned vocabulary uses these ids. BpeTrainer does not cut the special tokens
              out of the training text: their text is pre-tokenized and counted like any other (remove it
              from the text to keep it out), and a merge whose result is already a token (in byte-level
              characters) adds a merge but no new id.

    Returns:
        ``(vocab, merges)``: ``vocab`` maps id -> bytes; ``merges`` lists ``(bytes_a, bytes_b)`` in the
        order learned (with ``tie_break="bytes"``, merge ``k`` made token ``256 + k``).
    """
    training = _Training(text_or_path, vocab_size, special_tokens, tie_break)
    pairs = _PairCounts(training.words, training.freqs, training.tie_key)
    while training.wants_more():
        pair = pairs.pop_most_frequent()
        if pair is None:
            break
        pairs.merge(pair, new_id=training.add_merge(pair))
    return training.result()


def train_bpe_naive(text_or_path: TextOrPath, vocab_size: int, special_tokens: Sequence[str] = (), *,
                    tie_break: str = "bytes"):
    """:func:`train_bpe` as the algorithm states it: recount every pair of every pre-token at every merge.

    Same arguments and results; each step costs a pass over all the pre-tokens, so keep it for small texts.
    """
    training = _Training(text_or_path, vocab_size, special_tokens, tie_break)
    words, freqs, tie_key = training.words, training.freqs, training.tie_key
    while training.wants_more():
        counts = Counter()
        for word, freq in zip(words, freqs):
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        if not counts:
            break
        pair = max(counts, key=lambda p: (counts[p], tie_key(p)))
        new_id = training.add_merge(pair)
        words = [merge_pair(word, pair, new_id) for word in words]
    return training.result()


class _Training:
    """What both trainers share: the checked arguments, the pre-tokens, the vocabulary being built, the tie rule.

    Internal ids: 0..255 the bytes, 256, 257, ... each new token in the order learned. ``tie_key(pair)`` is
    the value the winning pair maximises among equal counts. With ``tie_break="huggingface"`` a merge whose
    result already has an id reuses it (as BpeTrainer does), and :meth:`result` lays ids out as BpeTrainer.
    """

    def __init__(self, text_or_path, vocab_size, special_tokens, tie_break):
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
        self.special_tokens = special_tokens = check_special_tokens(special_tokens)
        if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
            raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__} {vocab_size!r}")
        smallest = 256 + len(special_tokens)
        if vocab_size < smallest:
            raise ValueError(f"vocab_size must be at least 256 bytes + {len(special_tokens)} special tokens = "
                             f"{smallest}, got {vocab_size}")
        self.huggingface = tie_break == "huggingface"
        text = _read_text(text_or_path)
        check_no_surrogates(text, "the training text")
        counts = Counter()
        if self.huggingface:  # BpeTrainer counts the special tokens' text like any other text
            counts.update(pretokenize(text))
        else:
            for piece, is_special in split_on_special_tokens(text, special_tokens):
                if not is_special:
                    counts.update(pretokenize(piece))
        self.words = [list(pretoken.encode("utf-8")) for pretoken in counts]
        self.freqs = list(counts.values())
        self.n_new, self.n_wanted = 0, vocab_size - smallest
        self.vocab = {i: bytes([i]) for i in range(256)}
        self.merges: list[tuple[bytes, bytes]] = []
        if self.huggingface:
            table = bytes_to_unicode()
            self.rank = {byte: r for r, byte in enumerate(sorted(range(256), key=lambda b: ord(table[b])))}
            self.id_of_text = {table[b]: b for b in range(256)}
            for i, token in enumerate(special_tokens):  # specials: internal ids -1, -2, ...
                if token in self.id_of_text:
                    raise ValueError(f"special token {token!r} is the byte-level character of byte "
                                     f"{self.id_of_text[token]}: BpeTrainer would give that byte the special's id")
                self.id_of_text[token] = -1 - i
                self.vocab[-1 - i] = token.encode("utf-8")

    def tie_key(self, pair: Pair):
        if self.huggingface:  # the smaller BpeTrainer ids win
            return -self._hf_id(pair[0]), -self._hf_id(pair[1])
        return self.vocab[pair[0]], self.vocab[pair[1]]  # the greater bytes win

    def _hf_id(self, i: int) -> int:
        k = len(self.special_tokens)
        return -1 - i if i < 0 else k + self.rank[i] if i < 256 else k + i

    def wants_more(self) -> bool:
        return self.n_new < self.n_wanted

    def add_merge(self, pair: Pair) -> int:
        """Record the merge of ``pair``; return the id of its result."""
        token = self.vocab[pair[0]] + self.vocab[pair[1]]
        self.merges.append((self.vocab[pair[0]], self.vocab[pair[1]]))
        if self.huggingface:
            text = "".join(bytes_to_unicode()[b] for b in token)  # BpeTrainer's tokens are byte-level strings
            existing = self.id_of_text.get(text)
            if existing is not None:
                if self.vocab[existing] != token:
                    raise ValueError(f"merge {len(self.merges) - 1} makes {token!r}, written {text!r}, the text of the "
                                     f"special token {text!r}: BpeTrainer gives both one id, which a vocabulary of "
                                     f"bytes cannot")
                return existing
        new_id = 256 + self.n_new
        self.vocab[new_id] = token
        self.n_new += 1
        if self.huggingface:
            self.id_of_text[text] = new_id
        return new_id

    def result(self) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
        if not self.huggingface:
            vocab = dict(self.vocab)
            for token in self.special_tokens:
                vocab[len(vocab)] = token.encode("utf-8")
            return vocab, self.merges
        vocab = {i: token.encode("utf-8") for i, token in enumerate(self.special_tokens)}
        vocab.update({self._hf_id(i): token for i, token in self.vocab.items() if i >= 0})
        return dict(sorted(vocab.items())), self.merges


def _read_text(text_or_path) -> str:
    if isinstance(text_or_path, os.PathLike):
        return read_text_file(pathlib.Path(text_or_path), "a training text (UTF-8)")
    if not isinstance(text_or_path, str):
        raise TypeError(f"text_or_path must be the text (a str) or a file (a pathlib.Path), "
                        f"got {type(text_or_path).__name__}")
    if len(text_or_path) < 1024 and "\n" not in text_or_path and os.path.isfile(text_or_path):
        warnings.warn(f"training on the text {text_or_path!r} itself, which names a file: a str is the text, "
                      f"pass pathlib.Path({text_or_path!r}) to train on the file", stacklevel=4)
    return text_or_path


class _ReverseOrder:
    """Wraps a key so that ``heapq``'s min-heap pops the greatest key first (ties to the greater ``tie_key``)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __lt__(self, other):
        return self.key > other.key


class _PairCounts:
    """Pair counts over all pre-tokens, kept up to date as merges rewrite them.

    - ``counts[pair]``: how often ``pair`` occurs, weighted by the pre-tokens' frequencies;
    - ``where[pair]``: the indices of the pre-tokens that contain it, so a merge visits only those;
    - ``heap``: ``(-count, _ReverseOrder(tie_key(pair)), pair)``, pushed at every change of a count: the
      top is the most frequent pair and, among equals, the one with the greater ``tie_key`` (by default its
      bytes, ``(bytes_a, bytes_b)``). An entry stays
      when its pair's count changes; one whose count is no longer the pair's is stale and skipped when it
      reaches the top ("lazy invalidation"). Each pair's current count is always in the heap.
    """

    def __init__(self, words: list[list[int]], freqs: list[int], tie_key):
        self.words, self.freqs, self.tie_key = words, freqs, tie_key
        self.counts: dict[Pair, int] = Counter()
        self.where: dict[Pair, set[int]] = {}
        for index, (word, freq) in enumerate(zip(words, freqs)):
            for pair in zip(word, word[1:]):
                self.counts[pair] += freq
                self.where.setdefault(pair, set()).add(index)
        self.heap = [self._entry(pair, count) for pair, count in self.counts.items()]
        heapq.heapify(self.heap)

    def _entry(self, pair: Pair, count: int):
        return -count, _ReverseOrder(self.tie_key(pair)), pair

    def pop_most_frequent(self) -> Pair | None:
        """The most frequent pair (ties to the greater ``tie_key``), or None when no pair is left."""
        while self.heap:
            negative_count, _, pair = heapq.heappop(self.heap)
            if self.counts.get(pair) == -negative_count:
                return pair
        return None

    def merge(self, pair: Pair, new_id: int) -> None:
        """Fuse ``pair`` into ``new_id`` in every pre-token that contains it, and update the counts."""
        for index in self.where.pop(pair):
            old = self.words[index]
            self.words[index] = new = merge_pair(old, pair, new_id)
            self._recount(index, old, new)
        assert pair not in self.counts, "a merged pair can no longer occur"

    def _recount(self, index: int, old: list[int], new: list[int]) -> None:
        """Move pre-token ``index``'s contribution from its old pairs to its new ones."""
        freq, changes = self.freqs[index], {}
        for pair in zip(old, old[1:]):
            changes[pair] = changes.get(pair, 0) - freq
        for pair in zip(new, new[1:]):
            changes[pair] = changes.get(pair, 0) + freq
        new_pairs = set(zip(new, new[1:]))
        for pair, change in changes.items():
            if pair in new_pairs:
                self.where.setdefault(pair, set()).add(index)
            elif pair in self.where:
                self.where[pair].discard(index)
            if change:
                self._add(pair, change)

    def _add(self, pair: Pair, change: int) -> None:
        count = self.counts[pair] + change
        if count:
            self.counts[pair] = count
            heapq.heappush(self.heap, self._entry(pair, count))
        else:  # the pair no longer occurs anywhere
            del self.counts[pair]
            self.where.pop(pair, None)
