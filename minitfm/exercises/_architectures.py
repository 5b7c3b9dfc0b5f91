"""Checkers for chapter 13c (beyond one softmax over every token): gpt-oss's sink softmax and one step of the gated
delta rule (Gated DeltaNet, Qwen3-Next and Qwen 3.5).

Glossary: B batch, H heads, T_q queries, T_k keys, Dk a key head's width, Dv a value head's width.
The expected answers are the weights of :func:`minitfm.layers._attention_variants.sink_attention` (through
:class:`~minitfm.layers.multihead.MultiHeadAttention` with ``sinks=True``) and one token of
:func:`minitfm.layers.delta_net.gated_delta_recurrent`; the tests check the references below against both.
"""
from __future__ import annotations

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases


def _safe(answer):
    """A mistake's answer, or None where that mistake cannot be made on this case's shapes (so it never matches)."""
    def safe(inputs):
        try:
            return answer(inputs)
        except RuntimeError:
            return None
    return safe


def _sink_softmax(scores: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    """exp(s_ij) / (exp(sink_h) + sum_j exp(s_ij)), the sink's own column dropped; stable for any scores."""
    sink = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)  # (H,) -> (B, H, T_q, 1)
    return torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]


def check_sink_softmax(sink_softmax, verbose: bool = True) -> CheckResult:
    """Check ``sink_softmax(scores (B, H, T_q, T_k), sinks (H,)) -> weights (B, H, T_q, T_k)``: each row's softmax
    with one more logit, the head's sink, in the denominator only; masked scores are ``-inf``; the answer has the
    scores' shape and dtype, and rows sum to less than 1."""
    mistakes = [
        Mistake("yours is the plain softmax, whose rows sum to 1: the sink is left out (adding it to every score "
                "leaves it out too, since a softmax ignores a shift of all its logits); exp(sink) joins the "
                "denominator only", lambda i: i["scores"].softmax(dim=-1)),
        Mistake("you added the sink itself to the denominator; it is a logit, so exp(sink) joins the sum",
                lambda i: i["scores"].exp() / (i["scores"].exp().sum(-1, keepdim=True) + i["sinks"].view(1, -1, 1, 1))),
        Mistake("you used one sink per query position instead of one per head (sinks has one number per head H)",
                _safe(lambda i: _sink_softmax(i["scores"].transpose(1, 2), i["sinks"]).transpose(1, 2))),
    ]

    def case(what, shape, scale, seed, mask=False, dtype=torch.float32, sink_scale=1.0):
        def make():
            scores = randn(*shape, seed=seed, dtype=dtype) * scale
            if mask:  # causal, aligned bottom-right: the last T_q of T_k positions
                t_q, t_k = shape[-2:]
                visible = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)
                scores = scores.masked_fill(~visible, float("-inf"))
            return {"scores": scores, "sinks": randn(shape[1], seed=seed + 100, dtype=dtype) * sink_scale}
        inputs = make()
        return Case(what, make, _sink_softmax(inputs["scores"], inputs["sinks"]), mistakes)

    cases = [
        case("one head, three queries over three keys", (1, 1, 3, 3), 1.0, seed=1),
        case("two heads of their own sinks (2, 2, 4, 5)", (2, 2, 4, 5), 1.0, seed=2, sink_scale=2.0),
        case("causal scores with -inf above the diagonal (one query sees one key)", (1, 3, 4, 4), 1.0, seed=3,
             mask=True),
        case("large scores (of order 100): exp overflows unless you subtract the row's maximum first",
             (1, 2, 3, 6), 100.0, seed=4, sink_scale=100.0),
        case("float64, three heads, five queries over seven keys (a cache of two)", (1, 3, 5, 7), 2.0, seed=5,
             mask=True, dtype=torch.float64),
    ]
    return run_cases("check_sink_softmax", sink_softmax, cases, verbose=verbose)


def _delta_step(state, q, k, v, g, beta):
    """One token of the gated delta rule: decay, then write what the key's current read misses, then read."""
    decayed = state * g.exp()[..., None, None]  # (B, H, Dk, Dv) times exp(g) (B, H)
    error = v - (k.unsqueeze(-2) @ decayed).squeeze(-2)  # (B, H, Dv): v - S^T k
    new_state = decayed + k.unsqueeze(-1) * (beta[..., None] * error).unsqueeze(-2)  # + beta k (v - S^T k)^T
    return (q.unsqueeze(-2) @ new_state).squeeze(-2), new_state  # o = S^T q (B, H, Dv), S (B, H, Dk, Dv)


def check_gated_delta_step(gated_delta_step, verbose: bool = True) -> CheckResult:
    """Check ``gated_delta_step(state (B, H, Dk, Dv), q (B, H, Dk), k (B, H, Dk), v (B, H, Dv), g (B, H),
    beta (B, H)) -> (o (B, H, Dv), new_state (B, H, Dk, Dv))``: S <- exp(g) S, then S <- S + beta k (v - S^T k)^T,
    then o = S^T q. The keys come unit-length (the layer normalises them); ``g`` is a log decay (<= 0)."""
    def no_decay(i):
        return _delta_step(i["state"], i["q"], i["k"], i["v"], torch.zeros_like(i["g"]), i["beta"])

    def decay_last(i):
        o, s = _delta_step(i["state"], i["q"], i["k"], i["v"], torch.zeros_like(i["g"]), i["beta"])
        s = s * i["g"].exp()[..., None, None]
        return (i["q"].unsqueeze(-2) @ s).squeeze(-2), s

    def read_before(i):
        _, s = _delta_step(i["state"], i["q"], i["k"], i["v"], i["g"], i["beta"])
        return (i["q"].unsqueeze(-2) @ i["state"]).squeeze(-2), s

    def linear_write(i):
        s = i["state"] * i["g"].exp()[..., None, None] + i["k"].unsqueeze(-1) * (i["beta"][..., None] * i["v"]).unsqueeze(-2)
        return (i["q"].unsqueeze(-2) @ s).squeeze(-2), s

    def decay_as_factor(i):
        s = i["state"] * i["g"][..., None, None]
        error = i["v"] - (i["k"].unsqueeze(-2) @ s).squeeze(-2)
        s = s + i["k"].unsqueeze(-1) * (i["beta"][..., None] * error).unsqueeze(-2)
        return (i["q"].unsqueeze(-2) @ s).squeeze(-2), s

    mistakes = [
        Mistake("you forgot the decay: the state is multiplied by exp(g) before the token writes", no_decay),
        Mistake("you decayed after the write: the gate first fades the old state, then the token writes at full "
                "strength", decay_last),
        Mistake("you read the output from the state before this token: o = S^T q uses the state after the write",
                read_before),
        Mistake("you wrote beta k v^T, plain linear attention's write: the delta rule writes only what the key's "
                "current read misses, beta k (v - S^T k)^T", linear_write),
        Mistake("you multiplied the state by g itself: g is a log decay, the factor is exp(g)", decay_as_factor),
        Mistake("you forgot beta: the write is beta k (v - S^T k)^T",
                lambda i: _delta_step(i["state"], i["q"], i["k"], i["v"], i["g"], torch.ones_like(i["beta"]))),
    ]

    def case(what, b, h, dk, dv, seed, empty=False, dtype=torch.float32):
        def make():
            k = randn(b, h, dk, seed=seed + 1, dtype=dtype)
            state = randn(b, h, dk, dv, seed=seed, dtype=dtype) * (0.0 if empty else 0.5)
            return {"state": state, "q": randn(b, h, dk, seed=seed + 2, dtype=dtype) * dk ** -0.5,
                    "k": k / k.norm(dim=-1, keepdim=True), "v": randn(b, h, dv, seed=seed + 3, dtype=dtype),
                    "g": -randn(b, h, seed=seed + 4, dtype=dtype).abs(),
                    "beta": randn(b, h, seed=seed + 5, dtype=dtype).sigmoid()}
        inputs = make()
        return Case(what, make, _delta_step(**inputs), mistakes)

    cases = [
        case("one head, Dk 4, Dv 3, a state already written", 1, 1, 4, 3, seed=1),
        case("an empty state (zeros): the first token", 2, 2, 4, 5, seed=2, empty=True),
        case("a batch of 3, four heads, Dk 8, Dv 6", 3, 4, 8, 6, seed=3),
        case("float64, Dk 2, Dv 7", 1, 2, 2, 7, seed=4, dtype=torch.float64),
    ]
    return run_cases("check_gated_delta_step", gated_delta_step, cases, verbose=verbose)
