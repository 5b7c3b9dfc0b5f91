"""The checkers of chapter 14 (bits per byte, the unbiased pass@k, the Wilson interval) accept a correct function
and name each typical mistake.

``CASES`` has the layout of ``tests/exercises/test_exercises.py``'s table (checker -> (correct, [(wrong, words)])),
and that table runs the shared checks (a correct function passes, each mistake is named, a stub is "not implemented") on
these entries too; the tests below are the ones particular to chapter 14's checkers.
"""
import math

import torch

from minitfm import evaluation as E
from minitfm import exercises as ex


def bpb_ok(token_log_probs, text):
    return -float(token_log_probs.double().sum()) / (math.log(2) * len(text.encode("utf-8")))


def pass_ok(n, c, k):
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_comb(n, c, k):  # the binomials as written: right, but float division of huge integers
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def wilson_ok(successes, n):
    z = 1.959964
    p = successes / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_wald(successes, n):
    p = successes / n
    half = 1.959964 * math.sqrt(p * (1 - p) / n)
    return max(0.0, p - half), min(1.0, p + half)


def pass_float_overflow(n, c, k):  # the binomials in floating point: overflow on the large case
    if n - c < k:
        return 1.0
    return 1.0 - math.gamma(n - c + 1) / (math.gamma(k + 1) * math.gamma(n - c - k + 1)) / (
        math.gamma(n + 1) / (math.gamma(k + 1) * math.gamma(n - k + 1)))


def pass_no_guard(n, c, k):
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1)) if c < n else 1.0


CASES = {
    "check_bits_per_byte": (bpb_ok, [
        (lambda lp, t: -float(lp.sum()) / len(t.encode("utf-8")), "nats per byte"),
        (lambda lp, t: -float(lp.sum()) / (math.log(2) * len(t)), "number of characters"),
        (lambda lp, t: -float(lp.sum()) / (math.log(2) * lp.numel()), "number of tokens"),
        (lambda lp, t: float(lp.sum()) / (math.log(2) * len(t.encode("utf-8"))), "negative"),
        (lambda lp, t: -lp.sum() / math.log(2), r"expected"),
    ]),
    "check_pass_at_k": (pass_ok, [
        (lambda n, c, k: 1 - (1 - c / n) ** k, "plug-in"),
        (lambda n, c, k: 1 - pass_ok(n, c, k), "all k fail"),
        (lambda n, c, k: c / n, "pass@1"),
        (pass_float_overflow, r"case 6 of 6 fails|OverflowError|overflow"),
    ]),
    "check_wilson_interval": (wilson_ok, [
        (wilson_wald, "Wald interval"),
        (lambda k, n: (lambda p, h: (max(0.0, p - h), min(1.0, p + h)))(
            k / n, (w := wilson_ok(k, n))[1] - (w[0] + w[1]) / 2), "centred on p"),
        (lambda k, n: E.wilson_interval(k, n, confidence=0.90), "90% interval"),
        (lambda k, n: wilson_ok(k, n)[::-1], "low .* is above high"),
    ]),
}


def test_the_checkers_are_importable_from_minitfm_exercises():
    assert set(CASES) <= set(ex.CHECKERS)


def test_accepts_the_librarys_own_functions():
    assert ex.check_pass_at_k(E.pass_at_k, verbose=False).passed
    assert ex.check_wilson_interval(E.wilson_interval, verbose=False).passed
    assert ex.check_bits_per_byte(lambda lp, t: E.bits_per_byte(-float(lp.sum()), E.utf8_length(t)),
                                  verbose=False).passed


def test_the_exact_binomials_pass_and_a_missing_guard_is_caught():
    assert ex.check_pass_at_k(pass_comb, verbose=False).passed  # Python's integers do not overflow
    result = ex.check_pass_at_k(lambda n, c, k: pass_no_guard(n, c, k) if n - c >= k else 0.0, verbose=False)
    assert not result.passed and "n - c < k" in result.message


def test_the_bytes_case_tells_characters_from_bytes():
    """The mistake 'divide by characters' is only visible on non-ASCII text: a case must have it."""
    result = ex.check_bits_per_byte(lambda lp, t: -float(lp.sum()) / (math.log(2) * len(t)), verbose=False)
    assert "case 2 of 4" in result.message


def test_bits_per_byte_refuses_nothing_silently_on_a_tensor_answer():
    result = ex.check_bits_per_byte(lambda lp, t: torch.tensor(bpb_ok(lp, t)), verbose=False)
    assert result.passed  # a one-element tensor is a number
