"""The checkers of chapter 13c (gpt-oss's sink softmax, one gated delta step) accept a correct function, agree with the
library's own sink attention and gated delta rule, and name each typical mistake.

``CASES`` has the layout of ``tests/exercises/test_exercises.py``'s table (checker -> (correct, [(wrong, words)])),
so that table can take these entries too.
"""
import torch
from torch.testing import assert_close

from minitfm import exercises as ex
from minitfm.exercises._architectures import _delta_step, _sink_softmax
from minitfm.layers._attention_variants import sink_attention
from minitfm.layers.delta_net import gated_delta_recurrent


def sink_ok(scores, sinks):
    m = torch.maximum(scores.amax(dim=-1, keepdim=True), sinks.view(1, -1, 1, 1))  # the row's largest logit
    e = (scores - m).exp()
    return e / (e.sum(dim=-1, keepdim=True) + (sinks.view(1, -1, 1, 1) - m).exp())


def sink_naive(scores, sinks):  # right formula, but exp of scores of order 100 overflows to inf / inf = nan
    e = scores.exp()
    return e / (e.sum(dim=-1, keepdim=True) + sinks.view(1, -1, 1, 1).exp())


def delta_ok(state, q, k, v, g, beta):
    s = state * torch.exp(g)[:, :, None, None]
    s = s + torch.einsum("bhk,bhv->bhkv", k, beta[:, :, None] * (v - torch.einsum("bhk,bhkv->bhv", k, s)))
    return torch.einsum("bhk,bhkv->bhv", q, s), s


def delta_in_place(state, q, k, v, g, beta):
    state.mul_(torch.exp(g)[:, :, None, None])
    return delta_ok(state, q, k, v, torch.zeros_like(g), beta)


CASES = {
    "check_sink_softmax": (sink_ok, [
        (lambda s, sinks: s.softmax(dim=-1), "yours is the plain softmax"),
        (lambda s, sinks: (s + sinks.view(1, -1, 1, 1)).softmax(dim=-1), "adding it to every score"),
        (lambda s, sinks: s.exp() / (s.exp().sum(-1, keepdim=True) + sinks.view(1, -1, 1, 1)),
         "you added the sink itself to the denominator"),
        (sink_naive, r"case 4 of 5 fails \(large scores"),
        (lambda s, sinks: sink_ok(s, sinks).float(), r"case 5 of 5 fails \(float64.*\n.*wrong dtype"),
    ]),
    "check_gated_delta_step": (delta_ok, [
        (lambda s, q, k, v, g, b: delta_ok(s, q, k, v, torch.zeros_like(g), b), "you forgot the decay"),
        (lambda s, q, k, v, g, b: (torch.einsum("bhk,bhkv->bhv", q, s), delta_ok(s, q, k, v, g, b)[1]),
         "you read the output from the state before this token"),
        (lambda s, q, k, v, g, b: delta_ok(s, q, k, v, g, torch.ones_like(b)), "you forgot beta"),
        (delta_in_place, "changed its input `state` in place"),
    ]),
}


def test_the_checkers_are_importable_from_minitfm_exercises():
    assert set(CASES) <= set(ex.CHECKERS)


def test_the_sink_reference_is_the_librarys_sink_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g) for _ in range(3))
    sinks = torch.randn(3, generator=g)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    _, weights = sink_attention(q, k, v, sinks, causal)
    scores = (q @ k.transpose(-1, -2) / 2.0).masked_fill(~causal, float("-inf"))  # scale 4 ** -0.5
    assert_close(_sink_softmax(scores, sinks), weights)
    assert (weights.sum(-1) < 1).all()  # the sink takes a share of every row


def test_the_delta_step_is_one_token_of_the_librarys_recurrence():
    g = torch.Generator().manual_seed(1)
    b, h, dk, dv = 2, 3, 4, 5
    state = torch.randn(b, h, dk, dv, generator=g)
    q, k = torch.randn(b, h, 1, dk, generator=g), torch.randn(b, h, 1, dk, generator=g)
    v = torch.randn(b, h, 1, dv, generator=g)
    decay, beta = -torch.rand(b, h, 1, generator=g), torch.rand(b, h, 1, generator=g)
    want_o, want_s = gated_delta_recurrent(q, k, v, decay, beta, state)
    # the library normalises q and k and scales q by Dk ** -0.5 (with eps 1e-6 inside the root); the step takes them ready
    qn = q[:, :, 0] * torch.rsqrt((q[:, :, 0] ** 2).sum(-1, keepdim=True) + 1e-6) * dk ** -0.5
    kn = k[:, :, 0] * torch.rsqrt((k[:, :, 0] ** 2).sum(-1, keepdim=True) + 1e-6)
    got_o, got_s = _delta_step(state, qn, kn, v[:, :, 0], decay[:, :, 0], beta[:, :, 0])
    assert_close(got_o, want_o[:, :, 0])
    assert_close(got_s, want_s)


def test_each_wrong_step_is_named_by_the_checker():
    for fn, words in CASES["check_gated_delta_step"][1]:
        result = ex.check_gated_delta_step(fn, verbose=False)
        assert not result.passed and words in result.message, result.message
