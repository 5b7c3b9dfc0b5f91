"""Numbers that describe generated text: diversity and repetition.

Chapter 9 compares decoding strategies with these rather than by eye (validity, the third number, is
:func:`minitfm.lm.corpus.validity`). Texts are strings of space-separated tokens.
"""
from __future__ import annotations

from typing import Sequence

from minitfm._checks import check_positive_int


def ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """All n-grams of ``words`` in order: ngrams("a b c".split(), 2) = [("a", "b"), ("b", "c")]."""
    check_positive_int(n, "n")
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Diversity across texts: distinct n-grams / all n-grams over the whole set (Li et al. 2016).

    1.0 means no n-gram occurs twice anywhere; low values mean the outputs keep saying the same things.
    """
    grams = [g for t in texts for g in ngrams(t.split(), n)]
    if not grams:
        raise ValueError(f"distinct_n needs texts with at least {n} tokens, got none")
    return len(set(grams)) / len(grams)


def repetition_rate(texts: Sequence[str], n: int = 3) -> float:
    """Repetition within texts: the share of n-grams that already occurred earlier *in the same text*.

    A model stuck in a loop ("near the dog near the dog near the dog") scores close to 1; text that never
    repeats itself scores 0. Averaged over all n-grams of all texts.
    """
    repeated = total = 0
    for text in texts:
        seen = set()
        for g in ngrams(text.split(), n):
            repeated += g in seen
            seen.add(g)
            total += 1
    if total == 0:
        raise ValueError(f"repetition_rate needs texts with at least {n} tokens, got none")
    return repeated / total
