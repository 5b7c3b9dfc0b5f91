"""Multi-head latent attention (MLA) against transformers' DeepseekV3Attention, its latent cache, and the
absorbed path against the plain one."""
import pytest
import torch
from torch.testing import assert_close

from minitfm.layers.kv_cache import KVCache
from minitfm.layers.latent_attention import (DEEPSEEK_NAMES, LatentAttention, LatentKVCache, gqa_cache_bytes_per_token,
                                             mla_cache_bytes_per_token, mla_softmax_scale)
from minitfm.layers.rope_scaling import RopeScaling

DIMS = dict(kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10)  # all different: a mix-up fails
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 1.0}  # mscale != mscale_all_dim:
# YaRN's factor on q and k is then not 1, so the rotation's magnitude and the softmax scale are both exercised.


def make(q_lora_rank=16, **options):
    torch.manual_seed(0)
    return LatentAttention(32, 4, q_lora_rank=q_lora_rank, **DIMS, **options).double().eval()


def transformers_pair(q_lora_rank, interleave, yarn):
    """A tiny DeepseekV3Attention with random weights, and a LatentAttention holding the same weights."""
    from transformers import DeepseekV3Config  # requirements.txt installs it: a missing one fails, never skips
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding
    rope = YARN if yarn else {"rope_type": "default", "rope_theta": 10000.0}
    config = DeepseekV3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=q_lora_rank,
                              rope_interleave=interleave, rope_parameters=rope, attention_bias=True,
                              max_position_embeddings=64, **DIMS)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    ref = DeepseekV3Attention(config, layer_idx=0).double().eval()
    with torch.no_grad():
        for p in ref.parameters():  # norm gains and biases too, so that none is left at an identity value
            p.normal_(std=0.3)
    scaling = RopeScaling("yarn", 4.0, 16, mscale=0.707, mscale_all_dim=1.0) if yarn else None
    ours = make(q_lora_rank, bias=True, rope_layout="interleaved" if interleave else "halves", rope_scaling=scaling)
    ours.load_state_dict({DEEPSEEK_NAMES[k.split(".")[0]] + k[k.index("."):]: v for k, v in ref.state_dict().items()})
    return ref, ours, DeepseekV3RotaryEmbedding(config).double()


@pytest.mark.parametrize("yarn", [False, True])
@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("q_lora_rank", [16, None])
def test_matches_transformers_deepseek_v3_attention(q_lora_rank, interleave, yarn):
    ref, ours, rotary = transformers_pair(q_lora_rank, interleave, yarn)
    x = torch.randn(2, 7, 32, dtype=torch.float64)
    keep = torch.ones(2, 7, dtype=torch.bool)
    keep[1, 5:] = False  # right padding: every query still sees key 0, so no row is empty
    allowed = torch.ones(7, 7, dtype=torch.bool).tril()[None, None] & keep[:, None, None, :]
    additive = torch.zeros(2, 1, 7, 7, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    with torch.no_grad():
        expected, _ = ref(x, rotary(x, torch.arange(7)[None].expand(2, 7)), additive)
        out, _ = ours(x, key_padding_mask=keep)
    assert ours.scale == pytest.approx(ref.scaling, rel=1e-15)
    # transformers' RMSNorm and cos/sin run in float32 even for float64 inputs: about 1e-7 apart.
    assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_softmax_scale_matches_transformers_yarn_mscale_for_deepseek_v3():
    from transformers.modeling_rope_utils import yarn_apply_mscale
    v3 = RopeScaling("yarn", 40.0, 4096, mscale=1.0, mscale_all_dim=1.0)  # DeepSeek-V3's config.json
    expected = yarn_apply_mscale({"rope_type": "yarn", "factor": 40.0, "mscale_all_dim": 1.0}, 192 ** -0.5)
    assert mla_softmax_scale(192, v3) == pytest.approx(expected, rel=1e-15)
    assert mla_softmax_scale(192, v3) > 1.5 * 192 ** -0.5  # (0.1 ln 40 + 1)^2 = 1.86: the adjustment is applied
    assert mla_softmax_scale(192) == 192 ** -0.5


def decode(attn, x, prefill, key_padding_mask=None):
    """Prefill ``prefill`` tokens into a fresh cache, then feed the rest one token at a time."""
    cache = attn.new_cache(x.shape[0], x.shape[1] + 2)
    outs = []
    for start, stop in [(0, prefill)] + [(t, t + 1) for t in range(prefill, x.shape[1])]:
        keep = None if key_padding_mask is None else key_padding_mask[:, :stop]
        outs.append(attn(x[:, start:stop], cache=cache, key_padding_mask=keep)[0])
    return torch.cat(outs, dim=1), cache


@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("q_lora_rank", [16, None])
def test_cached_decoding_equals_the_full_forward(q_lora_rank, absorb):
    attn = make(q_lora_rank, absorb=absorb)
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    keep = torch.ones(2, 8, dtype=torch.bool)
    keep[0, 1] = False  # a padded key in the prefill must stay masked during the decode steps
    with torch.no_grad():
        full, _ = attn(x, key_padding_mask=keep)
        stepped, cache = decode(attn, x, prefill=3, key_padding_mask=keep)
    assert cache.length == 8
    assert_close(stepped, full, atol=1e-12, rtol=1e-12)


def test_future_tokens_do_not_change_past_outputs():
    attn = make()
    x = torch.randn(1, 6, 32, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 32, dtype=torch.float64)
    with torch.no_grad():
        a, b = attn(x)[0], attn(changed)[0]
    assert_close(a[:, :4], b[:, :4], atol=0, rtol=0)
    assert (a[:, 4:] - b[:, 4:]).abs().max() > 1e-3


@pytest.mark.parametrize("dtype, tol", [
    (torch.float64, 1e-10),
    # float32: the two paths multiply the same numbers in another order (W_UK^T q . c against q . W_UK c); each
    # dot product sums a few dozen terms rounded at 6e-8 each, so outputs of size ~1 differ by some 1e-7 (2e-7
    # over 5 seeds on one CPU); 1e-5 leaves room for other BLAS orders and still fails on any real mistake.
    (torch.float32, 1e-5),
])
def test_absorbed_equals_plain_for_prefill_and_decode(dtype, tol):
    plain = make(16).to(dtype)
    absorbed = make(16, absorb=True).to(dtype)
    absorbed.load_state_dict(plain.state_dict())
    x = torch.randn(2, 9, 32, dtype=dtype)
    with torch.no_grad():
        out_plain, cache_plain = decode(plain, x, prefill=4)
        out_absorbed, cache_absorbed = decode(absorbed, x, prefill=4)
        _, w_plain = plain(x, need_weights=True)
        _, w_absorbed = absorbed(x, need_weights=True)
    assert_close(out_absorbed, out_plain, atol=tol, rtol=tol)
    assert_close(w_absorbed, w_plain, atol=tol, rtol=tol)  # the same attention pattern, not only the same output
    assert_close(cache_absorbed.latent, cache_plain.latent, atol=0, rtol=0)  # one cache serves both paths


def test_cache_holds_only_the_normed_latent_and_the_rope_key():
    attn = make(16)
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        _, cache = decode(attn, x, prefill=5)
        latent, k_rope = attn.kv_down_proj(x).split([12, 6], dim=-1)
        latent = attn.kv_norm(latent)
        k_rope = attn.rope(k_rope)
    # (B, T_max, R) and (B, T_max, Dr): per-head keys would be (B, H, T, Dn + Dr) = (2, 4, 7, 14)
    assert (tuple(cache.latent.shape), tuple(cache.k_rope.shape)) == ((2, 7, 12), (2, 7, 6))
    assert_close(cache.latent[:, :5], latent, atol=1e-14, rtol=0)  # after the norm, not before it
    assert_close(cache.k_rope[:, :5], k_rope, atol=1e-14, rtol=0)  # rotated once, at its own position
    assert all(t.shape[-1] in (12, 6) for t in vars(cache).values() if isinstance(t, torch.Tensor))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_cache_bytes_follow_the_formula_and_beat_the_kv_cache(dtype):
    size = torch.tensor([], dtype=dtype).element_size()
    cache = LatentKVCache(3, 10, 12, 6, dtype=dtype)
    assert cache.bytes_per_token() == mla_cache_bytes_per_token(12, 6, size) == 18 * size
    assert cache.nbytes == 3 * 10 * 18 * size
    kv = KVCache(3, 4, 10, 14, dtype=dtype)  # what multi-head attention with H_kv = 4 heads of Dh = 14 stores
    assert (kv.k.nbytes + kv.v.nbytes) // 30 == gqa_cache_bytes_per_token(4, 14, size) == 2 * 4 * 14 * size
    # DeepSeek-V3 (R = 512, Dr = 64) against 128 heads of 128 in bf16: 1152 bytes against 65536, per token and layer.
    assert (mla_cache_bytes_per_token(512, 64), gqa_cache_bytes_per_token(128, 128)) == (1152, 65536)


def test_fused_path_equals_manual():
    manual, fused = make(), make(impl="fused")
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    keep = torch.tensor([[True] * 5, [True, True, True, True, False]])
    with torch.no_grad():
        assert_close(fused(x, key_padding_mask=keep)[0], manual(x, key_padding_mask=keep)[0], atol=1e-12, rtol=1e-12)


def test_errors_name_what_was_expected():
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even"):
        LatentAttention(32, 4, kv_lora_rank=12, qk_nope_head_dim=8, qk_rope_head_dim=5, v_head_dim=10)
    with pytest.raises(ValueError, match="kv_lora_rank"):
        LatentAttention(32, 4, kv_lora_rank=0, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10)
    with pytest.raises(ValueError, match="q_lora_rank"):
        LatentAttention(32, 4, q_lora_rank=-1, **DIMS)
    with pytest.raises(ValueError, match="rope_layout"):
        LatentAttention(32, 4, rope_layout="rotate_half", **DIMS)
    with pytest.raises(TypeError, match="absorb must be a bool"):
        LatentAttention(32, 4, absorb="yes", **DIMS)
    attn = make()
    x = torch.randn(2, 4, 32, dtype=torch.float64)
    with pytest.raises(TypeError, match="key_padding_mask must be boolean"):
        attn(x, key_padding_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match=r"\(B, T_k\) = \(2, 4\)"):
        attn(x, key_padding_mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="float32 but LatentAttention's weights are float64"):
        attn(x.float())
    with pytest.raises(TypeError, match="cache must be a LatentKVCache"):
        attn(x, cache=KVCache(2, 4, 8, 14, dtype=torch.float64))
    with pytest.raises(TypeError, match="the cache holds torch.float32"):
        attn(x, cache=attn.new_cache(2, 8, dtype=torch.float32))
    with pytest.raises(ValueError, match=r"cache holds latent \(B, T, 7\)"):
        attn(x, cache=LatentKVCache(2, 8, 7, 6, dtype=torch.float64))
    with pytest.raises(ValueError, match="latent cache overflow"):
        attn(x, cache=attn.new_cache(2, 3))
    with pytest.raises(ValueError, match="positions must have T=4"):
        attn(x, positions=torch.arange(3))

