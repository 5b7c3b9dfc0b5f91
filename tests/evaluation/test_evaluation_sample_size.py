"""Sample sizes against the textbook formulas with scipy's normal quantiles, and a seeded simulation of the power."""
import math

import numpy as np
import pytest
from scipy import stats

from minitfm.evaluation import items_for_paired, items_for_two_proportions


def textbook_two_proportions(p1, p2, alpha, power, two_sided=True):
    z_a = stats.norm.ppf(1 - alpha / 2 if two_sided else 1 - alpha)
    z_b = stats.norm.ppf(power)
    pbar = (p1 + p2) / 2
    return math.ceil((z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2
                     / (p1 - p2) ** 2)


def textbook_paired(psi, delta, alpha, power, two_sided=True):
    z_a = stats.norm.ppf(1 - alpha / 2 if two_sided else 1 - alpha)
    z_b = stats.norm.ppf(power)
    return math.ceil((z_a * math.sqrt(psi) + z_b * math.sqrt(psi - delta ** 2)) ** 2 / delta ** 2)


def test_formulas_equal_the_textbook_with_scipy_quantiles():
    for p1, p2 in [(0.5, 0.6), (0.7, 0.6), (0.9, 0.95), (0.25, 0.3), (0.01, 0.05)]:
        for alpha, power in [(0.05, 0.8), (0.01, 0.9), (0.1, 0.5)]:
            for two_sided in (True, False):
                assert items_for_two_proportions(p1, p2, alpha=alpha, power=power, two_sided=two_sided) == \
                    textbook_two_proportions(p1, p2, alpha, power, two_sided)
    for psi, delta in [(0.2, 0.05), (0.1, -0.03), (0.4, 0.1), (0.05, 0.05)]:
        for alpha, power in [(0.05, 0.8), (0.01, 0.9)]:
            assert items_for_paired(psi, delta, alpha=alpha, power=power) == textbook_paired(psi, abs(delta), alpha,
                                                                                             power)


def test_a_known_value_and_the_gain_from_pairing():
    # 60% vs 70%, alpha 0.05 two-sided, power 0.8: the classic answer is 356 per group (Fleiss et al., no correction)
    assert items_for_two_proportions(0.6, 0.7) == 356
    # the same 10-point gap on shared items where the models disagree on 20% of them needs far fewer items
    assert items_for_paired(0.2, 0.1) < 356 / 2
    # with independent errors the discordance would be 0.6 * 0.3 + 0.4 * 0.7 = 0.46, and pairing gains little
    assert items_for_paired(0.46, 0.1) > 0.9 * 356


def test_simulated_power_is_near_the_target():
    # Rule: with the computed N, a seeded simulation of 4000 evaluations rejects at a rate within 0.035 of the
    # target power 0.8 (the binomial sd of the rate is 0.006; the rest allows for the normal approximation).
    rng = np.random.default_rng(0)
    trials, z = 4000, stats.norm.ppf(0.975)
    n = items_for_two_proportions(0.6, 0.7)
    x1, x2 = rng.binomial(n, 0.6, trials), rng.binomial(n, 0.7, trials)
    pooled = (x1 + x2) / (2 * n)
    z_stat = (x2 - x1) / n / np.sqrt(pooled * (1 - pooled) * 2 / n)  # the two-proportion z-test
    assert abs(np.mean(np.abs(z_stat) > z) - 0.8) < 0.035

    psi, delta = 0.2, 0.05
    n = items_for_paired(psi, delta)
    counts = rng.multinomial(n, [(psi + delta) / 2, (psi - delta) / 2, 1 - psi], size=trials)  # only A, only B, same
    b, c = counts[:, 0], counts[:, 1]
    z_stat = (b - c) / np.sqrt(np.maximum(b + c, 1))  # McNemar's test without continuity correction
    assert abs(np.mean(np.abs(z_stat) > z) - 0.8) < 0.035


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="p1 and p2 must differ"):
        items_for_two_proportions(0.5, 0.5)
    with pytest.raises(ValueError, match=r"p2 must be a probability in \[0, 1\], got 70"):
        items_for_two_proportions(0.6, 70)
    with pytest.raises(ValueError, match="power must be strictly between 0 and 1, got 1.0"):
        items_for_two_proportions(0.6, 0.7, power=1.0)
    with pytest.raises(TypeError, match="alpha must be a real number, got bool"):
        items_for_two_proportions(0.6, 0.7, alpha=True)
    with pytest.raises(ValueError, match=r"need 0 < \|difference\| <= discordance"):
        items_for_paired(0.1, 0.2)
    with pytest.raises(ValueError, match=r"need 0 < \|difference\| <= discordance"):
        items_for_paired(0.1, 0.0)
    with pytest.raises(TypeError, match="two_sided must be a bool"):
        items_for_paired(0.2, 0.1, two_sided="yes")
