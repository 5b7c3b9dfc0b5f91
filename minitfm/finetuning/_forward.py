"""A DecoderOnlyLM's forward pass with an attention mask the caller gives (packing, classification).

``DecoderOnlyLM.forward`` builds its own mask (causal, and padding from ``key_mask``); packed rows need a
block-diagonal one. This runs the model's own modules in the same order as ``forward``: embeddings, blocks,
final norm, with ``mask`` (B, 1, T, T) instead.
"""
from __future__ import annotations

import torch

from minitfm._checks import check_tensor, trusted_inputs
from minitfm.models import DecoderOnlyLM


def check_decoder(model) -> None:
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be a minitfm DecoderOnlyLM, got {type(model).__name__}")


def hidden_states(model: DecoderOnlyLM, tokens: torch.Tensor, mask: torch.Tensor,
                  positions: torch.Tensor) -> torch.Tensor:
    """(B, T) ids, a bool mask (B, 1, T, T) (``True`` = may attend) and (B, T) positions -> (B, T, D), the
    final norm's output (what ``lm_head`` reads)."""
    check_decoder(model)
    model.check_tokens(tokens, "tokens")
    b, t = tokens.shape
    check_tensor(mask, "mask", ndim=4)
    if mask.dtype != torch.bool or mask.shape[-2:] != (t, t) or mask.shape[0] not in (1, b):
        raise ValueError(f"mask must be bool (B, 1, T, T) = ({b}, 1, {t}, {t}), got {mask.dtype} {tuple(mask.shape)}")
    x = model.embed(tokens, positions)
    bias = model.alibi(t, t)
    with trusted_inputs():
        for layer in model.layers:
            x, _, _ = layer(x, mask=mask, bias=bias, rope=model.rope, positions=positions)
    return model.final_norm(x)
