"""Scaled dot-product attention as a plain function.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Glossary: B batch, H heads, T_q queries, T_k keys, Dh head dimension (d_k), Dv value dimension.
Leading dimensions (B, H, ...) are free: any shape ``(..., T, D)`` works.

Mask convention: boolean, ``True`` = may attend, broadcastable to (..., T_q, T_k).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from minitfm._checks import (broadcast_or_raise, check_choice, check_number, check_probability, check_same_dtype, check_tensor,
                             inputs_trusted)
from minitfm.layers.masks import causal_mask

IMPLEMENTATIONS = ("manual", "fused")


def _check_inputs(q, k, v, mask, bias) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, floating=True)
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, D) with at least 2 dimensions, got {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share their last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if q.shape[-1] == 0:
        raise ValueError(f"the head dimension d_k must be >= 1 (attention divides by sqrt(d_k)), got q {tuple(q.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys T_k, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    check_same_dtype(("q", q), ("k", k), ("v", v))
    batch = broadcast_or_raise(q.shape[:-2], k.shape[:-2], f"the leading (batch, head) dimensions of q and k must "
                               f"broadcast, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    broadcast_or_raise(batch, v.shape[:-2], f"the leading (batch, head) dimensions of v must broadcast with q's and "
                       f"k's, got v {tuple(v.shape)} and q {tuple(q.shape)}")
    scores_shape = batch + (q.shape[-2], k.shape[-2])
    for name, extra, want_bool in (("mask", mask, True), ("bias", bias, False)):
        if extra is None:
            continue
        check_tensor(extra, name)
        if want_bool and extra.dtype != torch.bool:
            raise TypeError(f"mask must be a boolean tensor (True = may attend), got dtype {extra.dtype}")
        if not want_bool and not extra.is_floating_point():
            raise TypeError(f"bias must be a floating-point tensor added to the scores, got dtype {extra.dtype}")
        try:
            if torch.broadcast_shapes(extra.shape, scores_shape) != scores_shape:
                raise RuntimeError
        except RuntimeError:
            raise ValueError(
                f"{name} must broadcast to the scores' shape (..., T_q, T_k) = {tuple(scores_shape)}, "
                f"got {tuple(extra.shape)}"
            ) from None


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    *,
    dropout_p: float = 0.0,
    scale: float | None = None,
    impl: str = "manual",
    softcap: float | None = None,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attend from queries to keys and mix the values.

    Args:
        q: (..., T_q, Dh) queries.
        k: (..., T_k, Dh) keys.
        v: (..., T_k, Dv) values.
        mask: optional boolean mask, ``True`` = may attend, broadcastable to (..., T_q, T_k).
        bias: optional float tensor added to the scores before the softmax (ALiBi uses this),
            broadcastable to (..., T_q, T_k).
        dropout_p: dropout on the attention weights; pass 0.0 in evaluation.
        scale: multiplier of the scores; defaults to ``1 / sqrt(Dh)``.
        impl: ``"manual"`` (the three steps the book explains, returns the weights) or ``"fused"``
            (``torch.nn.functional.scaled_dot_product_attention``, faster and leaner; returns no weights).
        softcap: Gemma 2's soft cap c: the scaled scores s become c tanh(s / c) before the mask and bias, so none
            exceeds c in size. Only the manual path computes it (PyTorch's kernel has no such step).
        causal: also hide the future, as ``mask=causal_mask(T_q, T_k)`` would (combined with ``mask`` if given):
            query i sees keys 0 .. i + (T_k - T_q). The same result as passing that mask; without a mask or bias
            and with T_q = T_k, the fused path hands it to PyTorch's kernel (``is_causal``), which skips the
            hidden half of the scores and builds no mask: a training step's attention.

    Returns:
        ``(out, weights)``: out is (..., T_q, Dv); weights is (..., T_q, T_k) for ``"manual"`` and
        ``None`` for ``"fused"``.

    A query whose keys are all masked has nothing to attend to: its weights are all zero and its output
    is zero (finite in fp32, fp16 and bf16), the same as PyTorch's fused kernel.
    """
    if not inputs_trusted():  # a model's forward checked what it passes here once, not per layer
        check_choice(impl, "impl", IMPLEMENTATIONS)
        check_probability(dropout_p, "dropout_p")
        _check_inputs(q, k, v, mask, bias)
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
        if causal and k.shape[-2] < q.shape[-2]:
            raise ValueError(f"causal=True needs at least as many keys as queries (the queries are the last T_q "
                             f"positions), got q {tuple(q.shape)} and k {tuple(k.shape)}")
        if scale is not None:
            check_number(scale, "scale")
        if softcap is not None:
            check_number(softcap, "softcap", low=0.0, low_open=True)
            if impl == "fused":
                raise ValueError("softcap needs impl='manual': PyTorch's fused kernel cannot cap the scores")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if impl == "fused":
        return fused_attention(q, k, v, mask, bias, dropout_p, scale, causal=causal), None
    if causal:
        mask = _with_causal(mask, q, k)

    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T_q, Dh) @ (..., Dh, T_k) -> (..., T_q, T_k)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap  # a smooth clip to (-softcap, softcap)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)  # a float32 bias (ALiBi) must not promote fp16/bf16 scores
    if mask is not None:
        # The most negative finite number, not -inf: a fully masked row then stays finite (all
        # entries equal) instead of becoming exp(-inf - -inf) = NaN. Its weights are zeroed below.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # exact zeros for masked keys and empty rows
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights  # (..., T_q, T_k) @ (..., T_k, Dv) -> (..., T_q, Dv)


def _with_causal(mask: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``mask`` and the (T_q, T_k) causal mask (bottom-right aligned), combined; the causal one alone if no mask."""
    causal = causal_mask(q.shape[-2], k.shape[-2], device=q.device)[0]  # (T_q, T_k)
    return causal if mask is None else mask & causal


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                    bias: torch.Tensor | None, dropout_p: float, scale: float, *, causal: bool = False) -> torch.Tensor:
    """The ``impl="fused"`` path of :func:`scaled_dot_product_attention`, without its checks: PyTorch's
    ``F.scaled_dot_product_attention`` with the library's mask convention (bool, ``True`` = may attend) and an
    optional float ``bias`` combined into one additive mask, and a query with no visible key giving zeros.

    q (..., T_q, Dh), k (..., T_k, Dh), v (..., T_k, Dv) -> (..., T_q, Dv). The caller has checked the inputs
    (the lean decode step calls it with tensors it built). ``causal`` as in :func:`scaled_dot_product_attention`."""
    if causal:
        if mask is None and bias is None and q.shape[-2] == k.shape[-2]:
            # PyTorch's own causal masking (top-left aligned, which is bottom-right when T_q = T_k): every query
            # sees at least itself, so no row is empty and nothing needs pinning to zero
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale, is_causal=True)
        mask = _with_causal(mask, q, k)
    attn_mask = mask
    if bias is not None:
        attn_mask = bias.to(q.dtype)
        if mask is not None:
            attn_mask = attn_mask.masked_fill(~mask, float("-inf"))
    if attn_mask is not None and attn_mask.dim() < q.dim():
        # PyTorch's fast CPU kernels accept only masks with q's rank; others silently take the slow
        # path that materialises the (T_q, T_k) weights. Add the missing leading axes (a free view).
        attn_mask = attn_mask.reshape((1,) * (q.dim() - attn_mask.dim()) + tuple(attn_mask.shape))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    if mask is not None:
        # Older PyTorch releases return NaN for rows with no visible key; pin them to zero everywhere.
        empty = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
        out = out.masked_fill(empty, 0.0)
    return out
