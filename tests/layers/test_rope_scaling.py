"""RoPE scaling (Llama 3, YaRN) against transformers' own frequency functions, and its place in RotaryEmbedding."""
from __future__ import annotations

import math

import pytest
import torch

from minitfm.layers.positional import RotaryEmbedding
from minitfm.layers.rope_scaling import RopeScaling, llama3_inv_freq, scaled_inv_freq

D_HEAD, BASE = 64, 500000.0

CASES = [  # (our RopeScaling, transformers' rope_parameters)
    (RopeScaling("llama3", 8.0, 8192), dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                             original_max_position_embeddings=8192)),
    (RopeScaling("llama3", 32.0, 128, low_freq_factor=2.0, high_freq_factor=8.0),
     dict(rope_type="llama3", factor=32.0, low_freq_factor=2.0, high_freq_factor=8.0,
          original_max_position_embeddings=128)),
    (RopeScaling("yarn", 4.0, 4096), dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=4096)),
    (RopeScaling("yarn", 16.0, 256, beta_fast=16.0, beta_slow=2.0, truncate=False),
     dict(rope_type="yarn", factor=16.0, original_max_position_embeddings=256, beta_fast=16.0, beta_slow=2.0,
          truncate=False)),
    (RopeScaling("yarn", 40.0, 4096, mscale=1.0, mscale_all_dim=0.707),
     dict(rope_type="yarn", factor=40.0, original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=0.707)),
    (RopeScaling("yarn", 4.0, 4096, attention_factor=1.5),
     dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=4096, attention_factor=1.5)),
]


@pytest.mark.parametrize("ours, theirs", CASES, ids=[f"{c[0].kind}-{i}" for i, c in enumerate(CASES)])
def test_frequencies_equal_transformers_to_the_bit(ours, theirs):
    import transformers  # requirements.txt installs it: a missing one fails, never skips
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = transformers.LlamaConfig(hidden_size=D_HEAD * 4, num_attention_heads=4, head_dim=D_HEAD,
                                      max_position_embeddings=4 * ours.original_max_len,
                                      rope_parameters={"rope_theta": BASE, **theirs})
    want, factor = ROPE_INIT_FUNCTIONS[theirs["rope_type"]](config, "cpu")
    got = scaled_inv_freq(D_HEAD, BASE, ours)
    assert got.dtype == want.dtype == torch.float32
    assert torch.equal(got, want)
    assert ours.attention_scale() == pytest.approx(factor, rel=1e-12)
    rope = RotaryEmbedding(D_HEAD, BASE, scaling=ours)
    assert torch.equal(rope.inv_freq, want)
    assert rope.complex_rotation(torch.arange(5)).abs().sub(factor).abs().max() < 1e-6  # YaRN's factor on q and k


def test_llama3_keeps_fast_frequencies_and_divides_slow_ones():
    s = RopeScaling("llama3", 8.0, 64)
    inv = 1.0 / (BASE ** (torch.arange(0, D_HEAD, 2).float() / D_HEAD))
    out = llama3_inv_freq(inv, s)
    wavelen = 2 * math.pi / inv
    fast, slow = wavelen < 64 / 4.0, wavelen > 64 / 1.0
    assert fast.any() and slow.any()
    assert torch.equal(out[fast], inv[fast])
    assert torch.allclose(out[slow], inv[slow] / 8.0)
    middle = ~fast & ~slow
    assert ((out[middle] < inv[middle]) & (out[middle] > inv[middle] / 8.0)).all()


def test_yarn_rotation_scales_scores_by_the_factor_squared():
    s = RopeScaling("yarn", 4.0, 64)
    rope, plain = RotaryEmbedding(8, 100.0, scaling=s), RotaryEmbedding(8, 100.0)
    plain.inv_freq = rope.inv_freq.clone()
    q, k = torch.randn(1, 1, 6, 8), torch.randn(1, 1, 6, 8)
    scores = rope(q) @ rope(k).mT
    assert torch.allclose(scores, plain(q) @ plain(k).mT * s.attention_scale() ** 2, atol=1e-5)
    half = rope(q.half())  # the cos/sin path of half precision carries the factor too
    assert torch.allclose(half.float(), rope(q), atol=2e-2)


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(kind="ntk", factor=2.0, original_max_len=8), ValueError, "rope_scaling.kind must be one of"),
    (dict(kind="llama3", factor=0.0, original_max_len=8), ValueError, "rope_scaling.factor"),
    (dict(kind="yarn", factor=2.0, original_max_len=0), ValueError, "original_max_len"),
    (dict(kind="llama3", factor=2.0, original_max_len=8, low_freq_factor=4.0, high_freq_factor=1.0), ValueError,
     "low_freq_factor < high_freq_factor"),
    (dict(kind="yarn", factor=2.0, original_max_len=8, truncate="yes"), TypeError, "truncate must be a bool"),
])
def test_bad_scalings_are_refused(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        RopeScaling(**kwargs)


def test_scaling_and_scale_are_one_choice():
    with pytest.raises(ValueError, match="either scale .* or scaling"):
        RotaryEmbedding(8, scale=2.0, scaling=RopeScaling("yarn", 2.0, 8))
    with pytest.raises(TypeError, match="scaling must be a RopeScaling"):
        RotaryEmbedding(8, scaling={"kind": "yarn"})
    assert RopeScaling.coerce({"kind": "yarn", "factor": 2.0, "original_max_len": 8}) == RopeScaling("yarn", 2.0, 8)
    with pytest.raises(ValueError, match="unknown rope_scaling fields"):
        RopeScaling.coerce({"kind": "yarn", "factor": 2.0, "original_max_len": 8, "alpha": 1})
