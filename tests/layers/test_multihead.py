import pytest
import torch
from torch import nn
from torch.testing import assert_close

from minitfm import KVCache, MultiHeadAttention, RotaryEmbedding, alibi_bias, causal_mask


def copy_into_torch_mha(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(mha.d_model, mha.n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref.eval()


def test_self_attention_matches_torch_multihead_attention_with_causal_mask():
    mha = MultiHeadAttention(32, 4).eval()
    ref = copy_into_torch_mha(mha)
    x = torch.randn(2, 6, 32)
    out, weights = mha(x, mask=causal_mask(6), need_weights=True)
    # nn.MultiheadAttention's boolean mask means the opposite: True = NOT allowed
    ref_out, ref_weights = ref(x, x, x, attn_mask=~causal_mask(6)[0], average_attn_weights=False)
    assert_close(out, ref_out)
    assert_close(weights, ref_weights)


def test_cross_attention_with_padding_matches_torch():
    mha = MultiHeadAttention(16, 2).eval()
    ref = copy_into_torch_mha(mha)
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    out, _ = mha(x, memory, mask=keep[:, None, None, :])
    ref_out, _ = ref(x, memory, memory, key_padding_mask=~keep)
    assert_close(out, ref_out)


def test_fused_path_matches_manual():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    manual, _ = mha(x, mask=causal_mask(5))
    mha.impl = "fused"
    fused, weights = mha(x, mask=causal_mask(5))
    assert_close(fused, manual)
    assert weights is None


def test_parameter_count_equals_one_big_head():
    many = MultiHeadAttention(64, 8)
    one = MultiHeadAttention(64, 1)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(many) == count(one) == 4 * (64 * 64 + 64)


def test_grouped_heads_share_keys_and_values():
    gqa = MultiHeadAttention(32, 8, n_kv_heads=2, bias=False)
    assert gqa.k_proj.weight.shape == (2 * 4, 32)
    x = torch.randn(1, 4, 32)
    # query heads 0-3 read key head 0: give them identical queries and their maps must match
    with torch.no_grad():
        gqa.q_proj.weight.view(8, 4, 32)[:4] = gqa.q_proj.weight.view(8, 4, 32)[0]
    _, weights = gqa(x, need_weights=True)
    assert_close(weights[:, 0], weights[:, 3])
    assert not torch.allclose(weights[:, 0], weights[:, 4])


def test_multi_query_equals_full_heads_with_repeated_kv_weights():
    mqa = MultiHeadAttention(16, 4, n_kv_heads=1).eval()
    full = MultiHeadAttention(16, 4).eval()
    with torch.no_grad():
        full.q_proj.load_state_dict(mqa.q_proj.state_dict())
        full.out_proj.load_state_dict(mqa.out_proj.state_dict())
        for name in ("k_proj", "v_proj"):
            src, dst = getattr(mqa, name), getattr(full, name)
            dst.weight.copy_(src.weight.repeat(4, 1))
            dst.bias.copy_(src.bias.repeat(4))
    x = torch.randn(2, 5, 16)
    assert_close(mqa(x)[0], full(x)[0])


def test_causality_future_tokens_do_not_change_past_outputs():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(1, 6, 16)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 16)
    a, _ = mha(x, mask=causal_mask(6))
    b, _ = mha(changed, mask=causal_mask(6))
    assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


@pytest.mark.parametrize("scheme", ["none", "rope", "alibi"])
def test_cached_step_by_step_equals_full_pass(scheme):
    mha = MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    rope = RotaryEmbedding(4) if scheme == "rope" else None
    x = torch.randn(2, 6, 16)
    full_bias = alibi_bias(4, 6) if scheme == "alibi" else None
    full, _ = mha(x, mask=causal_mask(6), rope=rope, bias=full_bias)
    cache, steps = KVCache(2, 2, 8, 4), []
    for t in range(6):
        bias = alibi_bias(4, 1, t + 1) if scheme == "alibi" else None
        out, _ = mha(x[:, t:t + 1], mask=causal_mask(1, t + 1), rope=rope, bias=bias, cache=cache)
        steps.append(out)
    assert_close(torch.cat(steps, dim=1), full)


def test_cross_attention_cache_is_filled_once_and_reused():
    mha = MultiHeadAttention(16, 2).eval()
    memory = torch.randn(1, 5, 16)
    cache = KVCache(1, 2, 5, 8)
    first, _ = mha(torch.randn(1, 1, 16), memory, cache=cache)
    assert cache.length == 5
    x = torch.randn(1, 1, 16)
    reused, _ = mha(x, memory * 0, cache=cache)  # the memory argument is ignored once cached
    assert_close(reused, mha(x, memory)[0])
    assert cache.length == 5


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((30, 4), {}, r"d_model must be divisible by n_heads.*d_model=30, n_heads=4 \(d_model / n_heads = 7.50\)"),
        ((32, 8), {"n_kv_heads": 3}, "n_heads must be divisible by n_kv_heads, got n_heads=8, n_kv_heads=3"),
        ((32, 0), {}, "n_heads must be >= 1, got 0"),
    ],
)
def test_bad_construction(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(*args, **kwargs)


def test_bad_inputs():
    mha = MultiHeadAttention(16, 4)
    with pytest.raises(ValueError, match=r"x must have 3 dimensions, got 2 with shape \(5, 16\)"):
        mha(torch.randn(5, 16))
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D=16\), got \(2, 5, 12\)"):
        mha(torch.randn(2, 5, 12))
    with pytest.raises(ValueError, match=r"mask must broadcast to .*\(2, 4, 5, 5\), got \(2, 3, 5\)"):
        mha(torch.randn(2, 5, 16), mask=torch.ones(2, 3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not apply to cross-attention"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 3, 16), rope=RotaryEmbedding(4))


def test_memory_with_another_batch_size_raises_a_clear_error():
    mha = MultiHeadAttention(16, 4)
    for b_x, b_memory in [(1, 3), (2, 3)]:  # a reshape error deep inside, or a broadcasting one
        with pytest.raises(ValueError, match=rf"memory must have batch size 1 or B={b_x} like x, got {b_memory}"):
            mha(torch.randn(b_x, 2, 16), torch.randn(b_memory, 4, 16))
    out, _ = mha(torch.randn(3, 2, 16), torch.randn(1, 4, 16))  # one memory shared by the batch still works
    assert out.shape == (3, 2, 16)


def test_query_temperature_scales_the_queries_by_position_and_agrees_with_the_cache():
    """Ministral 3 (issue 48): queries at position p times 1 + beta log(1 + floor(p / L)), cached or not."""
    torch.manual_seed(0)
    hot = MultiHeadAttention(16, 4, 2, bias=False, temperature=(0.5, 4)).eval()
    plain = MultiHeadAttention(16, 4, 2, bias=False).eval()
    plain.load_state_dict(hot.state_dict())
    x, rope = torch.randn(2, 12, 16), RotaryEmbedding(4)
    full, _ = hot(x, mask=causal_mask(12, 12), rope=rope)
    cold, _ = plain(x, mask=causal_mask(12, 12), rope=rope)
    assert_close(full[:, :3], cold[:, :3])  # floor(p / 4) = 0: tau = 1
    assert (full[:, 4:] - cold[:, 4:]).abs().max() > 1e-3
    q = hot.project(x, hot.q_proj, None, 4)
    tau = 1 + 0.5 * torch.log(1 + torch.floor(torch.arange(12) / 4))
    assert_close(hot.temper(q, 0, None), q * tau[:, None])
    cache = KVCache(2, 2, 12, 4)
    steps = [hot(x[:, i:i + 1], rope=rope, cache=cache)[0] for i in range(12)]
    assert_close(torch.cat(steps, dim=1), full)
    for bad in [0.5, (0.5,), ("a", 4)]:
        with pytest.raises((TypeError, ValueError), match="temperature"):
            MultiHeadAttention(16, 4, temperature=bad)


def test_sink_logits_join_the_softmax_and_agree_with_the_cache():
    """gpt-oss (issue 48): a sink logit per head takes weight from every key; a very low sink is plain attention."""
    torch.manual_seed(0)
    sink = MultiHeadAttention(16, 4, 2, bias=True, sinks=True).eval()
    plain = MultiHeadAttention(16, 4, 2, bias=True).eval()
    plain.load_state_dict({k: v for k, v in sink.state_dict().items() if k != "sinks"})
    x, rope = torch.randn(2, 10, 16), RotaryEmbedding(4)
    with torch.no_grad():
        sink.sinks.fill_(-1e4)
        assert_close(sink(x, rope=rope, causal=True)[0], plain(x, rope=rope, causal=True)[0])
        sink.sinks.copy_(torch.tensor([2.0, -1.0, 0.5, 0.0]))
        full, weights = sink(x, rope=rope, causal=True, need_weights=True)
        assert (weights.sum(-1) < 1).all() and (weights.triu(1) == 0).all()  # the sink's share; causal kept
        cache = KVCache(2, 2, 10, 4)
        steps = [sink(x[:, i:i + 1], rope=rope, cache=cache)[0] for i in range(10)]
    assert_close(torch.cat(steps, dim=1), full)


def test_a_narrower_rope_turns_the_first_features_of_each_head_only():
    """Partial RoPE (GLM-4.5, MiniMax-M2; issue 48): the features past rope.d_head pass unrotated."""
    x = torch.randn(2, 3, 5, 8)
    out = MultiHeadAttention.rotate(RotaryEmbedding(4), x, 0, None)
    assert torch.equal(out[..., 4:], x[..., 4:])
    assert_close(out[..., :4], RotaryEmbedding(4)(x[..., :4].contiguous()))
    assert not torch.allclose(out[:, :, 1:, :4], x[:, :, 1:, :4])
