"""Softmax attention as gpt-oss and Llama 4 change it: a sink logit per head, chunked masks, a query temperature
that grows with the position, and a query/key norm without weights.

Glossary: B batch, H query heads, H_kv key/value heads (H divides by H_kv), T_q queries, T_k keys, Dh head
dimension, Dv value dimension, C chunk size.

Private to ``minitfm.layers`` (the folder holds its 15 public modules): a layer in this package imports it.
Mask convention as in :mod:`minitfm.layers.masks`: boolean, ``True`` = may attend.
"""
from __future__ import annotations

import math

import torch

from minitfm._checks import (broadcast_or_raise, check_number, check_positive_int, check_same_dtype, check_tensor,
                             inputs_trusted)


def _check_sink_inputs(q, k, v, sinks, mask) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, ndim=4, floating=True)
    check_same_dtype(("q", q), ("k", k), ("v", v))
    (b, h, _, dh), (b_k, h_kv, t_k, dh_k) = q.shape, k.shape
    if (b_k, dh_k) != (b, dh) or tuple(v.shape[:3]) != (b, h_kv, t_k):
        raise ValueError(f"q must be (B, H, T_q, Dh), k (B, H_kv, T_k, Dh) and v (B, H_kv, T_k, Dv) with one B, Dh "
                         f"and T_k, got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if h % h_kv:
        raise ValueError(f"the query heads H={h} must divide by the key/value heads H_kv={h_kv}")
    check_tensor(sinks, "sinks", ndim=1, floating=True)
    if sinks.shape[0] != h:
        raise ValueError(f"sinks must hold one logit per query head, shape ({h},), got {tuple(sinks.shape)}")
    if mask is not None:
        check_tensor(mask, "mask")
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}")
        scores = (b, h, q.shape[2], t_k)
        if broadcast_or_raise(mask.shape, scores, f"mask must broadcast to the scores' shape (B, H, T_q, T_k) = "
                              f"{scores}, got {tuple(mask.shape)}") != torch.Size(scores):
            raise ValueError(f"mask must broadcast to the scores' shape (B, H, T_q, T_k) = {scores}, "
                             f"got {tuple(mask.shape)}")


def sink_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor,
                   mask: torch.Tensor | None = None, *, scale: float | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention with one learned sink logit per head, which joins the softmax and carries no value.

    For query i with scores s_ij = q_i . k_j * scale over its visible keys and its head's sink logit z:

        w_ij = exp(s_ij) / (exp(z) + sum_m exp(s_im)),    out_i = sum_j w_ij v_j

    The weights now sum to 1 - exp(z) / (exp(z) + sum_m exp(s_im)) < 1: the sink is a key every query sees
    whose value is the zero vector. Plain softmax must give its whole unit of weight to some token, so a head
    with nothing useful to read in a context still writes a mixture of values; with a sink, a head whose scores
    all stay well below z gives weights near 0 and an output near 0: it attends to "nothing". Xiao et al. 2023
    ("Efficient Streaming Language Models with Attention Sinks") found that trained models learn this anyway,
    by dumping weight on the first tokens, and that a windowed cache which evicts them breaks; they proposed a
    learned sink token. gpt-oss (OpenAI, gpt-oss model card, 2025) gives every head such a logit, on its
    sliding-window layers too. z = 0 for every head is the "softmax plus one" of Miller's "Attention Is Off By
    One" (2023); z -> -inf is plain attention. A query that sees no key gives zeros (all its weight goes to the sink).

    Args:
        q: (B, H, T_q, Dh) queries. k: (B, H_kv, T_k, Dh) keys. v: (B, H_kv, T_k, Dv) values (grouped-query
            attention: query head h reads key/value head h // (H / H_kv)).
        sinks: (H,) the sink logits, in logit units (added to nothing, not scaled).
        mask: optional bool, ``True`` = may attend, broadcastable to (B, H, T_q, T_k) (causal, sliding-window,
            padding: :mod:`minitfm.layers.masks`).
        scale: multiplier of q . k; defaults to 1 / sqrt(Dh).

    Returns:
        ``(out, weights)``: out (B, H, T_q, Dv); weights (B, H, T_q, T_k), each row summing to less than 1 (the
        sink's share is 1 - the sum). Computed as transformers' ``eager_attention_forward`` for gpt-oss does.
    """
    if not inputs_trusted():
        _check_sink_inputs(q, k, v, sinks, mask)
        if scale is not None:
            check_number(scale, "scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    repeat = q.shape[1] // k.shape[1]
    if repeat > 1:  # (B, H_kv, T_k, .) -> (B, H, T_k, .): each key/value head serves H / H_kv query heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T_q, Dh) @ (B, H, Dh, T_k) -> (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # finite: exp(min - max) is 0
    sink = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)  # (H,) -> (B, H, T_q, 1)
    logits = torch.cat([scores, sink], dim=-1)  # (B, H, T_q, T_k + 1): the sink is one more "key"
    logits = logits - logits.amax(dim=-1, keepdim=True)  # no overflow in half precision
    weights = torch.softmax(logits, dim=-1)[..., :-1]  # drop the sink's column: it has no value to mix
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # exact zeros, even when the sink logit is also very low
    return weights @ v, weights  # (B, H, T_q, T_k) @ (B, H, T_k, Dv) -> (B, H, T_q, Dv)


def count_left_padding(padding_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) padding mask (True or 1 = real token) -> (B,) the number of padding tokens before each row's first
    real token (transformers: ``(mask.cumsum(-1) == 0).sum(-1)``), for :func:`chunked_causal_mask`."""
    check_tensor(padding_mask, "padding_mask", ndim=2)
    if padding_mask.is_floating_point():
        raise TypeError(f"padding_mask must be bool or integer (True or 1 = real token), got {padding_mask.dtype}")
    return (padding_mask.long().cumsum(dim=-1) == 0).sum(dim=-1)


def chunked_causal_mask(t_q: int, t_k: int, chunk_size: int, left_padding: torch.Tensor | None = None,
                        device=None) -> torch.Tensor:
    """Llama 4's chunked attention: query i sees key j only when j <= i and both lie in the same chunk of C
    tokens, chunk n holding positions nC .. nC + C - 1 counted from the row's first real token.

    Llama 4 (Meta, "The Llama 4 herd", blog and model card, 2025) interleaves these local layers (with RoPE) with
    global layers without positions (NoPE, see :func:`attention_temperature`). Unlike a sliding window, which
    always shows the W latest keys, the first query of a chunk sees only itself and the last sees C keys;
    in exchange the cache of a chunked layer never holds more than the current chunk.

    The rule is transformers' ``chunked_causal_mask_function``: j <= i and
    (j - p) // C == (i - p) // C, with p the row's left padding (so padding does not shift the chunks).

    Args:
        t_q: queries, the last t_q of the t_k positions (bottom-right, like :func:`minitfm.layers.masks.causal_mask`).
        t_k: keys, all positions from the start (a full cache).
        chunk_size: C (``attention_chunk_size`` in the config).
        left_padding: optional (B,) integer tensor, each row's padding before its first real token
            (:func:`count_left_padding`). Combine the result with the padding mask; padded keys are not removed.

    Returns:
        (T_q, T_k) bool, or (B, 1, T_q, T_k) with ``left_padding``; ``True`` = may attend.
    """
    for name, value in (("t_q", t_q), ("t_k", t_k), ("chunk_size", chunk_size)):
        check_positive_int(value, name)
    if t_k < t_q:
        raise ValueError(f"chunked_causal_mask needs t_k >= t_q (queries are the last t_q positions), got "
                         f"t_q={t_q}, t_k={t_k}")
    q_pos = torch.arange(t_k - t_q, t_k, device=device)[:, None]  # (T_q, 1) absolute positions of the queries
    k_pos = torch.arange(t_k, device=device)[None, :]  # (1, T_k)
    if left_padding is not None:
        check_tensor(left_padding, "left_padding", ndim=1)
        if left_padding.is_floating_point() or left_padding.dtype == torch.bool:
            raise TypeError(f"left_padding must hold integer counts (count_left_padding), got {left_padding.dtype}")
        pad = left_padding.to(q_pos.device)[:, None, None, None]  # (B, 1, 1, 1)
        q_pos, k_pos = q_pos - pad, k_pos - pad  # positions from each row's first real token: (B, 1, T_q, T_k)
    same_chunk = torch.div(k_pos, chunk_size, rounding_mode="floor") == torch.div(q_pos, chunk_size,
                                                                                    rounding_mode="floor")
    return same_chunk & (k_pos <= q_pos)


def attention_temperature(positions: torch.Tensor, floor_scale: float, attn_scale: float) -> torch.Tensor:
    """Llama 4's attention temperature tuning for its NoPE layers: the query at position p is multiplied by

        tau(p) = 1 + attn_scale * log(1 + floor((p + 1) / floor_scale))

    which is 1 for the first floor_scale - 1 positions and then grows like log p, in steps of floor_scale.
    Without positions, a NoPE layer's softmax spreads over every key of a long context: the largest weight among
    n keys with bounded scores shrinks like 1/n. Scaling the logits by about log n keeps them peaked (Nakanishi
    2025, "Scalable-Softmax Is Superior for Attention", arXiv 2501.19399, which transformers cites here; Meta's
    Llama 4 blog, 2025, calls it "inference time temperature scaling of attention"). Config fields:
    ``attn_temperature_tuning`` switches it on, ``floor_scale`` (8192) and ``attn_scale`` (0.1).

    Args:
        positions: integer tensor of any shape (T,) or (B, T): each query's absolute position, counting the cache
            (transformers uses the cache length + arange(T) for every row, left padding included).
        floor_scale: the step in positions (> 0). attn_scale: the strength.

    Returns:
        tau, the same shape as ``positions``, in float32 (as transformers computes it); multiply q by it, e.g.
        q (B, H, T, Dh) * tau[:, None] for (T,) positions, before q . k.
    """
    check_tensor(positions, "positions")
    if positions.is_floating_point() or positions.dtype == torch.bool:
        raise TypeError(f"positions must hold integer positions, got {positions.dtype}")
    check_number(floor_scale, "floor_scale", low=0.0, low_open=True)
    check_number(attn_scale, "attn_scale")
    return torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0


def weightless_qk_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama 4's query/key norm (``use_qk_norm``): x / sqrt(mean(x^2) + eps) over the head dimension, without a
    learned weight, computed in float32 and returned in x's dtype (transformers' ``Llama4TextWeightlessRMSNorm``,
    once named ``Llama4TextL2Norm``: it divides by the root mean square, so a normalised head vector has length
    about sqrt(Dh), not 1). Llama 4 applies it to q and k after RoPE on its RoPE layers only (RoPE preserves
    length, so the order changes only rounding); its ``eps`` is the config's ``rms_norm_eps`` (Meta, Llama 4
    model card, 2025; the config's ``use_qk_norm``). With |q|, |k| about sqrt(Dh), every scaled score
    q . k / sqrt(Dh) lies within about +-sqrt(Dh): no logit can grow without bound during training.

    x: (..., Dh) -> (..., Dh).
    """
    check_tensor(x, "x", floating=True)
    check_number(eps, "eps", low=0.0)
    wide = x.float()
    return (wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + eps)).type_as(x)
