"""Paired comparisons against scipy.stats: McNemar as a binomial test on the discordant items, its chi-square form,
and the paired bootstrap against scipy.stats.bootstrap(paired=True)."""
import math

import numpy as np
import pytest
from scipy import stats

from minitfm.evaluation import (discordant_counts, mcnemar_chi2, mcnemar_exact, paired_bootstrap, wilson_interval)


def correlated_models(n_items, p_a, p_b, agreement, seed):
    """0/1 correctness of two models on the same items: with probability ``agreement`` B copies A's outcome."""
    rng = np.random.default_rng(seed)
    a = rng.random(n_items) < p_a
    own_b = rng.random(n_items) < p_b
    b = np.where(rng.random(n_items) < agreement, a, own_b)
    return a, b


def test_mcnemar_exact_equals_scipy_binomtest_on_the_discordant_counts():
    for seed in range(60):
        a, b = correlated_models(int(np.random.default_rng(seed).integers(5, 400)), 0.6, 0.5, 0.7, seed)
        result = mcnemar_exact(a, b)
        assert (result.only_a, result.only_b) == (int(np.sum(a & ~b)), int(np.sum(~a & b)))
        if result.only_a + result.only_b:
            expected = stats.binomtest(result.only_a, result.only_a + result.only_b, 0.5).pvalue
            assert result.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300), seed
    big = mcnemar_exact([1] * 900 + [0] * 700, [0] * 900 + [1] * 700)  # 1600 discordant items: no overflow
    assert big.p_value == pytest.approx(stats.binomtest(900, 1600, 0.5).pvalue, rel=1e-9)


def test_mcnemar_chi2_equals_the_hand_formula_and_scipy_chi2():
    for b, c in [(10, 3), (3, 10), (25, 25), (1, 0), (40, 22), (7, 8)]:
        a_correct = [1] * b + [0] * c + [1] * 5  # 5 concordant items, ignored by the test
        b_correct = [0] * b + [1] * c + [1] * 5
        for continuity in (True, False):
            result = mcnemar_chi2(a_correct, b_correct, continuity=continuity)
            gap = max(abs(b - c) - 1, 0) if continuity else abs(b - c)
            assert result.statistic == pytest.approx(gap ** 2 / (b + c), rel=1e-14)
            assert result.p_value == pytest.approx(stats.chi2.sf(gap ** 2 / (b + c), df=1), rel=1e-9)


def test_mcnemar_without_discordant_items_has_no_evidence():
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0
    assert mcnemar_chi2([1, 0, 1], [1, 0, 1]).p_value == 1.0


# Tolerance for the bootstrap interval: as in test_evaluation_intervals, 0.15 bootstrap-SDs at B = 20 000 resamples,
# over five Monte Carlo standard errors of the difference between two independent runs.
def test_paired_bootstrap_interval_agrees_with_scipy_paired_bootstrap():
    a, b = correlated_models(300, 0.62, 0.55, 0.8, seed=4)
    ours = paired_bootstrap(a, b, n_resamples=20_000, rng=1)
    theirs = stats.bootstrap((a.astype(float), b.astype(float)), lambda x, y, axis: np.mean(x - y, axis=axis),
                             paired=True, n_resamples=20_000, method="percentile",
                             rng=np.random.default_rng(2)).confidence_interval
    spread = ours.resampled.std()
    assert ours.difference == pytest.approx(a.mean() - b.mean())
    assert abs(ours.low - theirs.low) < 0.15 * spread and abs(ours.high - theirs.high) < 0.15 * spread


def test_paired_bootstrap_p_value_is_calibrated_under_the_null():
    # Two models with the same expected score on every item: a 5% test should reject about 5% of the time.
    rng = np.random.default_rng(5)
    rejections = 0
    trials = 300
    for trial in range(trials):
        difficulty = rng.normal(size=120)
        a = difficulty + rng.normal(scale=0.5, size=120)
        b = difficulty + rng.normal(scale=0.5, size=120)
        rejections += paired_bootstrap(a, b, n_resamples=999, rng=trial).p_value <= 0.05
    # binomial sd of the rate at 300 trials is 0.013: [0.015, 0.10] allows about 2.7 sd below and 3.8 above
    assert 0.015 <= rejections / trials <= 0.10, rejections
    # A bootstrap p-value is never 0: (hits + 1) / (B + 1), here 1 / 100 when no resample is as extreme
    assert paired_bootstrap(np.ones(50), np.zeros(50), n_resamples=99, rng=0).p_value == pytest.approx(0.01)


def test_pairing_decides_where_two_overlapping_unpaired_intervals_cannot():
    # 400 items: 230 both right, 130 both wrong, 28 only A right, 12 only B right (accuracy 0.645 vs 0.605)
    a = np.array([1] * 230 + [0] * 130 + [1] * 28 + [0] * 12, dtype=bool)
    b = np.array([1] * 230 + [0] * 130 + [0] * 28 + [1] * 12, dtype=bool)
    low_a, high_a = wilson_interval(int(a.sum()), a.size)
    low_b, high_b = wilson_interval(int(b.sum()), b.size)
    assert low_a < high_b  # the two 95% intervals overlap...
    paired = paired_bootstrap(a, b, rng=0)
    assert paired.low > 0 and paired.p_value < 0.025  # ...but the paired interval of the difference excludes 0
    assert mcnemar_exact(a, b).p_value < 0.05


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="correct_a and correct_b must score the same items: got 3 and 2"):
        mcnemar_exact([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="correct_a must hold 0/1"):
        mcnemar_exact([1, 2, 0], [1, 0, 0])
    with pytest.raises(ValueError, match="correct_b is empty"):
        discordant_counts([1], [])
    with pytest.raises(TypeError, match="continuity must be a bool"):
        mcnemar_chi2([1], [0], continuity=1)
    with pytest.raises(ValueError, match="scores_a and scores_b must score the same items: got 2 and 3"):
        paired_bootstrap([1.0, 2.0], [1.0, 2.0, 3.0], rng=0)
    with pytest.raises(ValueError, match="scores_b must be finite"):
        paired_bootstrap([1.0, 2.0], [1.0, math.nan], rng=0)
    with pytest.raises(TypeError, match="rng must be a numpy Generator or an int seed"):
        paired_bootstrap([1.0, 2.0], [1.0, 2.0], rng=0.5)
    with pytest.raises(TypeError, match="scores_a must hold numbers"):
        paired_bootstrap(["a", "b"], [1.0, 2.0], rng=0)


def test_the_paired_bootstrap_draws_in_blocks_the_same_numbers_in_little_memory():
    """Review 2026-12b L4, as for bootstrap_distribution: peak under 40 MB where one draw held 160 MB, same means."""
    import tracemalloc

    rng = np.random.default_rng(2)
    a, b = rng.random(5000), rng.random(5000)
    tracemalloc.start()
    try:
        got = paired_bootstrap(a, b, n_resamples=4000, rng=7)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6, f"peak {peak / 1e6:.0f} MB"
    d = a - b
    np.testing.assert_array_equal(got.resampled, d[np.random.default_rng(7).integers(0, d.size, (4000, d.size))].mean(axis=1))
