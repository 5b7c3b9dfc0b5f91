"""A contamination check: word n-gram overlap between the training text and the test items.

A test item that appeared in the training text measures memory, not skill. Brown et al. (2020), "Language Models
are Few-Shot Learners" (GPT-3), appendix C, filtered their training data by searching for 13-gram overlaps with
every test and development set, defining a gram as "a lowercase, whitespace delimited word with no punctuation".
For their benchmark overlap analysis they used a per-dataset N (the 5th percentile example length in words, at
least 8 and at most 13) and called an example dirty if it had any N-gram overlap with any training document.

This module follows those rules: text is lower-cased, punctuation (every Unicode "P" category character) is deleted,
and the rest is split on whitespace. An n-gram is n consecutive words within one training document (never across
two). For each item it reports the fraction of its n-grams found in the training text, and flags the item when that
fraction exceeds ``threshold`` (default 0: any collision, GPT-3's "dirty"). An item shorter than n words has no
n-gram; here (a choice of this library: GPT-3 ignored examples under 8 words in its filtering) its whole word sequence
counts as its one gram, found if it occurs as consecutive words of a training document.

Word splitting on whitespace suits English; text without spaces (Chinese, code) needs another unit.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from minitfm.evaluation._validate import check_count, check_probability

__all__ = ["normalized_words", "word_ngrams", "Overlap", "ngram_overlap"]


def normalized_words(text: str) -> list[str]:
    """Lower-cased words with punctuation deleted: ``"The cat's mat."`` -> ``["the", "cats", "mat"]``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    kept = "".join(ch for ch in text.lower() if not unicodedata.category(ch).startswith("P"))
    return kept.split()


def word_ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    """The set of n consecutive words of ``words`` (empty when there are fewer than n)."""
    n = check_count(n, "n", minimum=1)
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Overlap:
    fractions: list[float]  # per item: share of its distinct n-grams found in the training text
    flagged: list[bool]  # per item: fraction > threshold
    n: int

    @property
    def flagged_indices(self) -> list[int]:
        return [i for i, f in enumerate(self.flagged) if f]


def _texts(value, name: str) -> list[str]:
    texts = [value] if isinstance(value, str) else list(value)
    if not texts:
        raise ValueError(f"{name} is empty: need at least one text")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return texts


def ngram_overlap(training_texts, items, *, n: int = 13, threshold: float = 0.0) -> Overlap:
    """Per-item n-gram overlap of ``items`` (list of str) with ``training_texts`` (a str or list of documents)."""
    n = check_count(n, "n", minimum=1)
    threshold = check_probability(threshold, "threshold")
    documents = [normalized_words(t) for t in _texts(training_texts, "training_texts")]
    item_words = [normalized_words(t) for t in _texts(items, "items")]
    wanted_lengths = {n} | {len(w) for w in item_words if 0 < len(w) < n}  # short items are matched whole
    seen = set()
    for words in documents:
        for length in wanted_lengths:
            seen |= word_ngrams(words, length)
    fractions = []
    for words in item_words:
        grams = word_ngrams(words, min(n, len(words))) if words else set()
        fractions.append(len(grams & seen) / len(grams) if grams else 0.0)
    return Overlap(fractions, [f > threshold for f in fractions], n)
