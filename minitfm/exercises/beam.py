"""Checker for one step of beam search: pick the K best (beam, token) continuations."""
from __future__ import annotations

import torch

from ._core import Case, CheckResult, Mistake, randn, run_cases


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
