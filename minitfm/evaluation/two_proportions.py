"""Two accuracies on *different* items: the two-proportion z-test.

When model A is scored on n_a items and model B on n_b other items (two leaderboards, two held-out sets), the
items cannot be paired and the differences of ``paired`` do not exist. The test of "equally accurate" is then the
pooled two-proportion z-test (Agresti 2013, "Categorical Data Analysis"): with p = (k_a + k_b) /
(n_a + n_b),

    z = (k_a/n_a - k_b/n_b) / sqrt(p (1 - p) (1/n_a + 1/n_b)),   two-sided p-value = erfc(|z| / sqrt(2))

z^2 is Pearson's chi-square of the 2 x 2 table without continuity correction
(``scipy.stats.chi2_contingency(table, correction=False)``). It is the right tool for different items; for the
same items the paired tests are far stronger. Two 95% intervals that do not overlap correspond to p of about 0.006
for equal standard errors (Schenker and Gentleman 2001, "On Judging the Significance of Differences by Examining
the Overlap Between Confidence Intervals"), so overlap is not a test even for independent samples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from minitfm.evaluation._validate import check_count

__all__ = ["TwoProportions", "two_proportion_test"]


@dataclass(frozen=True)
class TwoProportions:
    """``difference`` = k_a/n_a - k_b/n_b, its pooled ``z`` and the two-sided ``p_value``."""
    difference: float
    z: float
    p_value: float


def two_proportion_test(successes_a: int, n_a: int, successes_b: int, n_b: int) -> TwoProportions:
    """The pooled two-proportion z-test of k_a out of n_a against k_b out of n_b (different items)."""
    n_a, n_b = check_count(n_a, "n_a", minimum=1), check_count(n_b, "n_b", minimum=1)
    k_a, k_b = check_count(successes_a, "successes_a"), check_count(successes_b, "successes_b")
    if k_a > n_a or k_b > n_b:
        raise ValueError(f"successes cannot exceed items: got {k_a} of {n_a} and {k_b} of {n_b}")
    difference = k_a / n_a - k_b / n_b
    pooled = (k_a + k_b) / (n_a + n_b)
    variance = pooled * (1 - pooled) * (1 / n_a + 1 / n_b)
    if variance == 0:  # both all right or all wrong: no evidence of a difference
        return TwoProportions(difference, 0.0, 1.0)
    z = difference / math.sqrt(variance)
    return TwoProportions(difference, z, math.erfc(abs(z) / math.sqrt(2)))
