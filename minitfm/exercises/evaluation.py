"""Checkers for chapter 14's measurements: bits per byte, the unbiased pass@k and the Wilson interval.

Each compares the student's function with ``minitfm.evaluation`` on cases chosen so that the usual mistakes give
different numbers (non-ASCII text, so bytes differ from characters; ``n - c < k``; a count of 0 or n).
"""
from __future__ import annotations

import math

import torch

from minitfm.evaluation import pass_at_k as _pass_at_k
from minitfm.evaluation import utf8_length
from minitfm.evaluation import wilson_interval as _wilson
from minitfm.exercises._core import Case, CheckResult, Mistake, run_cases
from minitfm.exercises._feedback import describe_difference

Z95 = 1.959964


def _log_probs(n: int, seed: int) -> torch.Tensor:
    """n natural-log probabilities in (-4, 0), as a model would give its tokens."""
    return -4 * torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _compare_number(got, expected):
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = float(got)
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"return a number (a float), got {type(got).__name__}"
    if math.isnan(got):
        return "your answer is NaN"
    return describe_difference(float(got), float(expected), atol=1e-9, rtol=1e-7)


def check_bits_per_byte(bits_per_byte, verbose: bool = True) -> CheckResult:
    """Check ``bits_per_byte(token_log_probs, text) -> float``: ``-sum(token_log_probs) / (ln 2 * bytes)``.

    ``token_log_probs`` is a 1-D tensor of natural-log probabilities of the tokens of ``text``; ``bytes`` is the
    length of ``text`` in UTF-8.
    """
    def total(i):
        return -float(i["token_log_probs"].sum())

    def ref(i):
        return total(i) / (math.log(2) * utf8_length(i["text"]))

    mistakes = [
        Mistake("you returned nats per byte; divide by ln 2 as well to turn nats into bits",
                lambda i: total(i) / utf8_length(i["text"])),
        Mistake("you divided by the number of characters; divide by the UTF-8 bytes (len(text.encode('utf-8'))): "
                "'é' is 2 bytes, '中' is 3", lambda i: total(i) / (math.log(2) * len(i["text"]))),
        Mistake("you divided by the number of tokens: that is the per-token loss in bits, which depends on the "
                "tokenizer; divide by the text's UTF-8 bytes",
                lambda i: total(i) / (math.log(2) * i["token_log_probs"].numel())),
        Mistake("your answer is negative: the loss is minus the sum of the log-probabilities", lambda i: -ref(i)),
        Mistake("you used log base 2 on top of natural logs twice, or divided by log2(e): bits = nats / ln 2",
                lambda i: total(i) * math.log(2) / utf8_length(i["text"])),
    ]
    specs = [("ASCII text, 6 tokens", "the cat sleeps .", 6, 1),
             ("text with 'é' (2 bytes each): bytes differ from characters", "café crème brûlée", 7, 2),
             ("Chinese text (3 bytes a character), 4 tokens", "注意力机制", 4, 3),
             ("one token", "a", 1, 4)]
    cases = []
    for what, text, n, seed in specs:
        def make(t=text, n=n, s=seed):
            return {"token_log_probs": _log_probs(n, s), "text": t}
        cases.append(Case(what, make, ref(make()), mistakes, compare=_compare_number))
    return run_cases("check_bits_per_byte", bits_per_byte, cases, verbose=verbose)


def check_pass_at_k(pass_at_k, verbose: bool = True) -> CheckResult:
    """Check ``pass_at_k(n, c, k) -> float``: Chen et al.'s unbiased ``1 - C(n-c, k) / C(n, k)``.

    1.0 when ``n - c < k``; must not overflow for large ``n``.
    """
    def naive(i):
        return 1 - (1 - i["c"] / i["n"]) ** i["k"]

    mistakes = [
        Mistake("you used the plug-in 1 - (1 - c/n)^k: it draws with replacement and is biased low; use "
                "1 - C(n-c, k) / C(n, k), k samples drawn without replacement", naive),
        Mistake("you returned C(n-c, k) / C(n, k), the probability that all k fail; pass@k is 1 minus that",
                lambda i: 1 - _pass_at_k(i["n"], i["c"], i["k"])),
        Mistake("you returned c / n, which is pass@1; for k > 1 at least one of k tries must pass",
                lambda i: i["c"] / i["n"]),
    ]
    specs = [("n=10, c=3, k=1 (pass@1 is c/n)", 10, 3, 1), ("n=10, c=3, k=5", 10, 3, 5),
             ("n=20, c=1, k=10", 20, 1, 10), ("n=10, c=0, k=5: nothing passes", 10, 0, 5),
             ("n=10, c=8, k=5: n - c < k, every draw includes a correct one", 10, 8, 5),
             ("n=2000, c=30, k=100: the binomials overflow a float", 2000, 30, 100)]
    cases = [Case(what, lambda n=n, c=c, k=k: {"n": n, "c": c, "k": k}, _pass_at_k(n, c, k), mistakes,
                  compare=_compare_number) for what, n, c, k in specs]
    return run_cases("check_pass_at_k", pass_at_k, cases, verbose=verbose)


def _wald(k, n, z=Z95):
    p = k / n
    half = z * math.sqrt(p * (1 - p) / n)
    return max(0.0, p - half), min(1.0, p + half)


def _wilson_variant(k, n, z=Z95, *, centre_at_p=False, root_n=2):
    p = k / n
    denominator = 1 + z * z / n
    centre = p if centre_at_p else (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n ** root_n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _compare_pair(got, expected):
    if isinstance(got, (list, tuple)) and len(got) == 2:
        got = tuple(float(g) if isinstance(g, torch.Tensor) else g for g in got)
        if not all(isinstance(g, (int, float)) and not isinstance(g, bool) for g in got):
            return "return two numbers (low, high)"
        if got[0] > got[1]:
            return f"low {got[0]:.6g} is above high {got[1]:.6g}: return (low, high)"
    return describe_difference(got, expected, atol=1e-6, rtol=1e-6)


def check_wilson_interval(wilson_interval, verbose: bool = True) -> CheckResult:
    """Check ``wilson_interval(successes, n) -> (low, high)``: the 95% Wilson score interval, z = 1.959964,
    no continuity correction, within [0, 1]."""
    mistakes = [
        Mistake("you returned the Wald interval p ± z·sqrt(p(1-p)/n); the Wilson interval moves its centre to "
                "(p + z²/2n) / (1 + z²/n) and widens by z²/4n² under the root", lambda i: _wald(i["successes"], i["n"]),
                atol=1e-6),
        Mistake("your interval is centred on p; Wilson's centre is (p + z²/(2n)) / (1 + z²/n), pulled towards 1/2",
                lambda i: _wilson_variant(i["successes"], i["n"], centre_at_p=True)),
        Mistake("you used z = 1.645 (a 90% interval); a 95% interval uses z = 1.959964",
                lambda i: _wilson_variant(i["successes"], i["n"], z=1.6448536269514722)),
        Mistake("under the square root the second term is z²/(4n²); you divided by 4n only",
                lambda i: _wilson_variant(i["successes"], i["n"], root_n=1)),
    ]
    specs = [("42 of 60", 42, 60), ("0 of 20: the interval starts at 0 and is not empty", 0, 20),
             ("20 of 20", 20, 20), ("3 of 1000", 3, 1000), ("1 of 1", 1, 1)]
    cases = [Case(what, lambda k=k, n=n: {"successes": k, "n": n}, _wilson(k, n), mistakes, compare=_compare_pair)
             for what, k, n in specs]
    return run_cases("check_wilson_interval", wilson_interval, cases, verbose=verbose)
