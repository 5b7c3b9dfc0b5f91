import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from minitfm import causal_mask, scaled_dot_product_attention


def qkv(b=2, h=3, t_q=5, t_k=7, d=8, dtype=torch.float32):
    return (torch.randn(b, h, t_q, d, dtype=dtype), torch.randn(b, h, t_k, d, dtype=dtype),
            torch.randn(b, h, t_k, d, dtype=dtype))


@pytest.mark.parametrize("impl", ["manual", "fused"])
def test_matches_torch_without_mask(impl):
    q, k, v = qkv()
    out, _ = scaled_dot_product_attention(q, k, v, impl=impl)
    assert_close(out, F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("impl", ["manual", "fused"])
def test_matches_torch_with_random_mask(impl):
    q, k, v = qkv()
    mask = torch.rand(2, 1, 5, 7) > 0.3
    mask[..., 0] = True  # keep every row non-empty so torch's reference is defined the same way
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask, impl=impl)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("t_q,t_k", [(6, 6), (1, 6), (3, 8)])
def test_causal_with_more_keys_than_queries_matches_torch(t_q, t_k):
    q, k, v = qkv(t_q=t_q, t_k=t_k)
    out, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(t_q, t_k))
    # torch's is_causal aligns top-left, so compare with an explicit bottom-right mask built by hand
    rows = torch.arange(t_q)[:, None] + (t_k - t_q)
    reference_mask = torch.arange(t_k)[None, :] <= rows
    assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=reference_mask))
    if t_q == t_k:
        assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_bias_is_added_to_scores():
    q, k, v = qkv()
    bias = torch.randn(1, 3, 5, 7)
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5 + bias, dim=-1)
    assert_close(weights, expected)
    fused, _ = scaled_dot_product_attention(q, k, v, bias=bias, impl="fused")
    assert_close(fused, out)


def test_weights_rows_sum_to_one_and_masked_keys_get_zero():
    q, k, v = qkv()
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[0, ..., 5:] = False  # the first sequence has two padded keys
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights[0, ..., 5:] == 0)
    assert torch.all(weights[1, ..., 5:] > 0)


def test_fused_returns_no_weights():
    q, k, v = qkv()
    assert scaled_dot_product_attention(q, k, v, impl="fused")[1] is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("impl", ["manual", "fused"])
def test_fully_masked_row_is_finite_and_zero(dtype, impl):
    q, k, v = qkv(dtype=dtype)
    mask = torch.ones(1, 1, 5, 7, dtype=torch.bool)
    mask[..., 2, :] = False  # query 2 may see nothing
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask, impl=impl)
    assert torch.isfinite(out).all()
    assert torch.all(out[:, :, 2] == 0)
    assert torch.any(out[:, :, 1] != 0)


def test_dropout_zeroes_weights_only_in_given_fraction():
    q, k, v = qkv(t_q=64, t_k=64)
    _, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    zero_fraction = (weights == 0).float().mean().item()
    assert 0.45 < zero_fraction < 0.55


def test_default_scale_is_inverse_sqrt_dk():
    q, k, v = qkv(d=16)
    a, _ = scaled_dot_product_attention(q, k, v)
    b, _ = scaled_dot_product_attention(q, k, v, scale=0.25)
    assert_close(a, b)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(mask=torch.ones(2, 5, 6, dtype=torch.bool)), ValueError, r"mask must broadcast to .*\(2, 3, 5, 7\), got \(2, 5, 6\)"),
        (dict(mask=torch.ones(1, 1, 5, 7)), TypeError, "mask must be a boolean tensor.*float32"),
        (dict(bias=torch.zeros(1, 1, 5, 7, dtype=torch.long)), TypeError, "bias must be a floating-point"),
        (dict(impl="flash"), ValueError, "impl must be one of 'manual', 'fused'; got 'flash'"),
        (dict(dropout_p=1.5), ValueError, r"dropout_p must be in \[0, 1\), got 1.5"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    q, k, v = qkv()
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(q, k, v, **kwargs)


def test_bad_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="share their last dimension"):
        scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="same number of keys"):
        scaled_dot_product_attention(q, k, v[..., :3, :])
    with pytest.raises(ValueError, match="at least 2 dimensions, got \\(8,\\)"):
        scaled_dot_product_attention(torch.randn(8), k, v)
    with pytest.raises(TypeError, match="floating-point tensor, got dtype torch.int64"):
        scaled_dot_product_attention(q.long(), k, v)
    with pytest.raises(TypeError, match="must be a torch.Tensor, got list"):
        scaled_dot_product_attention([1.0], k, v)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_float32_bias_with_half_precision_inputs_matches_fused(dtype):
    # alibi_bias returns float32; a model cast to fp16/bf16 must still run on the manual path
    q, k, v = qkv(dtype=dtype)
    bias = torch.randn(1, 3, 5, 7)
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    assert out.dtype == dtype and weights.dtype == dtype
    fused, _ = scaled_dot_product_attention(q, k, v, bias=bias, impl="fused")
    assert_close(out, fused, atol=2e-2, rtol=2e-2)


def test_fused_path_gives_torch_a_mask_of_the_queries_rank(monkeypatch):
    # A (1, T, T) mask with 4-D queries makes PyTorch's CPU kernel fall back to the slow path that
    # materialises the weights; the library must hand over a 4-D mask.
    import minitfm.layers.attention as attention

    seen = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kwargs):
        seen.append(attn_mask.dim())
        return real(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    q, k, v = qkv(t_q=6, t_k=6)
    scaled_dot_product_attention(q, k, v, mask=causal_mask(6), impl="fused")
    assert seen == [4]


@pytest.mark.parametrize("impl", ["manual", "fused"])
@pytest.mark.parametrize("t_q,t_k,with_mask", [(6, 6, False), (6, 6, True), (3, 8, False), (3, 8, True)])
def test_causal_flag_computes_what_the_causal_mask_computes(impl, t_q, t_k, with_mask):
    """causal=True (issue 46: the fused kernel masks by itself in a training step) equals passing causal_mask, alone
    or combined with another mask, values and gradients alike."""
    torch.manual_seed(0)
    q, k, v = (t.requires_grad_() for t in qkv(t_q=t_q, t_k=t_k))
    mask = torch.rand(2, 1, t_q, t_k) > 0.3 if with_mask else None
    full = causal_mask(t_q, t_k) if mask is None else mask & causal_mask(t_q, t_k)
    out, _ = scaled_dot_product_attention(q, k, v, mask=full, impl=impl)
    got, _ = scaled_dot_product_attention(q, k, v, mask=mask, impl=impl, causal=True)
    assert_close(got, out)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert_close(torch.autograd.grad(got.sum(), (q, k, v)), grads)


def test_causal_flag_is_checked():
    q, k, v = qkv(t_q=5, t_k=4)
    with pytest.raises(ValueError, match="causal=True needs at least as many keys"):
        scaled_dot_product_attention(q, k, v, causal=True)
    with pytest.raises(TypeError, match="causal must be a bool"):
        scaled_dot_product_attention(*qkv(), causal="yes")
