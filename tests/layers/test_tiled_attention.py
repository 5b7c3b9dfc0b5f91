import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from minitfm import causal_mask, scaled_dot_product_attention
from minitfm.layers.tiled_attention import online_softmax, running_max_and_sum, tiled_attention
from minitfm.training.activation_memory import OpRecorder, SavedTensorMeter

INF = float("inf")


def qkv(b=2, h=2, t_q=37, t_k=37, d=8, dtype=torch.float32, requires_grad=False):
    return tuple(torch.randn(b, h, t, d, dtype=dtype, requires_grad=requires_grad) for t in (t_q, t_k, t_k))


def max_diff(a, b):
    return (a - b).abs().max().item()


def manual(q, k, v, causal=False):
    """minitfm's explicit path with its bottom-right causal mask (valid for any T_q, T_k)."""
    t_q, t_k = q.shape[-2], k.shape[-2]
    mask = torch.arange(t_k)[None, :] <= torch.arange(t_q)[:, None] + (t_k - t_q) if causal else None
    return scaled_dot_product_attention(q, k, v, mask=mask, impl="manual")[0]


# ---- online softmax ----

@pytest.mark.parametrize("block_size", [1, 3, 7, 16, 37, 100])
@pytest.mark.parametrize("magnitude", [1.0, 1000.0])
def test_online_softmax_matches_torch(block_size, magnitude):
    x = torch.randn(4, 5, 37) * magnitude  # at 1000, a naive exp(x) overflows to inf
    assert_close(online_softmax(x, block_size), torch.softmax(x, dim=-1), atol=1e-6, rtol=0)


@pytest.mark.parametrize("block_size", [2, 5, 37])
def test_online_softmax_gives_masked_columns_zero_and_all_masked_rows_zero(block_size):
    x = torch.randn(3, 37) * 10
    x[:, [0, 5, 20]] = -INF  # masked keys, including the very first block's first column
    x[2] = -INF  # a query that sees nothing
    weights = online_softmax(x, block_size)
    assert_close(weights[:2], torch.softmax(x[:2], dim=-1), atol=1e-6, rtol=0)
    assert torch.all(weights[:, [0, 5, 20]] == 0)
    assert torch.all(weights[2] == 0)  # torch.softmax gives NaN here
    assert torch.isnan(torch.softmax(x[2], dim=-1)).all()


@pytest.mark.parametrize("block_size", [1, 4, 64])
def test_running_stats_are_the_max_and_logsumexp(block_size):
    x = torch.randn(6, 50) * 300
    m, l = running_max_and_sum(x, block_size)
    assert m.shape == l.shape == (6,)
    assert torch.equal(m, x.amax(dim=-1))
    assert_close(m + l.log(), torch.logsumexp(x, dim=-1), atol=1e-4, rtol=1e-6)


def test_online_softmax_keeps_dtype_of_half_input():
    x = torch.randn(3, 20).to(torch.bfloat16)
    out = online_softmax(x, 6)
    assert out.dtype == torch.bfloat16
    assert_close(out.float(), torch.softmax(x.float(), dim=-1), atol=4e-3, rtol=0)


# ---- forward: exact attention ----

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t", [1, 17, 64, 200])
@pytest.mark.parametrize("block", [16, 48, 64, 128, 256])
def test_matches_torch_and_manual_path(causal, t, block):
    q, k, v = qkv(t_q=t, t_k=t)
    out = tiled_attention(q, k, v, causal=causal, block_q=block, block_k=block)
    assert max_diff(out, F.scaled_dot_product_attention(q, k, v, is_causal=causal)) <= 1e-5
    assert max_diff(out, manual(q, k, v, causal)) <= 1e-5


@pytest.mark.parametrize("block_q,block_k", [(16, 48), (48, 16), (7, 128)])
def test_rectangular_tiles_match_torch(block_q, block_k):
    q, k, v = qkv(t_q=100, t_k=100)
    out = tiled_attention(q, k, v, causal=True, block_q=block_q, block_k=block_k)
    assert max_diff(out, F.scaled_dot_product_attention(q, k, v, is_causal=True)) <= 1e-5


def test_long_sequence_4096():
    q, k, v = qkv(b=1, h=1, t_q=4096, t_k=4096, d=16)
    out = tiled_attention(q, k, v, causal=True, block_q=128, block_k=128)
    assert max_diff(out, F.scaled_dot_product_attention(q, k, v, is_causal=True)) <= 1e-5


@pytest.mark.parametrize("t_q,t_k", [(1, 37), (5, 37), (37, 37)])
@pytest.mark.parametrize("causal", [False, True])
def test_fewer_queries_than_keys_is_a_cache_step(t_q, t_k, causal):
    q, k, v = qkv(t_q=t_q, t_k=t_k)
    out = tiled_attention(q, k, v, causal=causal, block_q=4, block_k=16)
    mask = causal_mask(t_q, t_k) if causal else None  # bottom-right: queries are the last t_q positions
    reference, _ = scaled_dot_product_attention(q, k, v, mask=mask, impl="manual")
    assert max_diff(out, reference) <= 1e-5
    if causal:  # the new queries see the cache and themselves: the last rows of a full causal pass
        full_q = torch.cat([torch.randn(2, 2, t_k - t_q, 8), q], dim=-2)
        assert max_diff(out, tiled_attention(full_q, k, v, causal=True)[..., -t_q:, :]) <= 1e-5


def test_queries_with_no_visible_key_output_zeros():
    q, k, v = qkv(t_q=37, t_k=5)  # query i sees keys j <= i - 32: the first 32 queries see nothing
    out = tiled_attention(q, k, v, causal=True, block_q=8, block_k=2)
    assert torch.all(out[..., :32, :] == 0)
    assert torch.all(out[..., 32:, :].abs().sum(-1) > 0)
    assert max_diff(out, manual(q, k, v, causal=True)) <= 1e-5


def test_custom_scale_and_broadcast_heads():
    q, _, _ = qkv(h=4)
    k, v = torch.randn(2, 1, 37, 8), torch.randn(1, 37, 8)  # one key/value head shared by 4 query heads
    out = tiled_attention(q, k, v, scale=0.3, block_q=16, block_k=16)
    assert out.shape == (2, 4, 37, 8)
    assert max_diff(out, F.scaled_dot_product_attention(q, k, v, scale=0.3)) <= 1e-5


# ---- tiles: what is computed, what is skipped, how big ----

@pytest.mark.parametrize("t,block", [(256, 32), (64, 16), (96, 96)])
def test_causal_skips_the_future_tiles(t, block):
    q, k, v = qkv(t_q=t, t_k=t)
    _, stats = tiled_attention(q, k, v, causal=True, block_q=block, block_k=block, return_stats=True)
    n = t // block
    assert (stats.tiles_total, stats.tiles_computed, stats.tiles_skipped) == (n * n, n * (n + 1) // 2, n * (n - 1) // 2)
    assert stats.largest_score_elements == 2 * 2 * block * block
    _, dense = tiled_attention(q, k, v, block_q=block, block_k=block, return_stats=True)
    assert (dense.tiles_computed, dense.tiles_skipped) == (n * n, 0)


def test_largest_score_block_is_clipped_to_the_sequence():
    q, k, v = qkv(t_q=5, t_k=37)
    _, stats = tiled_attention(q, k, v, block_q=64, block_k=16, return_stats=True)
    assert stats.largest_score_elements == 2 * 2 * 5 * 16
    assert (stats.tiles_total, stats.tiles_computed) == (3, 3)


def test_no_tensor_of_the_full_score_matrix_is_ever_created():
    q, k, v = qkv(b=1, t_q=256, t_k=256, d=16, requires_grad=True)

    def widest_square(fn):  # largest min(last two dims) of any tensor an op creates, forward and backward
        with OpRecorder() as rec:
            fn().sum().backward()
        return max(min(shape[-2:]) for r in rec.records for shape in r.shapes if len(shape) >= 2)

    assert widest_square(lambda: tiled_attention(q, k, v, causal=True, block_q=32, block_k=32)) == 32
    assert widest_square(lambda: manual(q, k, v, causal=True)) == 256  # the manual path builds (T, T)


# ---- backward ----

@pytest.mark.parametrize("t_q,t_k,causal,k_heads", [
    (5, 7, False, 2), (7, 7, True, 2), (5, 7, True, 2), (9, 4, True, 2), (7, 7, True, 1)])
def test_gradcheck_float64(t_q, t_k, causal, k_heads):
    q = torch.randn(1, 2, t_q, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, k_heads, t_k, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, t_k, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k, v: tiled_attention(q, k, v, causal=causal, block_q=2, block_k=3),
                                    (q, k, v))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("t_q,block_q,block_k", [(70, 16, 32), (70, 128, 128), (20, 8, 16)])
def test_fp32_gradients_match_manual_path(causal, t_q, block_q, block_k):
    q, k, v = qkv(t_q=t_q, t_k=70, requires_grad=True)
    grad_out = torch.randn(2, 2, t_q, 8)
    grads = []
    for fn in (lambda: tiled_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k),
               lambda: manual(q, k, v, causal)):
        grads.append(torch.autograd.grad(fn(), (q, k, v), grad_out))
    for tiled_grad, manual_grad in zip(*grads):
        assert max_diff(tiled_grad, manual_grad) <= 1e-5


def test_saved_memory_grows_linearly_not_quadratically():
    saved = {}
    for t in (256, 512):
        q, k, v = qkv(b=1, t_q=t, t_k=t, d=16, requires_grad=True)
        for name, fn in (("tiled", lambda: tiled_attention(q, k, v, causal=True)), ("manual", lambda: manual(q, k, v, True))):
            with SavedTensorMeter() as meter:
                fn()
            saved[name, t] = meter.bytes
    tiled_ratio, manual_ratio = saved["tiled", 512] / saved["tiled", 256], saved["manual", 512] / saved["manual", 256]
    assert 1.8 <= tiled_ratio <= 2.2
    assert 3.5 <= manual_ratio <= 4.5
    # q, k, v, out (4 x 1x2x256x16 fp32) and lse (1x2x256 fp32): nothing else is kept
    assert saved["tiled", 256] == (4 * 2 * 256 * 16 + 2 * 256) * 4


# Only the inputs and the output are rounded to the half type (outputs are averages of N(0, 1) values;
# bf16 keeps 8 significant bits, fp16 11), so the tolerance is a few units in the last place.
@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 2e-2), (torch.float16, 4e-3)])
def test_half_precision_inputs_accumulate_in_fp32(dtype, tol):
    q, k, v = (t.to(dtype).requires_grad_() for t in qkv(t_q=40, t_k=40))
    out = tiled_attention(q, k, v, causal=True, block_q=16, block_k=16)
    assert out.dtype == dtype
    reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    assert max_diff(out.float(), reference) <= tol
    out.float().pow(2).sum().backward()
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == dtype
    assert torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0


# ---- bad inputs ----

@pytest.mark.parametrize("change,error,match", [
    (lambda q, k, v: (q.long(), k, v), TypeError, "floating-point"),
    (lambda q, k, v: (q.double(), k, v), TypeError, "dtypes must match"),
    (lambda q, k, v: (q[0, 0, 0], k, v), ValueError, "at least 2 dimensions"),
    (lambda q, k, v: (q[..., :4], k, v), ValueError, "share their last dimension"),
    (lambda q, k, v: (q, k, v[..., :3, :]), ValueError, "same number of keys"),
    (lambda q, k, v: (q, k[:1, :1].expand(3, 3, -1, -1), v), ValueError, "must broadcast"),
    (lambda q, k, v: ([1.0], k, v), TypeError, "must be a torch.Tensor"),
])
def test_bad_tensors_raise(change, error, match):
    with pytest.raises(error, match=match):
        tiled_attention(*change(*qkv(t_q=5, t_k=7)))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"block_q": 0}, ValueError, "block_q must be >= 1"),
    ({"block_k": 1.5}, TypeError, "block_k must be an int"),
    ({"block_k": True}, TypeError, "block_k must be an int"),
    ({"causal": "yes"}, TypeError, "causal must be True or False"),
    ({"scale": float("nan")}, ValueError, "scale must be a finite number"),
])
def test_bad_options_raise(kwargs, error, match):
    with pytest.raises(error, match=match):
        tiled_attention(*qkv(t_q=5, t_k=7), **kwargs)


@pytest.mark.parametrize("x,block_size,error,match", [
    (torch.randn(3, 4), 0, ValueError, "block_size must be >= 1"),
    (torch.randn(3, 4), 2.0, TypeError, "block_size must be an int"),
    (torch.arange(4), 2, TypeError, "floating-point"),
    (torch.tensor(1.0), 2, ValueError, "at least 1 dimension"),
])
def test_online_softmax_bad_inputs_raise(x, block_size, error, match):
    with pytest.raises(error, match=match):
        online_softmax(x, block_size)
