"""Comparing two models on the *same* items: the paired bootstrap and McNemar's test.

When models A and B answer the same N items, most of the item-to-item variation (easy items, hard items) is shared,
and it cancels in the per-item difference d_i = score_A(i) - score_B(i). Tests on the differences are therefore
far more sensitive than comparing two separate intervals, which count that shared variation twice.

**Paired bootstrap** (Efron and Tibshirani 1993; Koehn 2004, "Statistical Significance Tests for Machine
Translation Evaluation"; Berg-Kirkpatrick, Burkett and Klein 2012): resample the *items* with replacement, keeping
each item's two scores together, and recompute mean(d). The percentile interval of those means is the interval of
the difference. For the one-sided p-value of "A is better than B" the bootstrap distribution is shifted to mean 0
(the null hypothesis of no difference) and p = the share of shifted means at least as large as the observed one,
i.e. of resampled means >= 2 * observed (the test of Berg-Kirkpatrick et al. 2012, "An Empirical Investigation of
Statistical Significance in NLP"), counted as (hits + 1)/(B + 1) so it is never exactly 0 (Davison and Hinkley
1997, "Bootstrap Methods and their Application", chapter 4).

**McNemar's test** (McNemar 1947) for 0/1 correctness: only the discordant items matter, b = items A gets right and
B wrong, c = the reverse. Under "equally accurate" each discordant item is a fair coin, so b ~ Binomial(b + c, 1/2):
the exact two-sided p-value is min(1, 2 * P(X <= min(b, c))), which equals
``scipy.stats.binomtest(b, b + c, 0.5).pvalue``. The large-sample version compares (|b - c| - 1)^2 / (b + c)
(Edwards' continuity correction, with |b - c| - 1 floored at 0; without it, (b - c)^2 / (b + c)) to a chi-square
with one degree of freedom, whose upper tail is erfc(sqrt(x / 2)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from minitfm.evaluation._validate import as_generator, check_confidence, check_correct, check_count, check_same_length, check_scores
from minitfm.evaluation.intervals import resample_indices

__all__ = ["PairedBootstrap", "paired_bootstrap", "McNemar", "discordant_counts", "mcnemar_exact", "mcnemar_chi2"]


@dataclass(frozen=True)
class PairedBootstrap:
    difference: float  # mean(scores_a - scores_b) on the items as given
    low: float  # percentile interval of the difference
    high: float
    p_value: float  # one-sided, for "A scores higher than B"
    resampled: np.ndarray  # (B,) mean differences of the resamples, for plots


def paired_bootstrap(scores_a, scores_b, *, confidence: float = 0.95, n_resamples: int = 9999,
                     rng) -> PairedBootstrap:
    """Paired bootstrap of mean(scores_a - scores_b) over the same items (0/1 correctness or any per-item score)."""
    a, b = check_scores(scores_a, "scores_a"), check_scores(scores_b, "scores_b")
    check_same_length(a, b, "scores_a", "scores_b")
    alpha = (1 - check_confidence(confidence)) / 2
    n_b = check_count(n_resamples, "n_resamples", minimum=1)
    d = a - b  # (N,) per-item differences: pairing kept
    means = np.concatenate([d[indices].mean(axis=1)  # (B,), drawn in blocks of (rows, N) indices
                            for indices in resample_indices(as_generator(rng), d.size, n_b)])
    observed = float(d.mean())
    low, high = np.quantile(means, (alpha, 1 - alpha))
    hits = int(np.count_nonzero(means - observed >= observed))  # shifted to the null, at least as extreme
    return PairedBootstrap(observed, float(low), float(high), float((hits + 1) / (n_b + 1)), means)


@dataclass(frozen=True)
class McNemar:
    only_a: int  # b: items A gets right and B gets wrong
    only_b: int  # c: items B gets right and A gets wrong
    statistic: float  # exact test: min(b, c); chi-square test: the chi-square statistic
    p_value: float  # two-sided


def discordant_counts(correct_a, correct_b) -> tuple[int, int]:
    """(b, c): items only A gets right, items only B gets right, from two 0/1 (or bool) sequences."""
    a, b = check_correct(correct_a, "correct_a"), check_correct(correct_b, "correct_b")
    check_same_length(a, b, "correct_a", "correct_b")
    return int(np.count_nonzero(a & ~b)), int(np.count_nonzero(~a & b))


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), in exact integer arithmetic (no overflow, no rounding until the end)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def mcnemar_exact(correct_a, correct_b) -> McNemar:
    """McNemar's exact test: two-sided binomial test of b against Binomial(b + c, 1/2)."""
    only_a, only_b = discordant_counts(correct_a, correct_b)
    n = only_a + only_b
    if n == 0:
        return McNemar(0, 0, 0.0, 1.0)  # no discordant item: no evidence either way
    smaller = min(only_a, only_b)
    return McNemar(only_a, only_b, float(smaller), min(1.0, 2 * _binomial_half_cdf(smaller, n)))


def mcnemar_chi2(correct_a, correct_b, *, continuity: bool = True) -> McNemar:
    """McNemar's chi-square test, (|b - c| - 1)^2 / (b + c) with ``continuity`` (else (b - c)^2 / (b + c)), df = 1."""
    if not isinstance(continuity, bool):
        raise TypeError(f"continuity must be a bool, got {type(continuity).__name__}")
    only_a, only_b = discordant_counts(correct_a, correct_b)
    n = only_a + only_b
    if n == 0:
        return McNemar(0, 0, 0.0, 1.0)
    gap = max(abs(only_a - only_b) - (1 if continuity else 0), 0)
    statistic = gap * gap / n
    return McNemar(only_a, only_b, statistic, math.erfc(math.sqrt(statistic / 2)))
