"""How many test items a comparison needs: sample sizes for a difference in accuracy (normal approximation).

Before running an evaluation, fix the smallest difference worth detecting, the false-alarm rate alpha and the
power (the chance of detecting a real difference of that size), and the formula says how many items it takes.
With z_a = the standard normal quantile at 1 - alpha/2 (two-sided; 1 - alpha one-sided) and z_b at the power:

**Two independent samples** (each model on its own N items; Fleiss, Levin and Paik 2003, "Statistical Methods for
Rates and Proportions", chapter 4, the formula before its continuity correction): with accuracies p1 and p2,
q = 1 - p and pbar = (p1 + p2)/2,

    N per model = (z_a sqrt(2 pbar (1 - pbar)) + z_b sqrt(p1 q1 + p2 q2))^2 / (p1 - p2)^2

**Paired** (both models on the same N items, analysed with McNemar's test; Connor 1987, "Sample size for testing
differences in proportions for the paired-sample design", Biometrics 43): with the discordance rate
psi = P(exactly one model is right) and the difference delta = p1 - p2 = P(only A right) - P(only B right),

    N = (z_a sqrt(psi) + z_b sqrt(psi - delta^2))^2 / delta^2

Pairing helps when the models agree on most items: psi small means few informative items are wasted. Both results
are rounded up; the approximation is rougher for small N or accuracies near 0 or 1 (check by simulation).
"""
from __future__ import annotations

import math
from statistics import NormalDist

from minitfm.evaluation._validate import check_probability, check_real

__all__ = ["items_for_two_proportions", "items_for_paired"]

_NORMAL = NormalDist()


def _quantiles(alpha: float, power: float, two_sided: bool) -> tuple[float, float]:
    alpha = check_probability(alpha, "alpha", open_interval=True)
    power = check_probability(power, "power", open_interval=True)
    if not isinstance(two_sided, bool):
        raise TypeError(f"two_sided must be a bool, got {type(two_sided).__name__}")
    return _NORMAL.inv_cdf(1 - alpha / (2 if two_sided else 1)), _NORMAL.inv_cdf(power)


def items_for_two_proportions(p1: float, p2: float, *, alpha: float = 0.05, power: float = 0.8,
                              two_sided: bool = True) -> int:
    """Items per model to detect accuracy ``p1`` vs ``p2`` with independent samples (two-proportion z-test)."""
    p1, p2 = check_probability(p1, "p1"), check_probability(p2, "p2")
    if p1 == p2:
        raise ValueError(f"p1 and p2 must differ (no sample size detects a zero difference), got {p1} and {p2}")
    z_a, z_b = _quantiles(alpha, power, two_sided)
    pbar = (p1 + p2) / 2
    root = z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    return math.ceil(root * root / (p1 - p2) ** 2)


def items_for_paired(discordance: float, difference: float, *, alpha: float = 0.05, power: float = 0.8,
                     two_sided: bool = True) -> int:
    """Items to detect accuracy ``difference`` = p_A - p_B on shared items (McNemar), given the ``discordance``
    rate P(exactly one model right); needs 0 < |difference| <= discordance."""
    psi = check_probability(discordance, "discordance")
    delta = abs(check_real(difference, "difference"))
    if not 0 < delta <= psi:
        raise ValueError(f"need 0 < |difference| <= discordance (the difference is made of discordant items), "
                         f"got difference={difference}, discordance={psi}")
    z_a, z_b = _quantiles(alpha, power, two_sided)
    root = z_a * math.sqrt(psi) + z_b * math.sqrt(psi - delta * delta)
    return math.ceil(root * root / (delta * delta))
