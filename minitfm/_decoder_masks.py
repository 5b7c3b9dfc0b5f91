"""The decoder-only model's per-layer plumbing (private to ``minitfm``): which mask each layer kind gets, and the
positions counted from a padding mask. :class:`~minitfm.models.DecoderOnlyLM` calls these once per forward pass.

Glossary: B batch, T new tokens, P tokens already cached, W a sliding window.
"""
from __future__ import annotations

import torch

from minitfm._checks import check_tensor
from minitfm.layers.masks import sliding_window_mask


def window_masks(windows, mask: torch.Tensor | None, t: int, past: int, device) -> dict:
    """{W: the mask of the layers with window W (None: every key visible)} for each W of ``windows``, and
    {None: mask} for the layers that see the whole past."""
    masks = {None: mask}
    for w in set(windows) - {None}:
        window = sliding_window_mask(t, past + t, w, device=device)  # (T, P + T)
        masks[w] = (None if past + t <= w else window) if mask is None else mask & window
    return masks


def positions_from_mask(key_mask: torch.Tensor | None, past: int, t: int, batch: int, device) -> torch.Tensor:
    """``past + arange(t)`` (T,) without a ``key_mask``, else (B, T) each token's index among its row's real tokens
    (``cumsum(key_mask) - 1``), so left padding does not shift them. ``key_mask`` (B, P + T) bool is checked."""
    if key_mask is None:
        return torch.arange(past, past + t, device=device)  # (T,)
    check_tensor(key_mask, "key_mask", ndim=2)
    if key_mask.dtype != torch.bool or key_mask.shape != (batch, past + t):
        raise ValueError(f"key_mask must be bool (B, P + T) = ({batch}, {past + t}) with True = real token, "
                         f"got {key_mask.dtype} {tuple(key_mask.shape)}")
    counted = (key_mask.long().cumsum(dim=-1) - 1).clamp(min=0)  # (B, P + T): index among real tokens
    return counted[:, past:]  # (B, P + T) -> (B, T)
