"""The training loss: cross-entropy with label smoothing (chapter 7)."""
from __future__ import annotations

import torch

from minitfm._checks import check_number, check_probability, check_tensor


def label_smoothed_cross_entropy(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.0,
                                 ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy against a smoothed target: 1 - smoothing on the right id, plus smoothing
    spread evenly over all V ids (the same convention as ``F.cross_entropy(label_smoothing=...)``).

    Args:
        logits: (..., V) unnormalised scores.
        target: (...) integer ids; positions equal to ``ignore_index`` (padding) do not count.
    """
    check_tensor(logits, "logits", floating=True)
    check_tensor(target, "target")
    check_probability(smoothing, "smoothing")
    check_number(ignore_index, "ignore_index", integer=True)
    if target.shape != logits.shape[:-1]:
        raise ValueError(f"target must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
                         f"got {tuple(target.shape)}")
    if target.is_floating_point() or target.dtype == torch.bool:
        raise TypeError(f"target must hold integer ids, got dtype {target.dtype}")
    keep = target != ignore_index  # (...)
    if not keep.any():
        raise ValueError("every target position equals ignore_index: there is nothing to learn from")
    low, high = int(target[keep].min()), int(target[keep].max())
    if low < 0 or high >= logits.shape[-1]:  # the clamp below would silently score a -1 as id 0
        raise ValueError(f"target ids must be in [0, V={logits.shape[-1]}) or ignore_index={ignore_index}, "
                         f"got min {low}, max {high}")
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (..., V)
    nll = -log_probs.gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (...) -log p(right id)
    if smoothing == 0.0:  # the same number as the formula below, without computing a term it multiplies by 0
        return nll[keep].mean()
    uniform = -log_probs.mean(dim=-1)  # (...) cross-entropy against the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return loss[keep].mean()


