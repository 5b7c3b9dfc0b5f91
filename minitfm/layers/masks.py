"""Attention masks.

Convention (the same as ``torch.nn.functional.scaled_dot_product_attention``): a boolean mask holds
``True`` where a query **may attend** to a key and ``False`` where it may not. Masks broadcast against
attention scores of shape (B, H, T_q, T_k).

Glossary: B batch, H heads, T_q queries, T_k keys.
"""
from __future__ import annotations

import torch

from minitfm._checks import broadcast_or_raise, check_positive_int, check_tensor, check_token_ids


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padding keys.

    Args:
        tokens: (B, T) integer token ids.
        pad_id: the id used for padding.

    Returns:
        (B, 1, 1, T) boolean mask, ``True`` for real tokens. The two singleton axes broadcast over heads
        and queries: every query may look at every real key of its own sequence.
    """
    check_token_ids(tokens, "tokens")
    if isinstance(pad_id, bool) or not isinstance(pad_id, int):
        hint = "; a model without a padding token (pad_id=None) pads nothing, so it needs no padding mask" \
            if pad_id is None else ""
        raise TypeError(f"pad_id must be an int (the padding token's id), got {type(pad_id).__name__} {pad_id!r}{hint}")
    return (tokens != pad_id)[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


def causal_mask(t_q: int, t_k: int | None = None, device=None) -> torch.Tensor:
    """Mask out the future.

    Query ``i`` may attend to keys ``0 .. i + (t_k - t_q)``: the mask is aligned **bottom-right**, so the
    last query always sees every key. With ``t_k == t_q`` this is the usual lower-triangular mask; with a
    KV cache (``t_k > t_q``, the new queries are the last ``t_q`` positions) it stays correct.

    Args:
        t_q: number of queries.
        t_k: number of keys (defaults to ``t_q``); must be >= ``t_q``.

    Returns:
        (1, T_q, T_k) boolean mask, ``True`` on and below the (shifted) diagonal.
    """
    t_k = t_q if t_k is None else t_k
    check_positive_int(t_q, "t_q")
    check_positive_int(t_k, "t_k")
    if t_k < t_q:
        raise ValueError(f"causal_mask needs t_k >= t_q (queries are the last t_q positions), got t_q={t_q}, t_k={t_k}")
    future = torch.ones(t_q, t_k, dtype=torch.bool, device=device).triu(diagonal=t_k - t_q + 1)
    return (~future)[None]  # (T_q, T_k) -> (1, T_q, T_k)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of boolean masks (``None`` entries are skipped); broadcasting applies.

    Example: ``combine_masks(padding_mask(tgt, pad), causal_mask(T))`` has shape (B, 1, T, T).
    Returns ``None`` when every mask is ``None``.
    """
    result = None
    for i, mask in enumerate(masks):
        if mask is None:
            continue
        check_tensor(mask, f"mask {i}")
        if mask.dtype != torch.bool:
            raise TypeError(f"masks must be boolean (True = may attend), mask {i} has dtype {mask.dtype}")
        if result is not None:
            broadcast_or_raise(result.shape, mask.shape, f"masks must broadcast together, got the masks before "
                               f"mask {i} combined to {tuple(result.shape)} and mask {i} {tuple(mask.shape)}")
        result = mask if result is None else result & mask
    return result


def block_diagonal_mask(segments: torch.Tensor) -> torch.Tensor:
    """(B, T) segment ids -> (B, 1, T, T) bool: ``True`` where query i may attend to key j, i.e. j <= i and
    both tokens belong to the same segment (several sequences packed in one row, chapter 15)."""
    check_tensor(segments, "segments", ndim=2)
    if segments.is_floating_point() or segments.is_complex() or segments.dtype == torch.bool:
        raise TypeError(f"segments must hold integer segment ids, got {segments.dtype}")
    t = segments.shape[1]
    same = segments[:, :, None] == segments[:, None, :]  # (B, T, T)
    return (same & causal_mask(t, device=segments.device))[:, None]  # (B, 1, T, T): one mask for every head


def sliding_window_mask(t_q: int, t_k: int, window: int, device=None) -> torch.Tensor:
    """(T_q, T_k) bool: ``True`` where key j is one of the ``window`` latest keys of query i, counting i itself,
    i.e. j > i - window, with queries the last T_q of the T_k positions (bottom-right, like :func:`causal_mask`).
    Combine it with the causal mask; a query then sees at most ``window`` keys (Mistral, Gemma 2/3)."""
    for name, value in (("t_q", t_q), ("t_k", t_k), ("window", window)):
        check_positive_int(value, name)
    q_pos = torch.arange(t_k - t_q, t_k, device=device)[:, None]  # (T_q, 1) absolute positions of the queries
    return torch.arange(t_k, device=device)[None, :] > q_pos - window  # (T_q, T_k)
