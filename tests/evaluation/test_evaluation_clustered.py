"""Clustered standard errors against Miller's double sum, the regression sandwich, and a simulation."""
import math

import numpy as np
import pytest

from minitfm.evaluation import clustered_standard_error


def miller_double_sum(s, clusters):
    """Miller (2024): SE_CLT^2 plus the cross terms of every pair of distinct items in a cluster, by loops."""
    s = np.asarray(s, float)
    n, mean = len(s), s.mean()
    var = sum((x - mean) ** 2 for x in s) / n ** 2
    for i in range(n):
        for j in range(n):
            if i != j and clusters[i] == clusters[j]:
                var += (s[i] - mean) * (s[j] - mean) / n ** 2
    return math.sqrt(var)


def sandwich(s, clusters):
    """CR0 cluster-robust variance of the intercept of y = b0 + e, as (X'X)^-1 (sum_c X_c' e_c e_c' X_c) (X'X)^-1."""
    s = np.asarray(s, float)
    x = np.ones((len(s), 1))
    e = s - x @ np.linalg.lstsq(x, s, rcond=None)[0]
    meat = np.zeros((1, 1))
    for c in set(clusters):
        idx = [i for i, ci in enumerate(clusters) if ci == c]
        u = x[idx].T @ e[idx]
        meat += np.outer(u, u)
    bread = np.linalg.inv(x.T @ x)
    return math.sqrt((bread @ meat @ bread)[0, 0])


def test_equals_miller_double_sum_and_the_regression_sandwich():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(5, 40))
        s = rng.integers(0, 2, n).astype(float) if rng.random() < 0.5 else rng.normal(size=n)
        clusters = list(rng.integers(0, max(1, n // 3), n))
        got = clustered_standard_error(s, clusters)
        assert got.se_clustered == pytest.approx(miller_double_sum(s, clusters), rel=1e-10, abs=1e-7)
        assert got.se_clustered == pytest.approx(sandwich(s, clusters), rel=1e-10, abs=1e-7)
        assert got.se_independent == pytest.approx(np.std(s) / math.sqrt(n), rel=1e-10)
        assert got.n_items == n and got.n_clusters == len(set(clusters))


def test_singleton_clusters_give_the_independent_error():
    s = [1, 0, 1, 1, 0, 1, 0]
    got = clustered_standard_error(s, range(7))
    assert got.se_clustered == pytest.approx(got.se_independent) and got.design_effect == pytest.approx(1.0)


def test_covers_the_true_spread_of_the_mean_when_items_share_passages():
    """Simulate a benchmark of 100 passages x 5 questions whose answers share a passage effect: the clustered error
    matches the spread of the mean over repeats, while the independent one is far too small."""
    rng = np.random.default_rng(1)
    clusters = np.repeat(np.arange(100), 5)
    means, se_c, se_i = [], [], []
    for _ in range(400):
        passage = rng.normal(0, 1.2, 100)[clusters]  # shared by the 5 questions of a passage
        s = (rng.normal(0, 1, 500) + passage > 0).astype(float)
        r = clustered_standard_error(s, clusters)
        means.append(r.mean), se_c.append(r.se_clustered), se_i.append(r.se_independent)
    true_se = np.std(means)
    assert abs(np.mean(se_c) / true_se - 1) < 0.12
    assert np.mean(se_i) / true_se < 0.75


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="same items"):
        clustered_standard_error([1, 0, 1], [0, 0])
    with pytest.raises(TypeError, match="clusters must be a sequence"):
        clustered_standard_error([1, 0], "ab")
    with pytest.raises(TypeError, match="hashable labels"):
        clustered_standard_error([1, 0], [[1], [2]])
