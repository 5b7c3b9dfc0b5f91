"""Gated DeltaNet: the chunked form against the recurrent one, both against transformers' torch fallback, the layer
in both projection layouts against ``Qwen3NextGatedDeltaNet`` and ``Qwen3_5GatedDeltaNet`` with the same weights
(a prompt, then token by token with both caches), a left-padded batch against each row alone and against
transformers with the same mask, cached decoding against the full forward, and a cache whose size does not grow
with the length."""
import pytest
import torch
from torch.testing import assert_close

from minitfm.layers.delta_net import (DeltaNetCache, GatedDeltaNet, cache_bytes, gated_delta_chunked,
                                      gated_delta_recurrent, softmax_kv_bytes)


def random_inputs(b=2, h=3, t=13, dk=8, dv=5, dtype=torch.float64):
    """q, k, v and a decay g in [-1.4, -0.05] (weak to strong forgetting), beta in (0, 1)."""
    q, k = torch.randn(b, h, t, dk, dtype=dtype), torch.randn(b, h, t, dk, dtype=dtype)
    v = torch.randn(b, h, t, dv, dtype=dtype)
    g = -torch.empty(b, h, t, dtype=dtype).uniform_(0.05, 1.4)
    beta = torch.rand(b, h, t, dtype=dtype)
    return q, k, v, g, beta


# float64: the two forms differ by rounding only. float32: the triangular solve and the sums over a chunk add a
# few ulps to outputs and states of size ~1 (float32's ulp there is 1.2e-7; 80 random cases stayed under 5e-7);
# 1e-5 leaves a 20x margin and stays far below the effect of a wrong term (dropping beta changes outputs by ~0.1).
TOLERANCE = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1e-5)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("t", [16, 13, 1, 21])  # multiples of the chunk (8) and not; a single token
@pytest.mark.parametrize("with_state", [False, True])
def test_chunked_equals_recurrent_step_by_step(dtype, t, with_state):
    q, k, v, g, beta = random_inputs(t=t, dtype=dtype)
    state = torch.randn(2, 3, 8, 5, dtype=dtype) if with_state else None
    out_rec, state_rec = gated_delta_recurrent(q, k, v, g, beta, state)
    out_chunk, state_chunk = gated_delta_chunked(q, k, v, g, beta, chunk_size=8, state=state)
    assert out_chunk.shape == (2, 3, t, 5) and state_chunk.shape == (2, 3, 8, 5)
    assert_close(out_chunk, out_rec, **TOLERANCE[dtype])  # every position's output, not only the last
    assert_close(state_chunk, state_rec, **TOLERANCE[dtype])


def test_continuing_from_a_state_equals_one_run():
    q, k, v, g, beta = random_inputs(t=23)
    full, final = gated_delta_chunked(q, k, v, g, beta, chunk_size=8)
    first, state = gated_delta_chunked(*(x[:, :, :10] for x in (q, k, v, g, beta)), chunk_size=8)
    rest, state = gated_delta_recurrent(*(x[:, :, 10:] for x in (q, k, v, g, beta)), state=state)
    assert_close(torch.cat([first, rest], dim=2), full, atol=1e-10, rtol=1e-10)
    assert_close(state, final, atol=1e-10, rtol=1e-10)


def test_both_forms_equal_transformers_torch_fallback():
    """Same conventions as transformers: q and k L2-normalised, q scaled by 1/sqrt(Dk), decay before update."""
    from transformers.models.qwen3_next import modeling_qwen3_next as hf

    q, k, v, g, beta = random_inputs(t=21, dtype=torch.float32)
    state = torch.randn(2, 3, 8, 5)
    # transformers takes (B, T, H, .) and (B, T, H)
    args = [x.transpose(1, 2) for x in (q, k, v)] + [g.transpose(1, 2), beta.transpose(1, 2)]
    kwargs = dict(initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)
    ref_rec, ref_rec_state = hf.torch_recurrent_gated_delta_rule(*args[:3], g=args[3], beta=args[4], **kwargs)
    ref_chunk, ref_chunk_state = hf.torch_chunk_gated_delta_rule(*args[:3], g=args[3], beta=args[4], chunk_size=8,
                                                                 **kwargs)
    out_rec, state_rec = gated_delta_recurrent(q, k, v, g, beta, state)
    out_chunk, state_chunk = gated_delta_chunked(q, k, v, g, beta, chunk_size=8, state=state)
    for out, new_state, ref, ref_state in ((out_rec, state_rec, ref_rec, ref_rec_state),
                                           (out_chunk, state_chunk, ref_chunk, ref_chunk_state)):
        assert_close(out, ref.transpose(1, 2), atol=2e-5, rtol=2e-5)
        assert_close(new_state, ref_state, atol=2e-5, rtol=2e-5)


def tiny_config(n_heads, n_key_heads, layout="qwen3_next"):
    from transformers import Qwen3_5TextConfig, Qwen3NextConfig

    shared = dict(hidden_size=32, linear_num_value_heads=n_heads, linear_num_key_heads=n_key_heads,
                  linear_key_head_dim=8, linear_value_head_dim=6, linear_conv_kernel_dim=4, num_hidden_layers=1,
                  layer_types=["linear_attention"], num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                  vocab_size=50, intermediate_size=16, rms_norm_eps=1e-6)
    if layout == "qwen3_5":
        return Qwen3_5TextConfig(**shared)
    return Qwen3NextConfig(**shared, moe_intermediate_size=8, num_experts=2, num_experts_per_tok=1)


def layer_pair(n_heads=4, n_key_heads=2, layout="qwen3_next"):
    """transformers' layer with random weights (float64), and ours with the same state dict."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    reference = Qwen3_5GatedDeltaNet if layout == "qwen3_5" else Qwen3NextGatedDeltaNet
    ref = reference(tiny_config(n_heads, n_key_heads, layout), layer_idx=0).double().eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.3)  # the norm's weight and dt_bias too, not left at ones
    ours = GatedDeltaNet(32, n_heads, n_key_heads, 8, 6, conv_kernel=4, chunk_size=8, layout=layout).double()
    ours.load_state_dict(ref.state_dict())  # strict: the same names and shapes, no reordering
    return ref, ours


LAYOUTS = ["qwen3_next", "qwen3_5"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n_heads,n_key_heads", [(4, 2), (2, 2)])
def test_layer_equals_transformers(layout, n_heads, n_key_heads):
    ref, ours = layer_pair(n_heads, n_key_heads, layout)
    x = torch.randn(2, 21, 32, dtype=torch.float64)
    with torch.no_grad():
        expected = ref(x)
        got = ours(x)
    # transformers' fallback computes the delta rule and the gated norm's statistic in float32 even for float64
    # inputs, so the two agree to float32's precision, not float64's
    assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_the_two_layouts_hold_the_same_numbers_grouped_otherwise():
    """Qwen 3.5's four projections, regrouped into Qwen3-Next's fused ones, give the same layer."""
    _, split = layer_pair(layout="qwen3_5")
    fused = GatedDeltaNet(32, 4, 2, 8, 6, conv_kernel=4, chunk_size=8).double()
    state = {k: v for k, v in split.state_dict().items() if not k.startswith("in_proj")}
    q, k, v = split.in_proj_qkv.weight.split([16, 16, 24])  # (out, D) rows: q, k, v, each head after head
    z = split.in_proj_z.weight
    heads = [t.view(2, -1, 32) for t in (q, k, v, z)]  # (H_k, rows per key head, D): two value heads per key head
    state["in_proj_qkvz.weight"] = torch.cat(heads, dim=1).reshape(-1, 32)  # per key head [q_g, k_g, v_g, z_g]
    b, a = (w.view(2, 2, 32) for w in (split.in_proj_b.weight, split.in_proj_a.weight))
    state["in_proj_ba.weight"] = torch.cat([b, a], dim=1).reshape(-1, 32)
    fused.load_state_dict(state)
    x = torch.randn(2, 13, 32, dtype=torch.float64)
    with torch.no_grad():
        assert_close(fused(x), split(x), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_prompt_then_tokens_with_the_cache_equal_transformers_with_its_cache(layout):
    from transformers import DynamicCache

    ref, ours = layer_pair(layout=layout)
    x = torch.randn(2, 21, 32, dtype=torch.float64)
    ref_cache, cache = DynamicCache(config=tiny_config(4, 2, layout)), ours.new_cache(2)
    with torch.no_grad():
        # a prompt of 9 (the chunked form), then one token at a time (the recurrent form), each step compared
        for start, end in [(0, 9)] + [(t, t + 1) for t in range(9, 21)]:
            assert_close(ours(x[:, start:end], cache), ref(x[:, start:end], cache=ref_cache), atol=1e-5, rtol=1e-5)
    ref_state = ref_cache.get_recurrent_state(0, state_idx=0)  # float32: transformers' fallback keeps it so
    assert_close(cache.state, ref_state.to(cache.state.dtype), atol=1e-5, rtol=1e-5)


def left_padded(lengths, total, d=32):
    """Rows of the given lengths, left-padded to ``total`` with random vectors (not zeros, so a padded position
    that leaked into the state would show), and the (B, total) padding mask, True for real tokens."""
    rows = [torch.randn(1, n, d, dtype=torch.float64) for n in lengths]
    x = torch.randn(len(lengths), total, d, dtype=torch.float64)
    mask = torch.zeros(len(lengths), total, dtype=torch.bool)
    for i, row in enumerate(rows):
        x[i, total - row.shape[1]:], mask[i, total - row.shape[1]:] = row[0], True
    return rows, x, mask


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_left_padded_batch_gives_each_row_what_it_gives_alone(layout):
    _, ours = layer_pair(layout=layout)
    rows, x, mask = left_padded([21, 15, 6], 21)
    nexts = torch.randn(3, 4, 32, dtype=torch.float64)  # four decoding steps after the prompt
    with torch.no_grad():
        cache = ours.new_cache(3)
        batch = ours(x, cache, mask=mask)
        steps = torch.cat([ours(nexts[:, s:s + 1], cache, mask=torch.ones(3, 22 + s)) for s in range(4)], dim=1)
        for i, row in enumerate(rows):
            alone = ours.new_cache(1)
            assert_close(batch[i:i + 1, 21 - row.shape[1]:], ours(row, alone), atol=1e-10, rtol=1e-10)
            after = torch.cat([ours(nexts[i:i + 1, s:s + 1], alone) for s in range(4)], dim=1)
            assert_close(steps[i:i + 1], after, atol=1e-10, rtol=1e-10)  # the cache continues each row alike
        unmasked = ours(x)  # without the mask the padding writes into the state: the short rows differ
    assert (unmasked[2, -6:] - batch[2, -6:]).abs().max() > 1e-3


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_padded_batch_equals_transformers_with_the_same_mask(layout):
    ref, ours = layer_pair(layout=layout)
    _, x, mask = left_padded([21, 15, 6], 21)
    with torch.no_grad():
        expected = ref(x, attention_mask=mask.long())  # transformers' 0/1 mask
        got = ours(x, mask=mask.long())
    assert_close(got, expected, atol=1e-5, rtol=1e-5)  # padded positions too: zero inputs give zero outputs
    assert got[2, :15].abs().max() == 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_follows_transformers(dtype):
    """In bf16/fp16 the decay, the delta rule and the state stay in float32, as in transformers."""
    ref, ours = layer_pair()
    ref, ours = ref.to(dtype), ours.to(dtype)
    x = torch.randn(2, 21, 32).to(dtype)
    with torch.no_grad():
        expected, got = ref(x), ours(x)
        cache = ours.new_cache(2)
        ours(x[:, :9], cache)
    # same operations in the same precision: equal up to a rounding of the half-precision output (1 ulp)
    assert_close(got, expected, atol=1e-2, rtol=1e-2)
    assert cache.state.dtype == torch.float32 and cache.conv.dtype == dtype
    assert cache.nbytes() == cache_bytes(ours, 2, dtype) == 2 * (56 * 3 * 2 + 4 * 8 * 6 * 4)


def test_prefill_then_decoding_with_the_cache_equals_the_full_forward():
    _, ours = layer_pair()
    x = torch.randn(2, 21, 32, dtype=torch.float64)
    with torch.no_grad():
        full = ours(x)
        cache = ours.new_cache(2)
        steps = [ours(x[:, :9], cache)]  # a prompt of 9: the chunked form (one full chunk and one partial)
        steps += [ours(x[:, t:t + 1], cache) for t in range(9, 21)]  # then one token at a time: the recurrent form
    assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=1e-10)
    assert cache.length == 21


def test_the_cache_keeps_its_size_whatever_the_length():
    _, ours = layer_pair()
    sizes = {}
    for t in (3, 40):
        cache = ours.new_cache(2)
        with torch.no_grad():
            ours(torch.randn(2, t, 32, dtype=torch.float64), cache)
            ours(torch.randn(2, 1, 32, dtype=torch.float64), cache)
        sizes[t] = (tuple(cache.conv.shape), tuple(cache.state.shape), cache.nbytes())
    assert sizes[3] == sizes[40] == ((2, 2 * 2 * 8 + 4 * 6, 3), (2, 4, 8, 6), cache_bytes(ours, 2, torch.float64))
    # next to a softmax layer of the same heads, whose KV cache grows with every token
    kv = [softmax_kv_bytes(t, n_kv_heads=4, d_head=8, batch_size=2, dtype=torch.float64) for t in (41, 4)]
    assert kv[0] == 2 * 2 * 41 * 4 * 8 * 8 and kv[0] > kv[1] and cache_bytes(ours, 2, torch.float64) < kv[0]


def test_bad_input_is_named():
    q, k, v, g, beta = random_inputs(t=5)
    with pytest.raises(ValueError, match=r"beta must be \(2, 3, 5\), got \(2, 3, 4\)"):
        gated_delta_recurrent(q, k, v, g, beta[:, :, :4])
    with pytest.raises(ValueError, match=r"state must be \(2, 3, 8, 5\)"):
        gated_delta_chunked(q, k, v, g, beta, state=torch.zeros(2, 3, 5, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match="share one dtype"):
        gated_delta_chunked(q, k, v.float(), g, beta)
    with pytest.raises(TypeError, match="floating-point"):
        gated_delta_recurrent(q, k, v, g, beta.bool())
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        gated_delta_recurrent(q[0], k, v, g, beta)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        gated_delta_chunked(q, k, v, g, beta, chunk_size=0)
    with pytest.raises(ValueError, match="n_heads must be divisible by n_key_heads"):
        GatedDeltaNet(32, 3, 2, 8, 6)
    layer = GatedDeltaNet(32, 4, 2, 8, 6)
    with pytest.raises(ValueError, match=r"\(B, T, D=32\)"):
        layer(torch.randn(2, 5, 16))
    with pytest.raises(TypeError, match="dtype float64"):
        layer(torch.randn(2, 5, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match="cache holds batch size 1, x has 2"):
        layer(torch.randn(2, 5, 32), layer.new_cache(1))
    with pytest.raises(TypeError, match="DeltaNetCache"):
        layer(torch.randn(2, 5, 32), cache={})
    with pytest.raises(ValueError, match=r"mask must be \(B, L\) = \(2, >= 5\), True for real tokens, got \(2, 4\)"):
        layer(torch.randn(2, 5, 32), mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="layout must be one of 'qwen3_next', 'qwen3_5'; got 'qwen3'"):
        GatedDeltaNet(32, 4, 2, 8, 6, layout="qwen3")
    assert isinstance(layer.new_cache(2), DeltaNetCache)
