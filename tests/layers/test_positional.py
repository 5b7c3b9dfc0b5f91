import math

import pytest
import torch
from torch.testing import assert_close

from minitfm import (
                     LearnedPositionalEmbedding,
                     RotaryEmbedding,
                     SinusoidalPositionalEncoding,
                     alibi_bias,
                     alibi_slopes,
                     sinusoidal_encoding,
                     )


def test_sinusoidal_values_at_hand_computed_positions():
    pe = sinusoidal_encoding(torch.tensor([0, 1, 3]), d_model=4)
    # dims (0, 1) use frequency 1, dims (2, 3) use 1/10000^(2/4) = 1/100
    expected = torch.tensor([
        [0.0, 1.0, 0.0, 1.0],
        [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
        [math.sin(3), math.cos(3), math.sin(0.03), math.cos(0.03)],
    ])
    assert_close(pe, expected)


def test_sinusoidal_module_extends_beyond_its_table_and_honours_offset():
    module = SinusoidalPositionalEncoding(8, max_seq_len=4)
    long = module(10)
    assert long.shape == (10, 8)
    assert_close(long, sinusoidal_encoding(torch.arange(10), 8))
    assert_close(module(3, offset=5), long[5:8])


def test_sinusoidal_relative_offset_is_a_linear_map():
    # PE(p + k) = M_k PE(p), with M_k a block of 2x2 rotations that does not depend on p
    d, k = 8, 3
    freqs = 10000.0 ** (-torch.arange(0, d, 2) / d)
    cos, sin = torch.cos(freqs * k), torch.sin(freqs * k)
    m_k = torch.zeros(d, d)
    for i in range(d // 2):
        m_k[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[cos[i], sin[i]], [-sin[i], cos[i]]])
    pe = sinusoidal_encoding(torch.arange(40), d)
    assert_close(pe[:-k] @ m_k.T, pe[k:], atol=1e-5, rtol=1e-4)


def test_learned_embedding_rejects_positions_past_its_limit():
    module = LearnedPositionalEmbedding(max_seq_len=8, d_model=4)
    assert module(8).shape == (8, 4)
    with pytest.raises(ValueError, match=r"covers positions 0..7 \(max_seq_len=8\), got position 9"):
        module(4, offset=6)


def rope_score(rope, q, k, m, n):
    qm = rope(q[None], positions=torch.tensor([m]))[0]
    kn = rope(k[None], positions=torch.tensor([n]))[0]
    return (qm * kn).sum()


def test_rope_score_depends_only_on_distance():
    rope = RotaryEmbedding(8)
    q, k = torch.randn(8), torch.randn(8)
    base = rope_score(rope, q, k, 3, 1)
    for m, n in [(10, 8), (52, 50), (1000, 998)]:
        assert_close(rope_score(rope, q, k, m, n), base, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(rope_score(rope, q, k, 3, 0), base)


def test_rope_rotates_adjacent_pairs_by_hand():
    rope = RotaryEmbedding(4, base=100.0)
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    out = rope(x, positions=torch.tensor([2]))
    # pair 0 turns by 2 * 1 radian, pair 1 by 2 * 100^(-2/4) = 0.2 radian
    expected = torch.tensor([[math.cos(2), math.sin(2), math.cos(0.2), math.sin(0.2)]])
    assert_close(out, expected)


def test_rope_preserves_norms_and_offset_equals_slice_of_full():
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 10, 8)
    full = rope(x)
    assert_close(full.norm(dim=-1), x.norm(dim=-1))
    assert_close(rope(x[:, :, 6:], offset=6), full[:, :, 6:])
    batch_positions = torch.arange(6, 10).expand(2, 4)
    assert_close(rope(x[:, :, 6:], positions=batch_positions), full[:, :, 6:])


def test_rope_position_interpolation_divides_positions():
    stretched, plain = RotaryEmbedding(8, scale=4.0), RotaryEmbedding(8)
    x = torch.randn(1, 1, 1, 8)
    assert_close(stretched(x, offset=8), plain(x, offset=2))


def test_rope_frequencies_follow_base_and_scale_set_after_construction():
    rope = RotaryEmbedding(8)
    rope.scale, rope.base = 4.0, 500.0  # e.g. interpolating a trained model's positions
    x = torch.randn(1, 1, 3, 8)
    assert_close(rope(x, offset=5), RotaryEmbedding(8, base=500.0, scale=4.0)(x, offset=5), rtol=0, atol=0)
    assert_close(rope.inv_freq, 1.0 / 500.0 ** (torch.arange(0, 8, 2) / 8) / 4.0)
    with pytest.raises(ValueError, match="RoPE scale must be > 0, got 0"):
        rope.scale = 0
    with pytest.raises(ValueError, match="RoPE base must be > 0, got -2"):
        RotaryEmbedding(8, base=-2)


def test_rope_errors():
    with pytest.raises(ValueError, match="d_head must be even, got 7"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match=r"expects \(..., T, Dh=8\), got \(2, 5, 6\)"):
        RotaryEmbedding(8)(torch.randn(2, 5, 6))


def test_alibi_slopes_from_the_paper():
    assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    # 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads
    slopes16 = [2.0 ** (-(i + 1) / 2) for i in range(16)]
    assert_close(alibi_slopes(12), torch.tensor([2.0 ** -(i + 1) for i in range(8)] + slopes16[0::2][:4]))


def test_alibi_bias_penalises_distance_and_aligns_bottom_right():
    bias = alibi_bias(2, 1, 4)
    assert bias.shape == (1, 2, 1, 4)
    # 2 heads: slopes 2^(-8/2) = 1/16 and 1/256
    assert_close(bias[0, 0, 0], torch.tensor([-3.0, -2.0, -1.0, 0.0]) / 16)
    assert_close(alibi_bias(2, 4)[:, :, -1:], bias)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rope_keeps_float32_frequencies_when_cast_to_half_precision(dtype):
    # model.half() casts buffers; rounding theta_i to 8 bits turns angle pos * theta_i into noise
    reference, cast = RotaryEmbedding(64), RotaryEmbedding(64).to(dtype)
    x = torch.randn(1, 1, 4, 64)
    positions = torch.arange(1000, 1004)
    expected = reference(x, positions=positions).to(dtype)
    assert_close(cast(x.to(dtype), positions=positions), expected, atol=2e-2, rtol=2e-2)


def test_rope_rejects_positions_that_do_not_match_the_sequence():
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match=r"positions must have T=5 entries.*got \(1,\)"):
        rope(torch.randn(1, 2, 5, 8), positions=torch.tensor([3]))  # would rotate all 5 tokens alike
    with pytest.raises(ValueError, match=r"positions must have T=1 entries.*got \(5,\)"):
        rope(torch.randn(1, 2, 1, 8), positions=torch.arange(5))  # would return 5 tokens for 1
    with pytest.raises(ValueError, match=r"positions \(B, T\) must have B=1 .*got \(2, 5\)"):
        rope(torch.randn(1, 2, 5, 8), positions=torch.arange(5).expand(2, 5))  # would double the batch
    assert rope(torch.randn(3, 2, 5, 8), positions=torch.arange(5)[None]).shape == (3, 2, 5, 8)


def test_sinusoidal_module_keeps_its_dtype_when_it_extends():
    module = SinusoidalPositionalEncoding(8, max_seq_len=4).half()
    assert module(3).dtype == torch.float16
    assert module(10).dtype == torch.float16  # past the table: recomputed, still float16


def test_table_encodings_reject_negative_positions():
    # a negative index would silently read the table from its end
    with pytest.raises(ValueError, match="positions must be >= 0, got -1"):
        SinusoidalPositionalEncoding(8, max_seq_len=4)(positions=torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match="positions must be >= 0, got -2"):
        LearnedPositionalEmbedding(8, 4)(2, offset=-2)


def _pair_rotation(rope, x, positions):
    """The rotation written out pair by pair, the form chapter 4 derives."""
    ang = rope.angles(positions)
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def test_rope_complex_and_pair_paths_agree():
    torch.manual_seed(0)
    rope, positions = RotaryEmbedding(16), torch.arange(5, 12)
    x = torch.randn(2, 3, 7, 16)
    expected = _pair_rotation(rope, x, positions)
    assert_close(rope(x, positions=positions), expected, atol=1e-6, rtol=1e-6)  # complex multiplication
    odd_strides = torch.randn(2, 3, 7, 17)[..., 1:]  # odd offset and strides: no complex view, pair path
    assert_close(rope(odd_strides, positions=positions), _pair_rotation(rope, odd_strides, positions),
                 atol=1e-6, rtol=1e-6)
    half = x.to(torch.bfloat16)  # bfloat16 has no complex type: pair path, same angles
    assert_close(rope(half, positions=positions).float(), expected, atol=3e-2, rtol=3e-2)


def test_rope_reuses_its_rotation_only_for_the_same_unchanged_positions():
    rope, x = RotaryEmbedding(8), torch.randn(1, 2, 3, 8)
    positions = torch.tensor([0, 1, 2])
    first = rope(x, positions=positions)
    positions += 10  # in place: the version counter changes, the cached rotation must not be reused
    assert_close(rope(x, positions=positions), _pair_rotation(rope, x, torch.tensor([10, 11, 12])))
    assert not torch.allclose(first, rope(x, positions=positions))
    with torch.inference_mode():  # inference tensors have no version counter: values are compared
        pos = torch.tensor([0, 1, 2])
        rope(x, positions=pos)
        pos += 5
        assert_close(rope(x, positions=pos), _pair_rotation(rope, x, torch.tensor([5, 6, 7])))


def test_rope_rotation_made_under_inference_mode_is_not_reused_for_training():
    rope, positions = RotaryEmbedding(8), torch.tensor([0, 1, 2])
    x = torch.randn(1, 2, 3, 8, requires_grad=True)
    with torch.inference_mode():
        rope(x.detach(), positions=positions)
    rope(x, positions=positions).sum().backward()  # would fail if the inference-mode rotation were reused
    assert x.grad is not None and x.grad.abs().sum() > 0
