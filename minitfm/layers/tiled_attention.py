"""Memory-efficient exact attention: the FlashAttention idea, tile by tile, in plain PyTorch.

Manual attention builds the whole score matrix S = Q K^T (T_q x T_k numbers per head) and keeps it, and
its softmax, for the backward pass: memory grows as T^2. FlashAttention (Dao et al., 2022; Dao, 2023)
computes the *same* output without ever holding S:

1. The **online softmax** (Milakov & Gimelshein, 2018) reads a row in blocks and keeps only a running max
   ``m`` and a running sum ``l`` of ``exp(x - m)``. When a block raises the max, the sum so far was measured
   against the old max, so it is multiplied by ``exp(m_old - m_new)``: the result stays exact.
2. **Tiled attention** cuts S into (b_q x b_k) tiles. Each block of queries visits the key tiles in order,
   keeping m, l and an un-normalised output ``acc = sum_j exp(s_j - m) v_j``, all rescaled the same way when
   the max grows; at the end ``out = acc / l``. With ``causal=True``, tiles wholly in the future are skipped.
3. **Training** saves only q, k, v, out and each row's log-sum-exp ``lse = m + log l`` (O(T) memory); the
   backward pass recomputes each tile's weights ``P = exp(S - lse)`` instead of storing them.

Glossary: T_q queries, T_k keys, Dh head dimension, Dv value dimension, ``...`` leading dimensions (B, H),
b_q/b_k the tile sizes ``block_q``/``block_k``, m running max, l running sum, lse log-sum-exp.

Conventions are minitfm's: causal masks are aligned bottom-right (the queries are the last T_q of the T_k
positions), and a query that sees no key gets zero weights and a zero output. fp16/bf16 inputs are
accumulated in fp32. Pure PyTorch runs each tile as separate small ops, so this is slower than a fused
kernel: the point is memory, and reading how the kernel works.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from minitfm._checks import check_number, check_positive_int, check_tensor
from minitfm.layers.attention import _check_inputs

NEG_INF = float("-inf")


@dataclass
class TileStats:
    """What one forward pass of :func:`tiled_attention` did with the (T_q x T_k) score matrix."""

    tiles_total: int = 0  # ceil(T_q / b_q) * ceil(T_k / b_k)
    tiles_computed: int = 0  # tiles whose scores were computed
    tiles_skipped: int = 0  # tiles wholly in the causal future: never computed
    largest_score_elements: int = 0  # numel of the largest score tensor created, (..., b_q, b_k)


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)  # fp16/bf16 accumulate in fp32; fp64 stays fp64


def _finite_shift(m: torch.Tensor) -> torch.Tensor:
    """``m`` with -inf replaced by 0. A row whose entries so far are all -inf (masked) then gives
    exp(-inf - 0) = 0 instead of exp(-inf - -inf) = NaN."""
    return m.masked_fill(m == NEG_INF, 0.0)


def running_max_and_sum(x: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Scan the last dimension of ``x`` in blocks of ``block_size`` columns (the last block may be shorter).

    Returns ``(m, l)``, each of shape (...,): ``m`` the row max, ``l = sum exp(x - m)``, so that
    ``m + log(l)`` is the row's log-sum-exp. Computed in fp32 (fp64 for fp64 input). A row of only -inf
    gives ``m = -inf, l = 0``.
    """
    check_tensor(x, "x", floating=True)
    if x.dim() < 1:
        raise ValueError("x must have at least 1 dimension (the softmax runs over the last), got a 0-d tensor")
    check_positive_int(block_size, "block_size")
    x = x.to(_work_dtype(x.dtype))
    m = x.new_full(x.shape[:-1], NEG_INF)  # (...,) the largest entry seen so far
    l = x.new_zeros(x.shape[:-1])  # (...,) sum of exp(entry - m) over the entries seen so far
    for start in range(0, x.shape[-1], block_size):
        block = x[..., start:start + block_size]  # (..., n) -> (..., block_size)
        m_new = torch.maximum(m, block.amax(dim=-1))
        shift = _finite_shift(m_new)
        # l was summed against the old max: exp(x - m_old) * exp(m_old - m_new) = exp(x - m_new)
        l = l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)
        m = m_new
    return m, l


def online_softmax(x: torch.Tensor, block_size: int) -> torch.Tensor:
    """Softmax over the last dimension from the block-wise statistics: ``exp(x - m) / l``.

    Equals ``torch.softmax(x, dim=-1)`` for any ``block_size``, also for huge entries (no exp overflows,
    since every exponent is <= 0). A row of only -inf has nothing to weigh and gets all-zero weights
    (minitfm's convention for a query with no visible key), where ``torch.softmax`` returns NaN.
    """
    m, l = running_max_and_sum(x, block_size)
    weights = torch.exp(x.to(m.dtype) - _finite_shift(m)[..., None])
    return (weights / l.masked_fill(l == 0, 1.0)[..., None]).to(x.dtype)  # l == 0 only for all -inf rows


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    block_q: int = 64, block_k: int = 64, scale: float | None = None,
                    return_stats: bool = False) -> torch.Tensor | tuple[torch.Tensor, TileStats]:
    """Exact ``softmax(q k^T * scale) v``, computed tile by tile so that no (T_q, T_k) tensor exists.

    Args:
        q: (..., T_q, Dh) queries.
        k: (..., T_k, Dh) keys.
        v: (..., T_k, Dv) values. The leading dimensions of q, k and v broadcast (as in
            :func:`minitfm.scaled_dot_product_attention`); the gradients are summed back to each shape.
        causal: query i sees keys ``j <= i + T_k - T_q`` (bottom-right, as :func:`minitfm.causal_mask`).
        block_q, block_k: tile size b_q x b_k; the largest score tensor is (..., b_q, b_k).
        scale: multiplier of the scores; defaults to ``1 / sqrt(Dh)``.
        return_stats: also return a :class:`TileStats` describing the forward pass.

    Returns:
        out (..., T_q, Dv) in the inputs' dtype, or ``(out, stats)``. A query with no visible key (causal
        with T_k < T_q) outputs zeros. Backward saves only q, k, v, out and lse, and recomputes the tiles.
    """
    _check_inputs(q, k, v, None, None)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {type(causal).__name__} ({causal!r:.40})")
    check_positive_int(block_q, "block_q")
    check_positive_int(block_k, "block_k")
    if scale is not None:
        check_number(scale, "scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    # Broadcasting by expand is free (a view), and autograd sums each gradient back to its input's shape.
    q, k, v = (t.expand(batch + t.shape[-2:]) for t in (q, k, v))
    stats = TileStats()
    out = _TiledAttention.apply(q, k, v, causal, block_q, block_k, scale, stats)
    return (out, stats) if return_stats else out


def _visible_key_tiles(rows: slice, t_q: int, t_k: int, block_k: int, causal: bool, device):
    """Yield ``(cols, mask)`` for each key tile the query rows can see; ``mask`` is a (b_q, b_k) boolean
    (True = may attend) on diagonal tiles and ``None`` on tiles every row sees whole.

    Causal, bottom-right: query i sees key j iff j <= i + (T_k - T_q). A tile starting after the last row's
    limit is in every row's future and is skipped; a tile ending by the first row's limit needs no mask.
    """
    first_limit, last_limit = rows.start + t_k - t_q, rows.stop - 1 + t_k - t_q
    for start in range(0, t_k, block_k):
        cols = slice(start, min(start + block_k, t_k))
        if not causal or cols.stop - 1 <= first_limit:
            yield cols, None
        elif cols.start <= last_limit:
            limits = torch.arange(rows.start, rows.stop, device=device)[:, None] + (t_k - t_q)  # (b_q, 1)
            yield cols, torch.arange(cols.start, cols.stop, device=device) <= limits  # -> (b_q, b_k)


def _tile_scores(q_rows, k, cols, mask) -> torch.Tensor:
    """Scores of one tile: (..., b_q, Dh) @ (..., Dh, b_k) -> (..., b_q, b_k), masked keys at -inf."""
    scores = q_rows @ k[..., cols, :].to(q_rows.dtype).transpose(-2, -1)
    return scores if mask is None else scores.masked_fill(~mask, NEG_INF)


def _attend_rows(q, k, v, rows, causal, block_k, scale, stats):
    """Output and lse of the query rows ``rows``, visiting their key tiles with the online softmax."""
    q_rows = q[..., rows, :].to(_work_dtype(q.dtype)) * scale  # (..., b_q, Dh); scaling q scales every score
    m = q_rows.new_full(q_rows.shape[:-1], NEG_INF)  # (..., b_q) running max of the scores
    l = q_rows.new_zeros(q_rows.shape[:-1])  # (..., b_q) running sum of exp(score - m)
    acc = q_rows.new_zeros(q_rows.shape[:-1] + v.shape[-1:])  # (..., b_q, Dv) running sum of exp(score - m) v
    for cols, mask in _visible_key_tiles(rows, q.shape[-2], k.shape[-2], block_k, causal, q.device):
        scores = _tile_scores(q_rows, k, cols, mask)
        stats.tiles_computed += 1
        stats.largest_score_elements = max(stats.largest_score_elements, scores.numel())
        m_new = torch.maximum(m, scores.amax(dim=-1))
        shift = _finite_shift(m_new)
        rescale = torch.exp(m - shift)  # (..., b_q): l and acc were summed against the old max
        p = torch.exp(scores - shift[..., None])  # (..., b_q, b_k) un-normalised weights, all <= 1
        l = l * rescale + p.sum(dim=-1)
        acc = acc * rescale[..., None] + p @ v[..., cols, :].to(p.dtype)  # (..., b_q, b_k) @ (..., b_k, Dv)
        m = m_new
    # l == 0 only for rows with no visible key: acc is 0 there, so the output is 0; lse is -inf
    return acc / l.masked_fill(l == 0, 1.0)[..., None], m + l.log()


class _TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, block_q, block_k, scale, stats):
        t_q, t_k, work = q.shape[-2], k.shape[-2], _work_dtype(q.dtype)
        out = q.new_zeros(q.shape[:-1] + v.shape[-1:], dtype=work)  # (..., T_q, Dv)
        lse = q.new_zeros(q.shape[:-1], dtype=work)  # (..., T_q): all backward needs of the softmax
        for start in range(0, t_q, block_q):
            rows = slice(start, min(start + block_q, t_q))
            out[..., rows, :], lse[..., rows] = _attend_rows(q, k, v, rows, causal, block_k, scale, stats)
        stats.tiles_total = math.ceil(t_q / block_q) * math.ceil(t_k / block_k)
        stats.tiles_skipped = stats.tiles_total - stats.tiles_computed
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)  # O(T) memory: no (T_q, T_k) tensor is kept
        ctx.settings = (causal, block_q, block_k, scale)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        causal, block_q, block_k, scale = ctx.settings
        work, t_q, t_k = lse.dtype, q.shape[-2], k.shape[-2]
        # An empty row's scores are all -inf, so any finite lse gives it P = 0 (lse = -inf would give NaN).
        lse = _finite_shift(lse)
        # Softmax backward needs delta_i = sum_j P_ij dP_ij, which equals dO_i . O_i: O(T), no P needed.
        delta = (grad_out.to(work) * out.to(work)).sum(dim=-1)  # (..., T_q, Dv) -> (..., T_q)
        dq, dk, dv = (torch.zeros_like(t, dtype=work) for t in (q, k, v))
        for start in range(0, t_q, block_q):
            rows = slice(start, min(start + block_q, t_q))
            q_rows = q[..., rows, :].to(work) * scale  # (..., b_q, Dh)
            grad_rows = grad_out[..., rows, :].to(work)  # (..., b_q, Dv)
            for cols, mask in _visible_key_tiles(rows, t_q, t_k, block_k, causal, q.device):
                p = torch.exp(_tile_scores(q_rows, k, cols, mask) - lse[..., rows, None])  # forward's weights
                dv[..., cols, :] += p.transpose(-2, -1) @ grad_rows  # (..., b_k, b_q) @ (..., b_q, Dv)
                dp = grad_rows @ v[..., cols, :].to(work).transpose(-2, -1)  # -> (..., b_q, b_k)
                ds = p * (dp - delta[..., rows, None])  # gradient of the (scaled) scores
                dq[..., rows, :] += (ds @ k[..., cols, :].to(work)) * scale  # (..., b_q, b_k) @ (..., b_k, Dh)
                dk[..., cols, :] += ds.transpose(-2, -1) @ q_rows  # q_rows already carries the scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None, None
