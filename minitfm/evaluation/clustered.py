"""Clustered standard errors: the error bar of a mean when items come in groups that share a passage.

Benchmarks such as reading comprehension ask several questions about one passage. Those questions are not
independent draws: a passage the model misreads costs it several answers at once. The usual standard error of a
mean score, sqrt(Var(s) / n), assumes independent items and is then too small. Miller (2024), "Adding Error Bars to
Evals: A Statistical Approach to Language Model Evaluations", gives the cluster-robust form: with
scores s_{i,c} of item i in cluster c, n items in all and mean s̄,

    SE_clustered^2 = SE_CLT^2 + (1/n^2) * sum_c sum_i sum_{j != i} (s_{i,c} - s̄)(s_{j,c} - s̄)
                   = (1/n^2) * sum_c (sum_i (s_{i,c} - s̄))^2

where SE_CLT^2 = (1/n^2) * sum (s - s̄)^2 is the independent-items form (the population variance over n). This
is the CR0 "sandwich" variance of a regression on a constant (Liang and Zeger 1986), without a small-sample
correction; it needs many clusters to be trusted. When every item is its own cluster the two are equal. Their
squared ratio, the *design effect*, is how many times more items the clustered test set needs for the same
error bar: about 1 + (m - 1) * rho for clusters of m items whose scores correlate by rho.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from minitfm.evaluation._validate import check_same_length, check_scores

__all__ = ["ClusteredError", "clustered_standard_error"]


@dataclass(frozen=True)
class ClusteredError:
    """Mean score with its independent-items (``se_independent``) and cluster-robust (``se_clustered``) errors."""
    mean: float
    se_independent: float
    se_clustered: float
    n_items: int
    n_clusters: int

    @property
    def design_effect(self) -> float:
        """(se_clustered / se_independent)^2; nan when the scores do not vary."""
        return (self.se_clustered / self.se_independent) ** 2 if self.se_independent > 0 else math.nan


def clustered_standard_error(scores, clusters) -> ClusteredError:
    """``scores``: one number per item (0/1 correctness or any score); ``clusters``: one hashable label per item
    (the passage it shares). Returns the mean and both standard errors of Miller (2024)."""
    s = check_scores(scores, "scores")
    if isinstance(clusters, (str, bytes)):
        raise TypeError(f"clusters must be a sequence of labels, one per item, got a {type(clusters).__name__}")
    check_same_length(s, clusters, "scores", "clusters")
    number = {}
    try:
        index = np.array([number.setdefault(label, len(number)) for label in clusters])  # (N,) cluster of each item
    except TypeError as error:
        raise TypeError(f"clusters must hold hashable labels (ints, strings), got {error}") from None
    deviation = s - s.mean()
    cluster_sums = np.bincount(index, weights=deviation, minlength=len(number))  # (C,) sum over each cluster
    n = len(s)
    return ClusteredError(float(s.mean()), float(math.sqrt(np.sum(deviation ** 2)) / n),
                          float(math.sqrt(np.sum(cluster_sums ** 2)) / n), n, len(number))
