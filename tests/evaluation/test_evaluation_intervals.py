"""Wilson against scipy.stats.binomtest; the bootstrap against scipy.stats.bootstrap within Monte Carlo error."""
import numpy as np
import pytest
from scipy import stats

from minitfm.evaluation import bootstrap_distribution, bootstrap_interval, wilson_interval


def test_wilson_equals_scipy_binomtest():
    for n in (1, 2, 7, 30, 200, 1000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            for confidence in (0.8, 0.95, 0.99):
                expected = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
                low, high = wilson_interval(k, n, confidence=confidence)
                assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-12), (k, n, confidence)


def test_wilson_stays_in_0_1_and_is_not_a_point_at_the_extremes():
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and 0.1 < high < 0.2  # the Wald interval would be the point [0, 0]
    low, high = wilson_interval(20, 20)
    assert high == 1.0 and 0.8 < low < 0.9


# Monte Carlo tolerance. Each side of a 95% interval is a 2.5% quantile of B resampled values; its standard error is
# about sqrt(q (1 - q) / B) / density ~ 0.019 bootstrap-SDs at B = 20 000, so the difference of two independent
# estimates (ours, scipy's) has a standard error of about 0.027 bootstrap-SDs. We allow 0.15 bootstrap-SDs: over
# five standard errors, so a correct implementation fails with negligible probability, while a wrong quantile
# level (say 5% instead of 2.5%) moves an end by about 0.3 bootstrap-SDs and fails.
B = 20_000
TOLERANCE_IN_SDS = 0.15


def skewed_sample():
    return np.random.default_rng(11).exponential(1.0, size=60)  # skewed, so percentile and BCa differ


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("statistic", [np.mean, np.median, np.std], ids=["mean", "median", "std"])
def test_bootstrap_interval_agrees_with_scipy_within_monte_carlo_error(method, statistic):
    x = skewed_sample()
    ours = bootstrap_interval(x, statistic, n_resamples=B, method=method, rng=1)
    theirs = stats.bootstrap((x,), lambda s, axis: statistic(s, axis=axis), n_resamples=B, method=method,
                             rng=np.random.default_rng(2)).confidence_interval
    spread = bootstrap_distribution(x, statistic, n_resamples=2000, rng=3).std()
    assert abs(ours[0] - theirs.low) < TOLERANCE_IN_SDS * spread, (ours, theirs)
    assert abs(ours[1] - theirs.high) < TOLERANCE_IN_SDS * spread, (ours, theirs)


def test_bca_quantile_levels_equal_scipys_on_the_same_resamples():
    """No Monte Carlo error here: scipy's (private) BCa step gets our resampled values and must return our levels."""
    try:
        from scipy.stats._resampling import _bca_interval
    except ImportError:  # a private helper: if scipy renames it, the Monte Carlo comparison above still runs
        pytest.skip("scipy.stats._resampling._bca_interval is not available in this scipy")
    from minitfm.evaluation.intervals import _bca_levels

    x = skewed_sample()
    for statistic in (np.mean, np.median, np.std):
        theta_b = bootstrap_distribution(x, statistic, n_resamples=5000, rng=1)
        low, high, _ = _bca_interval((x,), lambda s, axis: statistic(s, axis=axis), axis=-1, alpha=0.025,
                                     theta_hat_b=theta_b, batch=None, xp=np)
        assert _bca_levels(x, statistic, theta_b, 0.025) == pytest.approx((float(low), float(high)), abs=1e-12)


def test_bca_differs_from_percentile_on_skewed_data_as_scipy_does():
    x = skewed_sample()
    percentile = bootstrap_interval(x, n_resamples=B, rng=1)
    bca = bootstrap_interval(x, n_resamples=B, method="bca", rng=1)
    spread = bootstrap_distribution(x, n_resamples=2000, rng=3).std()
    assert bca[0] - percentile[0] > 0.03 * spread and bca[1] - percentile[1] > 0.03 * spread  # shifted right


def test_seeded_bootstrap_repeats_and_mean_fast_path_equals_the_loop():
    x = skewed_sample()
    assert bootstrap_interval(x, rng=5) == bootstrap_interval(x, rng=np.random.default_rng(5))
    np.testing.assert_allclose(bootstrap_distribution(x, np.mean, n_resamples=50, rng=7),
                               bootstrap_distribution(x, lambda s: float(np.mean(s)), n_resamples=50, rng=7))


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="successes cannot exceed n: got 5 of 4"):
        wilson_interval(5, 4)
    with pytest.raises(TypeError, match="successes must be an int count, got bool"):
        wilson_interval(True, 4)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="confidence must be strictly between 0 and 1, got 95"):
        wilson_interval(1, 4, confidence=95)
    with pytest.raises(TypeError, match="rng must be a numpy Generator or an int seed"):
        bootstrap_interval([1.0, 2.0], rng=None)
    with pytest.raises(ValueError, match="data is empty"):
        bootstrap_interval([], rng=0)
    with pytest.raises(ValueError, match=r"data must be 1-D .one score per item., got shape \(2, 2\)"):
        bootstrap_interval([[1, 2], [3, 4]], rng=0)
    with pytest.raises(ValueError, match="method must be 'percentile' or 'bca'"):
        bootstrap_interval([1.0, 2.0], method="basic", rng=0)
    data = np.arange(10.0)
    with pytest.raises(ValueError, match="BCa is undefined here"):  # every resample is above the observed value
        bootstrap_interval(data, lambda s: float(not np.array_equal(s, data)), method="bca", rng=0)
    with pytest.raises(TypeError, match="statistic must be a function"):
        bootstrap_interval([1.0, 2.0], "mean", rng=0)


def test_the_bootstrap_draws_in_blocks_the_same_numbers_in_little_memory():
    """Review 2026-12b L4: B x N indices at once is 1.1 GB at MMLU's size; here 4000 x 5000 would be 160 MB of
    indices (and as much of values). Drawn in blocks, the peak stays under 40 MB and the numbers are those of
    one (B, N) draw."""
    import tracemalloc

    x = np.random.default_rng(1).random(5000)
    tracemalloc.start()
    try:
        got = bootstrap_distribution(x, n_resamples=4000, rng=7)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6, f"peak {peak / 1e6:.0f} MB"
    want = x[np.random.default_rng(7).integers(0, x.size, size=(4000, x.size))].mean(axis=1)
    np.testing.assert_array_equal(got, want)
    median = bootstrap_distribution(x[:50], np.median, n_resamples=30, rng=7)
    np.testing.assert_array_equal(median, np.median(x[:50][np.random.default_rng(7).integers(0, 50, (30, 50))], axis=1))
