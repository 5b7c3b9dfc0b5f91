"""Normalisation layers: PyTorch's LayerNorm, a from-scratch RMSNorm, and Gemma's RMSNorm with a (1 + w) gain.

Glossary: D d_model. Both normalise each token's D features on their own (no batch statistics,
unlike BatchNorm), so they behave the same in training and inference and for any batch size.
"""
from __future__ import annotations

import torch
from torch import nn

from minitfm._checks import check_choice, check_module_input, check_number, check_positive_int

NORMS = ("layer", "rms", "rms_offset")


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight.

    Unlike LayerNorm it neither subtracts the mean nor adds a bias. ``eps`` sits *inside* the square
    root, as in the paper and ``torch.nn.RMSNorm``.
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_number(eps, "eps", low=0.0)
        self.eps, self.d_model = eps, d_model
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_module_input(x, "x", self, self.d_model)
        # Compute the statistic in float32 so fp16/bf16 inputs do not overflow when squared; float32 and
        # float64 stay in their own precision (as torch.nn.RMSNorm and the lean decode step compute).
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        normed = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return normed.to(x.dtype) * self.gain()

    def gain(self) -> torch.Tensor:
        """(D,) what the normalised vector is multiplied by: the weight itself."""
        return self.weight


class OffsetRMSNorm(RMSNorm):
    """Gemma's RMSNorm: y = x / sqrt(mean(x^2) + eps) * (1 + weight), the weight stored as an offset from 1 and
    initialised at 0 (weight decay then pulls the gain towards 1, not towards 0). The same function as an
    RMSNorm whose weight is 1 + w, but not the same checkpoint: a loader must know which one it reads."""

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__(d_model, eps)
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in (torch.float16, torch.bfloat16):
            return super().forward(x)
        check_module_input(x, "x", self, self.d_model)
        wide = x.float()  # Gemma multiplies by 1 + w in float32 too and rounds once (transformers does the same)
        normed = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype)

    def gain(self) -> torch.Tensor:
        return 1.0 + self.weight


def make_norm(kind: str, d_model: int, eps: float = 1e-5, *, bias: bool = True) -> nn.Module:
    """``"layer"`` -> ``nn.LayerNorm(d_model)`` (without its additive bias if ``bias=False``, as nanoGPT's
    ``bias=False``); ``"rms"`` -> ``RMSNorm(d_model)``; ``"rms_offset"`` -> ``OffsetRMSNorm(d_model)`` (Gemma's
    (1 + w) gain). The RMSNorms have no bias, whatever ``bias`` says."""
    check_choice(kind, "norm", NORMS)
    check_positive_int(d_model, "d_model")
    check_number(eps, "eps", low=0.0)
    if not isinstance(bias, bool):
        raise TypeError(f"bias must be a bool, got {type(bias).__name__}")
    if kind == "layer":
        return nn.LayerNorm(d_model, eps=eps, bias=bias)
    return RMSNorm(d_model, eps=eps) if kind == "rms" else OffsetRMSNorm(d_model, eps=eps)
