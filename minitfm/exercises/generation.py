"""Checkers for chapters 8 and 9: a KV-cache update, one step of beam search, and the logits processors.

The logits processors (temperature, top-k, top-p, the repetition penalty) each take (B, V) logits and return
new (B, V) logits without changing their input; removed tokens get ``-inf`` (probability exactly 0 after the
softmax) and at least one token always stays.
"""
from __future__ import annotations

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.exercises._feedback import describe_difference
from minitfm.generation.sampling import RepetitionPenalty, Temperature, TopK, TopP
from minitfm.layers.kv_cache import KVCache


def _wrong_update(k_cache, v_cache, length, k_new, v_new, *, start=None, whole=False, advance=True):
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    begin = length if start is None else start(length)
    end = begin + k_new.shape[2]
    k_cache[:, :, begin:end], v_cache[:, :, begin:end] = k_new, v_new
    stop = k_cache.shape[2] if whole else length + k_new.shape[2]
    return k_cache[:, :, :stop], v_cache[:, :, :stop], length + k_new.shape[2] if advance else length


def check_kv_cache_update(cache_update, verbose: bool = True) -> CheckResult:
    """Check ``cache_update(k_cache, v_cache, length, k_new, v_new) -> (k_all, v_all, new_length)``.

    k_cache and v_cache are preallocated buffers (B, H, T_max, Dh) whose first ``length`` positions are
    filled; k_new and v_new are (B, H, T_new, Dh). Write them **in place** at positions
    ``length .. length + T_new - 1`` and return the valid prefixes (B, H, length + T_new, Dh) of both
    buffers and the new length ``length + T_new`` (an int).
    """
    mistakes = [
        Mistake("you write at position 0 every time, over the old keys; write at the length pointer: "
                "[length : length + T_new]", lambda i: _wrong_update(*i.values(), start=lambda n: 0)),
        Mistake("off by one: you write one position after the length pointer; the first free slot is `length`",
                lambda i: _wrong_update(*i.values(), start=lambda n: n + 1)),
        Mistake("you return the whole buffer (T_max positions); return only the valid prefix "
                "[:, :, :length + T_new], the positions written so far",
                lambda i: _wrong_update(*i.values(), whole=True)),
        Mistake("the length pointer did not move: new_length must be length + T_new",
                lambda i: _wrong_update(*i.values(), advance=False)),
    ]

    def written(inputs, got):
        k_cache, length, k_new = inputs["k_cache"], inputs["length"], inputs["k_new"]
        end = length + k_new.shape[2]
        if not (torch.equal(k_cache[:, :, length:end], k_new) and torch.equal(inputs["v_cache"][:, :, length:end],
                                                                             inputs["v_new"])):
            return ("your answer is right but the buffers were not written: the point of preallocation is to write "
                    "in place, k_cache[:, :, length:end] = k_new (torch.cat makes a new tensor every step)")
        return None

    def case(what, b, h, t_max, dh, length, t_new, seed, dtype=torch.float32):
        def make():
            k_cache, v_cache = torch.zeros(b, h, t_max, dh, dtype=dtype), torch.zeros(b, h, t_max, dh, dtype=dtype)
            k_cache[:, :, :length] = randn(b, h, length, dh, seed=seed, dtype=dtype)
            v_cache[:, :, :length] = randn(b, h, length, dh, seed=seed + 1, dtype=dtype)
            return {"k_cache": k_cache, "v_cache": v_cache, "length": length,
                    "k_new": randn(b, h, t_new, dh, seed=seed + 2, dtype=dtype),
                    "v_new": randn(b, h, t_new, dh, seed=seed + 3, dtype=dtype)}
        i = make()
        cache = KVCache(b, h, t_max, dh, dtype=dtype)
        cache.k, cache.v, cache.length = i["k_cache"], i["v_cache"], length
        k_all, v_all = cache.update(i["k_new"], i["v_new"])
        return Case(what, make, (k_all, v_all, length + t_new), mistakes, after_call=written,
                    may_change=("k_cache", "v_cache"))

    cases = [
        case("prefill: 4 prompt tokens into an empty cache of 8", 2, 3, 8, 4, 0, 4, seed=1),
        case("one decode step at length 4", 2, 3, 8, 4, 4, 1, seed=2),
        case("two tokens at length 6 fill the cache exactly (T_max=8)", 2, 3, 8, 4, 6, 2, seed=3),
        case("a batch of 1, one head, odd Dh=5", 1, 1, 7, 5, 3, 1, seed=4),
        case("float16 buffers", 2, 2, 6, 8, 2, 3, seed=5, dtype=torch.float16),
    ]
    return run_cases("check_kv_cache_update", cache_update, cases, verbose=verbose)


def _step(scores, log_probs, k, *, add=True, swap=False, per_beam=False):
    v = log_probs.shape[-1]
    if per_beam:  # each beam keeps only its best token
        best, token = (scores[:, None] + log_probs).max(dim=-1)
        top, beam = best.topk(k)
        return beam, token[beam], top
    total = scores[:, None] + log_probs if add else log_probs
    top, flat = total.reshape(-1).topk(k)  # (K, V) -> (K V,) -> (K,)
    beam, token = flat // v, flat % v
    if swap:
        beam, token = token, beam
    if not add:
        top = scores[beam] + log_probs[beam, token]
    return beam, token, top


def _as_long(got):
    if isinstance(got, (tuple, list)) and len(got) == 3:
        beam, token, score = got
        to_long = lambda t: t.long() if isinstance(t, torch.Tensor) and not t.is_floating_point() else t  # noqa: E731
        return to_long(beam), to_long(token), score
    return got


def check_beam_step(beam_step, verbose: bool = True) -> CheckResult:
    """Check ``beam_step(beam_scores, log_probs, num_beams) -> (beam, token, score)``.

    beam_scores (K_in,) are the live beams' summed log-probabilities; log_probs (K_in, V) each beam's
    next-token log-probabilities. Among all K_in x V continuations return the ``num_beams`` best, best
    first: the beam each extends (K,), the token it adds (K,) and its new summed score (K,).
    """
    mistakes = [
        Mistake("you rank by the next token's log-probability alone; add each beam's score first (a beam's score "
                "is the sum of its tokens' log-probabilities)", lambda i: _step(*i.values(), add=False)),
        Mistake("each of your beams keeps only its own best token; the K best come from all K x V candidates, so "
                "one strong beam may supply several", lambda i: _step(*i.values(), per_beam=True)),
        Mistake("beam and token are swapped: for a flat index i over K x V candidates the beam is i // V and the "
                "token i % V", lambda i: _step(*i.values(), swap=True)),
    ]

    def case(what, k_in, v, k, seed, first=False):
        def make():
            scores = -randn(k_in, seed=seed).abs() * 3
            if first:  # all beams start identical: only beam 0 may expand
                scores = torch.full((k_in,), float("-inf")).index_fill(0, torch.tensor([0]), 0.0)
            return {"beam_scores": scores, "log_probs": randn(k_in, v, seed=seed + 1).log_softmax(-1),
                    "num_beams": k}
        return Case(what, make, _step(*make().values()), mistakes, normalize=_as_long)

    cases = [
        case("K=3 beams, V=5 tokens", 3, 5, 3, seed=1),
        case("the first step: beams 1.. are -inf, only beam 0 expands", 3, 6, 3, seed=2, first=True),
        case("K=1: greedy", 1, 7, 1, seed=3),
        case("K=4 beams over V=2 tokens", 4, 2, 4, seed=4),
        case("K=2 beams, V=9, one beam much better", 2, 9, 2, seed=5),
    ]
    return run_cases("check_beam_step", beam_step, cases, verbose=verbose)


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
