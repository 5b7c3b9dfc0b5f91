"""Exact match against lm-eval's metric; pass@k against Chen et al.'s closed form, and the naive estimator's bias."""
import math

import numpy as np
import pytest

from minitfm.evaluation import exact_match, mean_pass_at_k, naive_pass_at_k, pass_at_k


def closed_form(n, c, k):
    return 1 - math.comb(n - c, k) / math.comb(n, k)  # math.comb(m, k) = 0 when k > m


def test_pass_at_k_equals_the_closed_form_with_math_comb():
    checked = 0
    for n in range(1, 41):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(closed_form(n, c, k), abs=1e-12), (n, c, k)
                checked += 1
    for n, c, k in [(200, 3, 10), (200, 150, 100), (1000, 1, 1), (1000, 17, 100)]:  # big n: exact ratio of ints
        exact = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)
    assert checked > 10_000


def test_pass_at_1_is_the_fraction_correct_and_edge_cases():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3, abs=1e-15)
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 10, 1) == 1.0 and pass_at_k(10, 6, 5) == 1.0
    assert mean_pass_at_k([10, 20], [3, 0], 1) == pytest.approx(0.15)
    assert mean_pass_at_k(10, [3, 5], 1) == pytest.approx(0.4)


def expectation_over_draws(estimator, n, k, p):
    """E[estimator(n, C, k)] for C ~ Binomial(n, p): exact, by summing over every possible count."""
    return sum(math.comb(n, c) * p ** c * (1 - p) ** (n - c) * estimator(n, c, k) for c in range(n + 1))


@pytest.mark.parametrize("n, k, p", [(5, 3, 0.3), (10, 5, 0.1), (8, 2, 0.5), (20, 10, 0.05)])
def test_unbiased_estimator_has_the_true_expectation_and_the_naive_one_does_not(n, k, p):
    truth = 1 - (1 - p) ** k  # pass@k of a problem the model solves with probability p per sample
    assert expectation_over_draws(pass_at_k, n, k, p) == pytest.approx(truth, abs=1e-12)
    naive = expectation_over_draws(naive_pass_at_k, n, k, p)
    assert naive < truth - 0.01  # biased low (Jensen: 1 - (1 - x)^k is concave), by more than a rounding error


def test_exact_match_equals_lm_eval_metric():
    from lm_eval.api.metrics import exact_match_hf_evaluate

    predictions = ["Paris", "paris", " 42", "四", "yes", "No"]
    references = ["Paris", "Paris", "42", "四", "no", "no"]
    for ignore_case in (False, True):
        ours = exact_match(predictions, references, ignore_case=ignore_case)
        theirs = exact_match_hf_evaluate(predictions, references, ignore_case=ignore_case)["exact_match"]
        assert ours.mean() == pytest.approx(theirs) and ours.shape == (6,)
        # item by item too: the per-item array feeds intervals and paired tests, so its order matters
        each = [exact_match_hf_evaluate([p], [r], ignore_case=ignore_case)["exact_match"]
                for p, r in zip(predictions, references)]
        np.testing.assert_array_equal(ours, each)
    np.testing.assert_array_equal(exact_match(predictions, references), [1, 0, 0, 1, 0, 0])  # not symmetric
    np.testing.assert_array_equal(exact_match(predictions, references, ignore_case=True), [1, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(exact_match([" 42 "], ["42"], strip=True), [1.0])
    np.testing.assert_array_equal(exact_match([" 42 "], ["42"]), [0.0])


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match=r"k must be <= n: pass@5 needs at least 5 samples per problem, got n=3"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ValueError, match="c .correct samples. cannot exceed n"):
        pass_at_k(3, 4, 1)
    with pytest.raises(TypeError, match="must be an int count, got bool"):
        pass_at_k(10, True, 1)
    with pytest.raises(TypeError, match="got float"):
        pass_at_k(10.0, 1, 1)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        pass_at_k(10, 1, 0)
    with pytest.raises(ValueError, match="n and c must score the same items: got 2 and 3"):
        mean_pass_at_k([5, 5], [1, 2, 3], 1)
    with pytest.raises(ValueError, match="predictions and references must score the same items: got 1 and 2"):
        exact_match(["a"], ["a", "b"])
    with pytest.raises(TypeError, match="predictions must be a list of strings, got one str"):
        exact_match("abc", ["abc"])
    with pytest.raises(ValueError, match="predictions is empty"):
        exact_match([], [])
    with pytest.raises(TypeError, match="references must hold strings, got int"):
        exact_match(["1"], [1])
