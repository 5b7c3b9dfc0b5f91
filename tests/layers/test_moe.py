import pytest
import torch
from torch.testing import assert_close
from torch.utils.flop_counter import FlopCounterMode

from minitfm.layers.moe import MoEFeedForward, expert_load, load_balancing_loss


def test_one_expert_top1_equals_that_expert():
    moe = MoEFeedForward(16, n_experts=1, top_k=1)
    x = torch.randn(2, 5, 16)
    out, routing = moe(x)
    assert_close(out, moe.experts[0](x))
    assert_close(routing.weights, torch.ones(10, 1))


def test_output_matches_per_token_loop():
    moe = MoEFeedForward(8, n_experts=4, top_k=2, d_ff=16)
    x = torch.randn(3, 4, 8)
    out, routing = moe(x)
    tokens = x.reshape(-1, 8)
    probs = torch.softmax(tokens @ moe.router.weight.T, dim=-1)
    expected = []
    for n, token in enumerate(tokens):
        top = probs[n].topk(2)
        w = top.values / top.values.sum()
        expected.append(sum(w[j] * moe.experts[int(top.indices[j])](token) for j in range(2)))
    assert_close(out.reshape(-1, 8), torch.stack(expected))
    assert_close(routing.probs, probs)


def test_topk_weights_sum_to_one_and_indices_are_distinct():
    moe = MoEFeedForward(8, n_experts=6, top_k=3)
    routing = moe.route(torch.randn(20, 8))
    assert routing.weights.shape == (20, 3) and routing.indices.shape == (20, 3)
    assert_close(routing.weights.sum(-1), torch.ones(20))
    assert all(len(set(row.tolist())) == 3 for row in routing.indices)


def test_expert_load_counts_slots():
    indices = torch.tensor([[0, 1], [0, 2], [0, 1]])
    assert_close(expert_load(indices, 4), torch.tensor([3, 2, 1, 0]) / 6.0)


def test_load_balancing_loss_is_one_for_uniform_and_larger_when_imbalanced():
    n, e = 8, 4
    uniform_probs = torch.full((n, e), 1 / e)
    balanced = torch.arange(n)[:, None] % e
    assert_close(load_balancing_loss(uniform_probs, balanced), torch.tensor(1.0))
    collapsed = torch.zeros(n, 1, dtype=torch.long)
    collapsed_probs = torch.tensor([[0.7, 0.1, 0.1, 0.1]]).expand(n, e)
    assert_close(load_balancing_loss(collapsed_probs, collapsed), torch.tensor(4 * 0.7))
    torch.manual_seed(0)
    for _ in range(20):  # router probabilities that agree with the dispatch: loss = E * |f|^2 >= 1
        indices = torch.randint(0, e, (n, 1))
        f = expert_load(indices, e)
        loss = load_balancing_loss(f.expand(n, e), indices)
        assert_close(loss, e * (f ** 2).sum())
        assert loss >= 1.0 - 1e-6
        assert (loss > 1.0 + 1e-6) == (f.max() > 1 / e)


def test_load_balancing_loss_gradient_pushes_away_from_overloaded_expert():
    logits = torch.zeros(6, 3, requires_grad=True)
    indices = torch.zeros(6, 1, dtype=torch.long)  # everything went to expert 0
    load_balancing_loss(torch.softmax(logits, -1), indices).backward()
    assert (logits.grad[:, 0] > 0).all() and (logits.grad[:, 1:] < 0).all()


def test_parameter_counts_and_counted_flops():
    moe = MoEFeedForward(8, n_experts=4, top_k=2, d_ff=32)
    total, active = moe.parameter_counts()
    per_expert = 8 * 32 + 32 + 32 * 8 + 8
    assert total == sum(p.numel() for p in moe.parameters()) == 8 * 4 + 4 * per_expert
    assert active == 8 * 4 + 2 * per_expert
    with FlopCounterMode(display=False) as counter:
        moe(torch.randn(1, 10, 8))
    # router 2*N*D*E plus k experts per token, each 2 matmuls of 2*D*F
    assert counter.get_total_flops() == 2 * 10 * 8 * 4 + 10 * 2 * (2 * 2 * 8 * 32)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="top_k must be <= n_experts, got top_k=3, n_experts=2"):
        MoEFeedForward(8, n_experts=2, top_k=3)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D=8\)"):
        MoEFeedForward(8, 2)(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="ffn must be one of"):
        MoEFeedForward(8, 2, ffn="tanh")


def test_moe_runs_under_bfloat16_autocast():
    # under autocast the experts return bf16 while the output buffer is float32: index_add_ refused them
    torch.manual_seed(0)
    moe = MoEFeedForward(8, n_experts=4, top_k=2)
    x = torch.randn(2, 5, 8)
    reference, _ = moe(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = moe(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, reference, atol=5e-2, rtol=5e-2)


def test_the_router_in_bfloat16_takes_its_softmax_in_float32_as_transformers_does():
    """Library review L1: Mixtral and Qwen3-MoE in transformers route with softmax(logits, dtype=float32), top-k
    and renormalisation in float32, then round the weights to the activations' dtype."""
    torch.manual_seed(0)
    moe = MoEFeedForward(32, 8, 2, d_ff=16, ffn="swiglu", bias=False).to(torch.bfloat16)
    tokens = torch.randn(256, 32).to(torch.bfloat16)
    routing = moe.route(tokens)
    probs = torch.softmax(moe.router(tokens), dim=-1, dtype=torch.float32)
    top, indices = probs.topk(2, dim=-1)
    assert torch.equal(routing.indices, indices)
    assert torch.equal(routing.weights, (top / top.sum(-1, keepdim=True)).to(torch.bfloat16))
