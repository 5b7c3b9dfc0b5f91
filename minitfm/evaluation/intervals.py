"""Confidence intervals: Wilson's for a proportion (an accuracy), the bootstrap for any statistic.

**Wilson score interval** (Wilson 1927; recommended over the textbook p +- z sqrt(p(1-p)/n) by Brown, Cai and
DasGupta 2001, "Interval Estimation for a Binomial Proportion"). With k successes in n trials, p = k/n and
z = the standard normal quantile at 1 - (1 - confidence)/2, it is the set of proportions not rejected by the
score test:

    centre = (p + z^2 / (2n)) / (1 + z^2/n),   half-width = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2))

Unlike the textbook (Wald) interval it never leaves [0, 1] and does not collapse to a point at k = 0 or k = n.
It equals ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``.

**Bootstrap** (Efron and Tibshirani 1993, "An Introduction to the Bootstrap"): resample the n items with
replacement B times, recompute the statistic on each resample, and read the interval off that distribution.
``"percentile"`` takes its (1-confidence)/2 and 1-(1-confidence)/2 quantiles. ``"bca"`` (bias-corrected and
accelerated, their chapter 14) shifts those two quantile levels by a bias term z0 (how far the resampled values
sit below the observed statistic) and an acceleration a (the skewness of jackknife values), which corrects the
percentile interval for skewed statistics. Both follow ``scipy.stats.bootstrap``'s definitions.
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from minitfm.evaluation._validate import as_generator, check_confidence, check_count, check_scores

__all__ = ["wilson_interval", "bootstrap_distribution", "bootstrap_interval"]

_NORMAL = NormalDist()


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (low, high) for ``successes`` out of ``n`` (two-sided, no continuity correction)."""
    k = check_count(successes, "successes")
    n = check_count(n, "n", minimum=1)
    if k > n:
        raise ValueError(f"successes cannot exceed n: got {k} of {n}")
    z = _NORMAL.inv_cdf(1 - (1 - check_confidence(confidence)) / 2)
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _check_statistic(statistic):
    if not callable(statistic):
        raise TypeError(f"statistic must be a function of a 1-D array returning a number, got {statistic!r}")


CHUNK_DRAWS = 1 << 20  # item indices drawn at once (8 MB of int64), whatever the number of resamples


def resample_indices(generator: np.random.Generator, n_items: int, n_resamples: int):
    """The (B, N) item indices of ``n_resamples`` resamples, yielded in blocks of rows of about ``CHUNK_DRAWS``
    indices, in order: the same numbers as one ``integers(0, N, size=(B, N))`` draw, without holding B x N
    indices at once (MMLU's N = 14,042 with B = 9,999 would be 1.1 GB, and as much again for the values)."""
    rows = max(1, CHUNK_DRAWS // n_items)
    for start in range(0, n_resamples, rows):
        yield generator.integers(0, n_items, size=(min(rows, n_resamples - start), n_items))  # (rows, N)


def bootstrap_distribution(data, statistic=np.mean, *, n_resamples: int = 9999, rng) -> np.ndarray:
    """The statistic on ``n_resamples`` resamples of ``data`` (items drawn with replacement), shape (B,).

    ``statistic(sample_1d) -> number``; ``rng`` a numpy Generator or an int seed. The resamples are drawn in
    blocks (:func:`resample_indices`), so memory stays small for any B and N."""
    x = check_scores(data, "data")
    _check_statistic(statistic)
    b = check_count(n_resamples, "n_resamples", minimum=1)
    out = []
    for indices in resample_indices(as_generator(rng), x.size, b):  # (rows, N): item indices per resample
        if statistic is np.mean:  # vectorised fast path, same numbers
            out.append(x[indices].mean(axis=1))
        else:
            out.append(np.array([float(statistic(x[row])) for row in indices]))
    return np.concatenate(out)


def _bca_levels(x: np.ndarray, statistic, theta_b: np.ndarray, alpha: float) -> tuple[float, float]:
    theta = float(statistic(x))
    # z0: the normal quantile of the share of resampled values below the observed one (ties count half)
    share = (np.count_nonzero(theta_b < theta) + np.count_nonzero(theta_b <= theta)) / (2 * theta_b.size)
    if share in (0.0, 1.0):
        raise ValueError("BCa is undefined here: every resampled statistic lies on one side of the observed one "
                         "(a degenerate sample, e.g. all items equal); use method='percentile'")
    z0 = _NORMAL.inv_cdf(share)
    jack = np.array([float(statistic(np.delete(x, i))) for i in range(x.size)])  # (N,) leave-one-out values
    u = (x.size - 1) * (jack.mean() - jack)
    denominator = np.sum(u ** 2) ** 1.5
    a = 0.0 if denominator == 0 else float(np.sum(u ** 3) / (6 * denominator))

    def level(z_alpha: float) -> float:
        return _NORMAL.cdf(z0 + (z0 + z_alpha) / (1 - a * (z0 + z_alpha)))

    z = _NORMAL.inv_cdf(alpha)
    return level(z), level(-z)


def bootstrap_interval(data, statistic=np.mean, *, confidence: float = 0.95, n_resamples: int = 9999,
                       method: str = "percentile", rng) -> tuple[float, float]:
    """Bootstrap confidence interval (low, high) of ``statistic(data)``: ``method`` "percentile" or "bca"."""
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")
    alpha = (1 - check_confidence(confidence)) / 2
    theta_b = bootstrap_distribution(data, statistic, n_resamples=n_resamples, rng=rng)
    levels = (alpha, 1 - alpha)
    if method == "bca":
        levels = _bca_levels(check_scores(data, "data"), statistic, theta_b, alpha)
    low, high = np.quantile(theta_b, levels)
    return float(low), float(high)
