"""The options of today's open decoders, one at a time: each against its formula, and against the full cache."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from minitfm.config import ModelConfig
from minitfm.layers.attention import scaled_dot_product_attention
from minitfm.layers.blocks import DecoderBlock
from minitfm.layers.feedforward import GeGLU, make_ffn
from minitfm.layers.kv_cache import KVCache, SlidingKVCache
from minitfm.layers.masks import causal_mask, sliding_window_mask
from minitfm.layers.moe import MoEFeedForward
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import OffsetRMSNorm, RMSNorm, make_norm
from minitfm.models import DecoderOnlyLM, EncoderDecoder


def test_offset_rms_norm_is_rms_norm_with_gain_one_plus_w():
    torch.manual_seed(0)
    offset, plain = OffsetRMSNorm(8, eps=1e-6), RMSNorm(8, eps=1e-6)
    assert torch.equal(offset.weight, torch.zeros(8))  # initialised at zero: the gain starts at 1
    with torch.no_grad():
        offset.weight.normal_()
        plain.weight.copy_(1.0 + offset.weight)
    x = torch.randn(3, 5, 8)
    assert torch.equal(offset(x), plain(x))
    assert isinstance(make_norm("rms_offset", 8), OffsetRMSNorm)


@pytest.mark.parametrize("kind, approximate", [("geglu", "none"), ("geglu_tanh", "tanh")])
def test_geglu_is_a_gelu_gate(kind, approximate):
    torch.manual_seed(0)
    ffn = make_ffn(kind, 8, 12, bias=False)
    assert type(ffn) is GeGLU
    x = torch.randn(2, 3, 8)
    want = ffn.down_proj(F.gelu(ffn.gate_proj(x), approximate=approximate) * ffn.up_proj(x))
    assert torch.allclose(ffn(x), want, atol=1e-6)


def test_softcap_caps_the_scores_before_the_mask():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 4) * 4, torch.randn(2, 3, 5, 4) * 4, torch.randn(2, 3, 5, 4)
    mask = causal_mask(5)
    out, weights = scaled_dot_product_attention(q, k, v, mask, softcap=2.0)
    scores = torch.tanh(q @ k.mT / 2.0 / 2.0) * 2.0
    want = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    assert torch.allclose(weights, want, atol=1e-6)
    assert not torch.allclose(out, scaled_dot_product_attention(q, k, v, mask)[0], atol=1e-3)  # it does change them
    with pytest.raises(ValueError, match="softcap needs impl='manual'"):
        scaled_dot_product_attention(q, k, v, mask, softcap=2.0, impl="fused")


@pytest.mark.parametrize("qk_norm", ["head", "all"])
def test_qk_norm_normalises_queries_and_keys_before_attention(qk_norm):
    torch.manual_seed(0)
    attn = MultiHeadAttention(16, 4, 2, bias=False, d_head=6, qk_norm=qk_norm, norm_eps=1e-6)
    assert attn.q_proj.weight.shape == (24, 16) and attn.out_proj.weight.shape == (16, 24)  # H Dh = 24 != D
    with torch.no_grad():
        for p in (attn.q_norm.weight, attn.k_norm.weight):
            p.normal_()
    x = torch.randn(2, 5, 16)

    def rms(t, w):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
    if qk_norm == "all":
        q, k = rms(q, attn.q_norm.weight), rms(k, attn.k_norm.weight)
    q, k, v = (t.view(2, 5, -1, 6).transpose(1, 2) for t in (q, k, v))
    if qk_norm == "head":
        q, k = rms(q, attn.q_norm.weight), rms(k, attn.k_norm.weight)
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 5, 24)
    got, _ = attn(x, mask=causal_mask(5))
    assert torch.allclose(got, attn.out_proj(want), atol=1e-5)


def test_sliding_window_mask_counts_the_query_itself():
    mask = sliding_window_mask(3, 8, window=3)  # queries at positions 5, 6, 7
    for i, q in enumerate(range(5, 8)):
        assert mask[i].tolist() == [q - 3 < j for j in range(8)]
    assert (mask & causal_mask(3, 8)[0]).sum(-1).tolist() == [3, 3, 3]


@pytest.mark.parametrize("placement", ["output", "both"])
def test_sublayer_norm_placements(placement):
    torch.manual_seed(0)
    config = ModelConfig.small_lm(vocab_size=11, d_model=16, n_layers=1, sublayer_norm=placement)
    block = DecoderBlock(config, cross_attention=False).eval()
    with torch.no_grad():
        for name, p in block.named_parameters():
            if "norm" in name:
                p.normal_()
    x = torch.randn(2, 4, 16)
    mask = causal_mask(4)
    h = block.attn_norm(x)  # nn.Identity for "output"
    x1 = x + block.attn_out_norm(block.self_attn(h, mask=mask)[0])
    want = x1 + block.ffn_out_norm(block.ffn(block.ffn_norm(x1)))
    assert torch.allclose(block(x, mask=mask)[0], want, atol=1e-6)
    assert isinstance(block.attn_norm, torch.nn.Identity) == (placement == "output")


def test_moe_without_renormalisation_mixes_with_the_router_probabilities():
    torch.manual_seed(0)
    moe = MoEFeedForward(8, 4, top_k=2, d_ff=6, ffn="swiglu", bias=False, renormalize=False)
    routing = moe.route(torch.randn(10, 8))
    assert torch.equal(routing.weights, routing.probs.topk(2, dim=-1).values)
    assert (routing.weights.sum(-1) < 1).all()
    moe.renormalize = True
    assert torch.allclose(moe.route(torch.randn(10, 8)).weights.sum(-1), torch.ones(10))


def _windowed(**overrides):
    base = dict(vocab_size=31, d_model=16, n_heads=4, n_kv_heads=2, n_layers=3, max_seq_len=64, sliding_window=5,
                sliding_layers=(0, 2))
    return ModelConfig.small_lm(**{**base, **overrides})


@torch.no_grad()
def test_a_bounded_sliding_cache_computes_what_the_full_cache_does():
    torch.manual_seed(0)
    model = DecoderOnlyLM(_windowed()).eval()
    tokens = torch.randint(0, 31, (2, 30))
    key_mask = torch.ones(2, 30, dtype=torch.bool)
    key_mask[1, :3] = False
    results = []
    for bounded in (False, True):
        caches = model.new_caches(2, 40, bounded=bounded)
        steps = [model(tokens[:, :9], caches=caches, key_mask=key_mask[:, :9])]  # a prefill longer than the window
        steps += [model(tokens[:, i:i + 1], caches=caches, key_mask=key_mask[:, :i + 1]) for i in range(9, 30)]
        results.append(torch.cat(steps, 1))
        kinds = [type(c.self_attn) for c in caches]
        assert kinds == ([SlidingKVCache, KVCache, SlidingKVCache] if bounded else [KVCache] * 3)
    assert (results[0] - results[1]).abs().max() < 1e-6  # the same keys, fewer masked columns: rounding only
    assert (results[0] - model(tokens, key_mask=key_mask)).abs().max() < 1e-5
    assert caches[0].self_attn.k.shape[2] == 10 and caches[1].self_attn.k.shape[2] == 40  # 2 W slots, not 40


def test_sliding_cache_holds_the_latest_window_in_order():
    cache = SlidingKVCache(1, 1, 20, 1, window=3)
    for p in range(7):
        k, _ = cache.update(torch.full((1, 1, 1, 1), float(p)), torch.zeros(1, 1, 1, 1))
        assert k.flatten().tolist() == [float(j) for j in range(max(0, p - 2), p + 1)]
    k, _ = cache.update(torch.arange(7.0, 11.0).view(1, 1, 4, 1), torch.zeros(1, 1, 4, 1))
    assert k.flatten().tolist() == [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]  # the held keys, then the new ones
    assert cache.get()[0].flatten().tolist() == [8.0, 9.0, 10.0] and cache.length == 11
    with pytest.raises(ValueError, match="overflow"):
        cache.update(torch.zeros(1, 1, 10, 1), torch.zeros(1, 1, 10, 1))


def test_a_window_wider_than_the_text_changes_nothing():
    torch.manual_seed(0)
    model = DecoderOnlyLM(_windowed(sliding_window=64)).eval()
    plain = DecoderOnlyLM(dataclasses.replace(_windowed(sliding_window=64), sliding_window=None,
                                              sliding_layers=None)).eval()
    plain.load_state_dict(model.state_dict())
    tokens = torch.randint(0, 31, (1, 20))
    assert torch.equal(model(tokens), plain(tokens))
    narrow = DecoderOnlyLM(_windowed()).eval()
    narrow.load_state_dict(model.state_dict())
    assert not torch.allclose(narrow(tokens)[:, 6:], plain(tokens)[:, 6:], atol=1e-4)  # the window does matter


def test_config_places_windows_and_ropes_per_layer():
    c = _windowed(nope_layers=(1,), rope_local_base=100.0)
    assert [c.layer_window(i) for i in range(3)] == [5, None, 5]
    assert [c.layer_rope(i) for i in range(3)] == ["local", None, "local"]
    assert ModelConfig.from_dict(c.to_dict()) == c
    assert ModelConfig.from_dict({**c.to_dict(), "sliding_layers": [0, 2]}).sliding_layers == (0, 2)  # JSON lists


@pytest.mark.parametrize("overrides, error, pattern", [
    (dict(sliding_window=None), ValueError, "sliding_layers=\\(0, 2\\) needs a sliding_window"),
    (dict(sliding_layers=(0, 3)), ValueError, "sliding_layers must be a tuple of layer indices in \\[0, n_layers=3\\)"),
    (dict(nope_layers=(1,), pos="alibi"), ValueError, "need pos='rope'"),
    (dict(norm_first=False, sublayer_norm="both"), ValueError, "Post-LN"),
    (dict(sublayer_norm="after"), ValueError, "sublayer_norm must be one of"),
    (dict(qk_norm="layer"), ValueError, "qk_norm must be one of"),
    (dict(n_experts=2, experts_per_token=3), ValueError, "experts_per_token must be <= n_experts"),
    (dict(rope_scale=2.0, rope_scaling={"kind": "yarn", "factor": 2.0, "original_max_len": 8}), ValueError,
     "not both"),
    (dict(attn_softcap=0.0), ValueError, "attn_softcap"),
    (dict(head_dim=0), ValueError, "head_dim"),
    (dict(qkv_bias="yes"), TypeError, "qkv_bias must be a bool or None"),
])
def test_bad_modern_settings_are_refused(overrides, error, pattern):
    with pytest.raises(error, match=pattern):
        _windowed(**overrides)


def test_the_encoder_decoder_refuses_decoder_only_settings():
    with pytest.raises(ValueError, match="decoder-only models"):
        EncoderDecoder(ModelConfig.tiny(sliding_window=4))


def test_the_repr_shows_the_modern_options_only_when_set():
    plain = repr(ModelConfig.tiny())
    assert "qk_norm" not in plain and "sliding_window" not in plain and plain.endswith("pad_id=0, bos_id=1, eos_id=2)")
    assert "qk_norm='head', sliding_window=4, pad_id=0" in repr(ModelConfig.tiny(qk_norm="head", sliding_window=4))
