"""Exact match, and pass@k with the unbiased estimator of Chen et al. (2021).

**Exact match** scores a generated answer 1 if it equals the reference string, else 0 (lm-eval's ``exact_match``,
which is Hugging Face ``evaluate``'s rule, with its optional case folding; ``strip`` is an extra of this library).

**pass@k** asks: if the model may try k times, how likely is at least one try correct? Drawing only k samples per
problem gives a noisy 0/1. Chen et al. (2021), "Evaluating Large Language Models Trained on Code" (Codex, section
2.1), draw n >= k samples, count the c correct ones, and estimate, per problem,

    pass@k = 1 - C(n - c, k) / C(n, k)

the probability that k samples drawn *without replacement* from the n include at least one of the c correct ones.
Its expectation over the random draws equals the true pass@k = 1 - (1 - p)^k exactly (p = the problem's success rate),
so it is unbiased. The binomials overflow floating point for large n, so their numpy form (the paper's Figure 3)
uses the product ``1 - prod_{i = n-c+1}^{n} (1 - k / i)``, which is the same number.

The plug-in estimate 1 - (1 - c/n)^k looks natural but is biased low: 1 - (1 - x)^k is concave, so by Jensen's
inequality its expectation is below the true value (``naive_pass_at_k``, kept for that demonstration).
"""
from __future__ import annotations

import numpy as np

from minitfm.evaluation._validate import check_count, check_same_length

__all__ = ["exact_match", "pass_at_k", "mean_pass_at_k", "naive_pass_at_k"]


def exact_match(predictions, references, *, ignore_case: bool = False, strip: bool = False) -> np.ndarray:
    """Per-item 1.0/0.0, shape (N,): ``predictions[i] == references[i]`` after optional ``str.strip`` and
    ``str.lower``. Keep the per-item array: its mean is the score and its spread gives the interval."""
    for name, seq in (("predictions", predictions), ("references", references)):
        if isinstance(seq, str):
            raise TypeError(f"{name} must be a list of strings, got one str {seq[:30]!r}")
        if len(seq) == 0:
            raise ValueError(f"{name} is empty: need at least one item")
        bad = [type(x).__name__ for x in seq if not isinstance(x, str)]
        if bad:
            raise TypeError(f"{name} must hold strings, got {bad[0]}")
    check_same_length(predictions, references, "predictions", "references")

    def norm(s: str) -> str:
        s = s.strip() if strip else s
        return s.lower() if ignore_case else s

    return np.array([float(norm(p) == norm(r)) for p, r in zip(predictions, references)])


def _check_nck(n, c, k) -> tuple[int, int, int]:
    n = check_count(n, "n (samples drawn)", minimum=1)
    c = check_count(c, "c (correct samples)")
    k = check_count(k, "k", minimum=1)
    if c > n:
        raise ValueError(f"c (correct samples) cannot exceed n (samples drawn): got c={c}, n={n}")
    if k > n:
        raise ValueError(f"k must be <= n: pass@{k} needs at least {k} samples per problem, got n={n}")
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased pass@k of one problem: ``1 - C(n - c, k) / C(n, k)``, in their stable product form."""
    n, c, k = _check_nck(n, c, k)
    if n - c < k:  # every k-subset holds a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(n, c, k: int) -> float:
    """pass@k of a benchmark: the mean of ``pass_at_k(n[i], c[i], k)`` over problems (n may differ per problem)."""
    if np.ndim(n) == 0:
        n = [n] * len(c)
    check_same_length(n, c, "n", "c")
    if len(c) == 0:
        raise ValueError("c is empty: need at least one problem")
    return float(np.mean([pass_at_k(ni, ci, k) for ni, ci in zip(n, c)]))


def naive_pass_at_k(n: int, c: int, k: int) -> float:
    """The biased plug-in estimate ``1 - (1 - c/n)^k`` (for comparison only: it underestimates pass@k)."""
    n, c, k = _check_nck(n, c, k)
    return 1.0 - (1.0 - c / n) ** k
