"""Checkers for the logits processors: temperature, top-k, top-p and the repetition penalty.

Each takes (B, V) logits and returns new (B, V) logits without changing its input; removed tokens get
``-inf`` (probability exactly 0 after the softmax) and at least one token always stays.
"""
from __future__ import annotations

import torch

from ..sampling import RepetitionPenalty, Temperature, TopK, TopP
from ._core import Case, CheckResult, Mistake, randn, run_cases
from ._feedback import describe_difference

ZERO_FILL = ("removed tokens must get -inf, so their probability is exactly 0; a logit of 0 is still a "
             "perfectly likely token")
PROBS = "return logits (with -inf for removed tokens), not probabilities: the softmax comes later, when sampling"


def _history(b):
    return torch.zeros(b, 0, dtype=torch.long)


def _keep_one(got, expected):
    """A row without any finite logit cannot be sampled from: say so before the generic comparison."""
    if isinstance(got, torch.Tensor) and got.shape == expected.shape and got.is_floating_point():
        empty = ~torch.isfinite(got).any(dim=-1)
        if empty.any():
            return f"row {int(empty.nonzero()[0])} has no token left: every logit is -inf; always keep the most likely"
    return describe_difference(got, expected, atol=1e-3 if expected.dtype == torch.float16 else 1e-5)


def _cases(what_logits, expected_fn, mistakes, extra):
    cases = []
    for what, shape, seed, dtype, arg in what_logits:
        def make(s=shape, sd=seed, dt=dtype, a=arg):
            return {"logits": randn(*s, seed=sd, dtype=dt) * 2, extra: a}
        cases.append(Case(what, make, expected_fn(make()), mistakes, compare=_keep_one))
    return cases


def check_temperature(temperature_fn, verbose: bool = True) -> CheckResult:
    """Check ``temperature_fn(logits, temperature) -> logits / temperature`` for (B, V) logits, temperature > 0."""
    mistakes = [
        Mistake("you multiply by the temperature; divide: a temperature below 1 must sharpen the distribution",
                lambda i: i["logits"] * i["temperature"]),
        Mistake(PROBS, lambda i: (i["logits"] / i["temperature"]).softmax(-1)),
        Mistake("you returned log-probabilities (log_softmax); return logits / temperature",
                lambda i: (i["logits"] / i["temperature"]).log_softmax(-1)),
    ]
    specs = [("B=2, V=10, temperature 0.5", (2, 10), 1, torch.float32, 0.5),
             ("temperature 2.0 flattens", (1, 7), 2, torch.float32, 2.0),
             ("float16 logits, temperature 0.7", (3, 5), 3, torch.float16, 0.7)]
    cases = _cases(specs, lambda i: Temperature(i["temperature"])(_history(i["logits"].shape[0]), i["logits"]),
                   mistakes, "temperature")
    return run_cases("check_temperature", temperature_fn, cases, verbose=verbose)


def _top_k_keeping(logits, n):
    n = max(1, min(n, logits.shape[-1]))
    kth = logits.topk(n, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def check_top_k(top_k, verbose: bool = True) -> CheckResult:
    """Check ``top_k(logits, k) -> logits`` keeping the k largest logits of each (B, V) row, -inf elsewhere.

    k larger than V keeps every token.
    """
    mistakes = [
        Mistake(ZERO_FILL, lambda i: _top_k_keeping(i["logits"], i["k"]).nan_to_num(neginf=0.0)),
        Mistake("off by one: you keep k + 1 tokens", lambda i: _top_k_keeping(i["logits"], i["k"] + 1)),
        Mistake("off by one: you keep k - 1 tokens", lambda i: _top_k_keeping(i["logits"], i["k"] - 1)),
        Mistake("you keep the k smallest logits; keep the k largest",
                lambda i: -_top_k_keeping(-i["logits"], i["k"])),
        Mistake(PROBS, lambda i: _top_k_keeping(i["logits"], i["k"]).softmax(-1)),
    ]
    specs = [("B=2, V=10, k=3", (2, 10), 1, torch.float32, 3),
             ("a batch of 1, k=1 (greedy)", (1, 8), 2, torch.float32, 1),
             ("k=V keeps every token", (2, 6), 3, torch.float32, 6),
             ("k=20 > V=6 keeps every token", (2, 6), 4, torch.float32, 20),
             ("float16 logits, odd V=7, k=2", (3, 7), 5, torch.float16, 2)]
    cases = _cases(specs, lambda i: TopK(i["k"])(_history(i["logits"].shape[0]), i["logits"]), mistakes, "k")
    return run_cases("check_top_k", top_k, cases, verbose=verbose)


def _top_p_variant(logits, p, *, shift=True, sort=True, fill=float("-inf")):
    if sort:
        order = logits.argsort(dim=-1, descending=True, stable=True)
    else:
        order = torch.arange(logits.shape[-1]).expand_as(logits)
    probs = logits.gather(-1, order).float().softmax(-1)
    mass = probs.cumsum(-1) - (probs if shift else 0)
    remove_sorted = mass >= p if shift else mass > p
    remove = remove_sorted.scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, fill)


def check_top_p(top_p, verbose: bool = True) -> CheckResult:
    """Check ``top_p(logits, p) -> logits``: keep the smallest set of most likely tokens whose probabilities
    sum to at least p (0 < p <= 1), -inf elsewhere. The most likely token always stays.

    A token is removed when the tokens ranked above it already cover p; ties are broken by token id.
    """
    mistakes = [
        Mistake("you removed the token that takes the total over p; keep it: a token goes only when the tokens "
                "ranked above it already cover p", lambda i: _top_p_variant(*i.values(), shift=False)),
        Mistake("you add up probabilities in vocabulary order; sort the tokens by probability (largest first) "
                "before accumulating", lambda i: _top_p_variant(*i.values(), sort=False)),
        Mistake(ZERO_FILL, lambda i: _top_p_variant(*i.values(), fill=0.0)),
    ]
    specs = [("B=2, V=10, p=0.9", (2, 10), 1, torch.float32, 0.9),
             ("p=1.0 keeps every token", (2, 6), 2, torch.float32, 1.0),
             ("a batch of 1, p=0.05: only the most likely token", (1, 8), 3, torch.float32, 0.05),
             ("p=0.5, odd V=7", (3, 7), 4, torch.float32, 0.5),
             ("float16 logits, p=0.8", (2, 9), 5, torch.float16, 0.8)]
    cases = _cases(specs, lambda i: TopP(i["p"])(_history(i["logits"].shape[0]), i["logits"]), mistakes, "p")
    return run_cases("check_top_p", top_p, cases, verbose=verbose)


def _penalise(tokens, logits, penalty, *, divide_all=False, count=False, whole_batch=False, invert=False):
    seen = torch.zeros(logits.shape, dtype=torch.float32)
    rows = tokens if not whole_batch else tokens.reshape(1, -1).expand(tokens.shape[0], -1)
    for b in range(logits.shape[0]):
        for t in rows[b].tolist():
            seen[b, t] = seen[b, t] + 1 if count else 1
    factor = penalty ** seen if count else torch.where(seen > 0, torch.tensor(penalty), torch.tensor(1.0))
    factor = factor.to(logits.dtype)
    if divide_all:
        return logits / factor
    if invert:
        return torch.where(logits > 0, logits * factor, logits / factor)
    return torch.where(logits > 0, logits / factor, logits * factor)


def check_repetition_penalty(repetition_penalty, verbose: bool = True) -> CheckResult:
    """Check ``repetition_penalty(tokens, logits, penalty) -> logits``.

    tokens (B, T) are the ids so far, logits (B, V). For every id in row b's history: a positive logit is
    divided by ``penalty``, a negative one multiplied by it (so penalty > 1 always lowers it). Once per id,
    however often it appeared; row b's history affects row b only.
    """
    mistakes = [
        Mistake("you divide every repeated logit by the penalty: that raises a negative logit towards 0. Multiply "
                "negative logits by the penalty instead", lambda i: _penalise(*i.values(), divide_all=True)),
        Mistake("you penalise once per occurrence; the penalty applies once per token id, however often it appeared",
                lambda i: _penalise(*i.values(), count=True)),
        Mistake("you use every row's history for every row; row b's tokens penalise row b only",
                lambda i: _penalise(*i.values(), whole_batch=True)),
        Mistake("your penalty goes the wrong way: positive logits are divided, negative ones multiplied",
                lambda i: _penalise(*i.values(), invert=True)),
    ]

    def case(what, history, v, seed, penalty, dtype=torch.float32):
        make = lambda: {"tokens": torch.tensor(history, dtype=torch.long).reshape(len(history), -1),  # noqa: E731
                        "logits": randn(len(history), v, seed=seed, dtype=dtype) * 2, "penalty": penalty}
        i = make()
        return Case(what, make, RepetitionPenalty(penalty)(i["tokens"], i["logits"]), mistakes, compare=_keep_one)

    cases = [
        case("two rows with different histories, repeats, penalty 1.5", [[1, 3, 3, 3], [0, 2, 5, 2]], 8, 1, 1.5),
        case("an empty history changes nothing", [[], []], 6, 2, 1.3),
        case("a batch of 1, penalty 0.5 < 1 rewards repetition", [[4, 4, 0]], 5, 3, 0.5),
        case("float16 logits", [[1, 2, 2], [6, 0, 1]], 7, 4, 2.0, dtype=torch.float16),
    ]
    return run_cases("check_repetition_penalty", repetition_penalty, cases, verbose=verbose)
