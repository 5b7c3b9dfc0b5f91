"""gpt-oss's sink attention and Llama 4's chunked mask, attention temperature and weightless QK-norm, each against
transformers: the sink function against gpt-oss's ``eager_attention_forward`` with causal, sliding-window and
padding masks; the chunked mask against transformers' mask function and ``create_chunked_causal_mask``; the
temperature and the norm inside ``Llama4TextAttention`` on a tiny config, NoPE and RoPE layers."""
import pytest
import torch
from torch.testing import assert_close

from minitfm.layers._attention_variants import (attention_temperature, chunked_causal_mask, count_left_padding,
                                                sink_attention, weightless_qk_norm)
from minitfm.layers.attention import scaled_dot_product_attention
from minitfm.layers.masks import causal_mask, sliding_window_mask


def gpt_oss_reference(q, k, v, sinks, mask):
    """transformers' gpt-oss eager attention with our boolean mask as its additive one (0 or the dtype's min)."""
    from types import SimpleNamespace

    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    module = SimpleNamespace(sinks=sinks, num_key_value_groups=q.shape[1] // k.shape[1], training=False)
    additive = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, torch.finfo(q.dtype).min)
    out, weights = eager_attention_forward(module, q, k, v, additive, scaling=q.shape[-1] ** -0.5)
    return out.transpose(1, 2), weights  # transformers returns (B, T_q, H, Dv)


def gpt_oss_mask(window, padding):
    """transformers' own mask for a gpt-oss full (window None) or sliding layer, as booleans."""
    from transformers import GptOssConfig
    from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

    config = GptOssConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, vocab_size=50,
                          sliding_window=window or 128, num_hidden_layers=2, intermediate_size=16,
                          num_local_experts=2, num_experts_per_tok=1)
    config._attn_implementation = "eager"  # an additive float mask: 0 where a key is visible
    make = create_causal_mask if window is None else create_sliding_window_causal_mask
    t = padding.shape[1]
    return make(config=config, inputs_embeds=torch.zeros(padding.shape[0], t, 32, dtype=torch.float64),
                attention_mask=padding, cache=None, position_ids=torch.arange(t)[None]) == 0


def random_qkv(b=2, h=4, h_kv=2, t=11, dh=8, dv=6):
    q = torch.randn(b, h, t, dh, dtype=torch.float64)
    return q, torch.randn(b, h_kv, t, dh, dtype=torch.float64), torch.randn(b, h_kv, t, dv, dtype=torch.float64)


@pytest.mark.parametrize("window", [None, 4])
def test_sink_attention_equals_gpt_oss(window):
    q, k, v = random_qkv()
    sinks = torch.randn(4, dtype=torch.float64) * 2
    mask = causal_mask(11)[None]  # (1, 1, T, T)
    if window is not None:
        mask = mask & sliding_window_mask(11, 11, window)
    padding = torch.ones(2, 1, 1, 11, dtype=torch.bool)
    padding[1, ..., :3] = False  # row 1 left-padded by 3: its first three queries see no key at all
    mask = mask & padding  # (2, 1, T, T)
    assert torch.equal(mask, gpt_oss_mask(window, padding[:, 0, 0].long()))  # the masks gpt-oss's layers get
    out, weights = sink_attention(q, k, v, sinks, mask)
    ref_out, ref_weights = gpt_oss_reference(q, k, v, sinks, mask.expand(2, 4, 11, 11))
    assert_close(out, ref_out, atol=1e-6, rtol=1e-6)
    assert_close(weights, ref_weights, atol=1e-6, rtol=1e-6)
    assert out[1, :, :3].abs().max() == 0  # a query that sees nothing gives zeros, not NaN
    plain, _ = scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), mask)
    assert (out - plain).abs().max() > 1e-2  # the sinks matter here: these are not plain attention's outputs


def test_a_sink_takes_its_share_of_the_softmax_and_no_value():
    q, k, v = random_qkv(h=2, h_kv=2)
    mask = causal_mask(11)[None]
    scores = (q @ k.transpose(-1, -2)) / 8 ** 0.5
    sinks = torch.tensor([0.0, 1.5], dtype=torch.float64)
    _, weights = sink_attention(q, k, v, sinks, mask)
    visible = scores.masked_fill(~mask, float("-inf")).exp().sum(-1)  # (B, H, T_q): sum_j exp(s_ij)
    share = sinks.exp()[:, None] / (sinks.exp()[:, None] + visible)  # exp(z) / (exp(z) + sum_j exp(s_ij))
    assert_close(1 - weights.sum(-1), share, atol=1e-12, rtol=1e-12)
    # a very low sink is plain attention; a very high one takes all the weight, and the output goes to zero
    low, _ = sink_attention(q, k, v, torch.full((2,), -1e4, dtype=torch.float64), mask)
    assert_close(low, scaled_dot_product_attention(q, k, v, mask)[0], atol=1e-12, rtol=1e-12)
    high, _ = sink_attention(q, k, v, torch.full((2,), 50.0, dtype=torch.float64), mask)
    assert high.abs().max() < 1e-15


@pytest.mark.parametrize("t_q,t_k,chunk", [(11, 11, 4), (3, 11, 4), (1, 9, 3), (7, 7, 16), (5, 12, 1)])
def test_chunked_mask_equals_transformers_rule(t_q, t_k, chunk):
    from transformers.masking_utils import chunked_causal_mask_function

    rule = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    q_idx, kv_idx = torch.arange(t_k - t_q, t_k)[:, None], torch.arange(t_k)[None, :]
    expected = rule(torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long), q_idx, kv_idx)
    got = chunked_causal_mask(t_q, t_k, chunk)
    assert got.shape == (t_q, t_k) and torch.equal(got, expected)
    # and it is the causal mask cut at the chunks' borders: query i sees (i mod C) + 1 keys
    assert torch.equal(got.sum(-1), torch.arange(t_k - t_q, t_k) % chunk + 1)


def test_chunked_mask_of_a_left_padded_batch_equals_transformers():
    from transformers import Llama4TextConfig
    from transformers.masking_utils import create_chunked_causal_mask

    config = Llama4TextConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                              num_hidden_layers=2, vocab_size=50, intermediate_size=16, intermediate_size_mlp=16,
                              attention_chunk_size=3)
    config._attn_implementation = "sdpa"  # a boolean mask
    padding = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1, 1], [1] * 10, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]])
    expected = create_chunked_causal_mask(config=config, inputs_embeds=torch.randn(3, 10, 32), attention_mask=padding,
                                          cache=None, position_ids=torch.arange(10)[None])
    left = count_left_padding(padding)
    assert left.tolist() == [2, 0, 5]
    got = chunked_causal_mask(10, 10, 3, left) & padding.bool()[:, None, None, :]  # (B, 1, T, T)
    assert torch.equal(got, expected)
    # row 0's chunks start at its first real token (position 2), not at position 0
    assert got[0, 0, 4, 2:5].tolist() == [True, True, True] and not got[0, 0, 5, 4]


def llama4_attention(layer_idx, **overrides):
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextAttention

    config = Llama4TextConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                              num_hidden_layers=2, no_rope_layers=[0, 1], vocab_size=50, intermediate_size=16,
                              intermediate_size_mlp=16, rms_norm_eps=1e-5, **overrides)
    config._attn_implementation = "eager"
    layer = Llama4TextAttention(config, layer_idx).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.3)
    return config, layer


def our_llama4_attention(layer, x, positions, rope=None, temperature=None, qk_norm_eps=None):
    """The layer rebuilt from its weights with the functions under test; x (B, T, D), positions (T,)."""
    b, t, _ = x.shape
    q, k, v = (proj(x).view(b, t, -1, 8).transpose(1, 2) for proj in (layer.q_proj, layer.k_proj, layer.v_proj))
    if rope is not None:
        q, k = rope(q, positions=positions), rope(k, positions=positions)
    if qk_norm_eps is not None:
        q, k = weightless_qk_norm(q, qk_norm_eps), weightless_qk_norm(k, qk_norm_eps)
    if temperature is not None:
        q = (q * attention_temperature(positions, *temperature)[:, None]).to(q.dtype)  # (B, H, T, Dh) * (T, 1)
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(t))
    return layer.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def additive_causal(t, dtype):
    return torch.zeros(1, 1, t, t, dtype=dtype).masked_fill(~causal_mask(t), torch.finfo(dtype).min)


def test_attention_temperature_equals_llama4_nope_layer():
    """floor_scale 4 and attn_scale 0.5 make the temperature visible within 23 positions (8192 and 0.1 in the
    published configs)."""
    _, layer = llama4_attention(0, attn_temperature_tuning=True, floor_scale=4, attn_scale=0.5)  # 0: NoPE
    layer = layer.double()
    x = torch.randn(2, 23, 32, dtype=torch.float64)
    positions = torch.arange(23)
    with torch.no_grad():
        expected, _ = layer(x, position_embeddings=None, attention_mask=additive_causal(23, torch.float64))
        got = our_llama4_attention(layer, x, positions, temperature=(4, 0.5))
        without = our_llama4_attention(layer, x, positions)
    assert_close(got, expected, atol=1e-10, rtol=1e-10)
    assert (without - expected)[:, 3:].abs().max() > 1e-3 and (without - expected)[:, :2].abs().max() < 1e-12
    tau = attention_temperature(torch.arange(16), floor_scale=4, attn_scale=0.5)
    assert tau[:3].tolist() == [1.0, 1.0, 1.0] and tau.dtype == torch.float32  # 1 before position floor_scale - 1
    assert_close(tau[[3, 7, 11, 15]], 1 + 0.5 * torch.log1p(torch.tensor([1.0, 2.0, 3.0, 4.0])))


def test_weightless_qk_norm_equals_llama4_rope_layer():
    from minitfm.layers.positional import RotaryEmbedding
    from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding, Llama4TextWeightlessRMSNorm

    config, layer = llama4_attention(1, use_qk_norm=True)  # no_rope_layers=[0, 1]: layer 1 uses RoPE
    assert hasattr(layer, "qk_norm") and layer.use_rope
    x = torch.randn(2, 13, 32)
    positions = torch.arange(13)
    rope_theta = config.rope_parameters["rope_theta"]
    with torch.no_grad():
        freqs = Llama4TextRotaryEmbedding(config)(x, positions[None])
        expected, _ = layer(x, position_embeddings=freqs, attention_mask=additive_causal(13, torch.float32))
        rope = RotaryEmbedding(8, base=rope_theta)  # adjacent pairs rotated, as Llama 4's complex form
        got = our_llama4_attention(layer, x, positions, rope=rope, qk_norm_eps=config.rms_norm_eps)
        without = our_llama4_attention(layer, x, positions, rope=rope)
    assert_close(got, expected, atol=1e-5, rtol=1e-5)  # float32, as transformers' RoPE computes
    assert (without - expected).abs().max() > 1e-2
    for dtype in (torch.float32, torch.bfloat16, torch.float16):  # computed in float32, returned in x's dtype
        y = torch.randn(3, 5, 8).to(dtype) * 4
        normed = weightless_qk_norm(y, 1e-5)
        assert normed.dtype == dtype and torch.equal(normed, Llama4TextWeightlessRMSNorm(1e-5)(y))
    assert_close(weightless_qk_norm(y.float(), 0.0).norm(dim=-1), torch.full((3, 5), 8 ** 0.5))  # length sqrt(Dh)


def test_bad_input_is_named():
    q, k, v = random_qkv()
    sinks = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"sinks must hold one logit per query head, shape \(4,\), got \(2,\)"):
        sink_attention(q, k, v, sinks[:2])
    with pytest.raises(ValueError, match="H=4 must divide by the key/value heads H_kv=3"):
        sink_attention(q, torch.randn(2, 3, 11, 8, dtype=torch.float64), torch.randn(2, 3, 11, 6,
                                                                                    dtype=torch.float64), sinks)
    with pytest.raises(ValueError, match=r"k \(B, H_kv, T_k, Dh\)"):
        sink_attention(q, k[..., :4], v, sinks)
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        sink_attention(q[0], k, v, sinks)
    with pytest.raises(TypeError, match="mask must be a boolean tensor"):
        sink_attention(q, k, v, sinks, causal_mask(11).float())
    with pytest.raises(ValueError, match=r"mask must broadcast to the scores' shape \(B, H, T_q, T_k\)"):
        sink_attention(q, k, v, sinks, causal_mask(10))
    with pytest.raises(TypeError, match="dtypes must match"):
        sink_attention(q.float(), k, v, sinks)
    with pytest.raises(ValueError, match="needs t_k >= t_q"):
        chunked_causal_mask(5, 4, 2)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        chunked_causal_mask(4, 4, 0)
    with pytest.raises(TypeError, match="left_padding must hold integer counts"):
        chunked_causal_mask(4, 4, 2, torch.zeros(2))
    with pytest.raises(TypeError, match="padding_mask must be bool or integer"):
        count_left_padding(torch.ones(2, 4))
    with pytest.raises(TypeError, match="positions must hold integer positions"):
        attention_temperature(torch.arange(4.0), 8192, 0.1)
    with pytest.raises(ValueError, match="floor_scale must be > 0"):
        attention_temperature(torch.arange(4), 0, 0.1)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        weightless_qk_norm(torch.arange(4))
