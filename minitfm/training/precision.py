"""Floating-point formats for mixed precision: their ranges, and what casting does to a tensor.

A float stores sign, exponent and mantissa. The exponent bits set the **range** (largest value, smallest
normal value); the mantissa bits set the **precision** (``eps``, the gap between 1 and the next number).

    float32:  8 exponent bits, 23 mantissa bits
    float16:  5 exponent bits, 10 mantissa bits  -> max 65504, gradients below ~6e-8 become 0
    bfloat16: 8 exponent bits,  7 mantissa bits  -> float32's range, but only ~3 decimal digits

Below the smallest normal number come the **subnormals**: evenly spaced, fewer significant bits, down to
``smallest_normal * eps``; anything smaller rounds to zero (underflow).
"""
from __future__ import annotations

import torch

from minitfm._checks import check_tensor

FORMATS = (torch.float16, torch.bfloat16, torch.float32)


def format_info(dtype: torch.dtype) -> dict:
    """Range and precision of a floating dtype: bits, max, smallest normal, smallest subnormal, eps."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype such as torch.float16, got {dtype!r}")
    info = torch.finfo(dtype)
    return {"dtype": str(dtype).removeprefix("torch."), "bits": info.bits, "max": info.max,
            "smallest_normal": info.smallest_normal, "smallest_subnormal": info.smallest_normal * info.eps,
            "eps": info.eps}


def cast_report(values: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> dict:
    """What happens to ``values * scale`` when cast to ``dtype`` (for example gradients to float16).

    Returns fractions of the non-zero entries that ``underflow`` (become 0), ``overflow`` (become
    +-inf) and land among the ``subnormal`` numbers (kept, with fewer significant bits).
    """
    check_tensor(values, "values", floating=True)
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    info = format_info(dtype)
    x = values.detach().double().flatten() * scale  # double: the reference values, exact enough
    x = x[x != 0]
    if x.numel() == 0:
        raise ValueError("values has no non-zero entry to report on")
    cast = x.to(dtype)
    finite = torch.isfinite(cast)
    size = cast.abs().double()
    return {"underflow": float((cast == 0).double().mean()),
            "overflow": float((~finite).double().mean()),
            "subnormal": float(((size > 0) & (size < info["smallest_normal"])).double().mean())}
