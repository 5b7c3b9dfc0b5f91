"""The decoder-only model's per-layer plumbing (private to ``minitfm``): which mask each layer kind gets, and the
positions counted from a padding mask. :class:`~minitfm.models.DecoderOnlyLM` calls these once per forward pass.

Glossary: B batch, T new tokens, P tokens already cached, W a sliding window.
"""
from __future__ import annotations

import torch

from minitfm._checks import check_tensor
from minitfm.layers.masks import sliding_window_mask
from minitfm.layers.multihead import chunked_causal_mask, count_left_padding

# The ModelConfig fields only DecoderOnlyLM implements: an EncoderDecoder refuses them unless at their default
DECODER_ONLY_FIELDS = ("sliding_window", "nope_layers", "rope_local_base", "final_softcap", "n_experts",
                       "attn_temperature", "mla", "attn_sinks", "linear_layers", "attention_chunk", "attn_output_gate",
                       "gemma4")


def mask_keys(config) -> list:
    """Per layer of a resolved ModelConfig: its window W, ("chunk", C), or None (it sees the whole past)."""
    return [config.layer_window(i) or (("chunk", config.layer_chunk(i)) if config.layer_chunk(i) else None)
            for i in range(config.n_layers)]


def window_masks(keys, mask: torch.Tensor | None, t: int, past: int, device, key_mask=None) -> dict:
    """{W: the mask of the layers with window W (None: every key visible)} for each int W of ``keys``, {("chunk", C):
    the mask of the layers with chunks of C positions (Llama 4; counted from each row's first real token of
    ``key_mask``)}, and {None: mask} for the layers that see the whole past."""
    masks = {None: mask}
    for key in set(keys) - {None}:
        if isinstance(key, tuple):  # ("chunk", C)
            padding = None if key_mask is None else count_left_padding(key_mask)
            chunks = chunked_causal_mask(t, past + t, key[1], padding, device=device)  # (T, P + T) or (B, 1, T, P + T)
            masks[key] = chunks if mask is None else mask & chunks
            continue
        window = sliding_window_mask(t, past + t, key, device=device)  # (T, P + T)
        masks[key] = (None if past + t <= key else window) if mask is None else mask & window
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
