"""Checkers for normalisation written from scratch: RMSNorm and LayerNorm as functions."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..norms import RMSNorm
from ._core import Case, CheckResult, Mistake, randn, run_cases


def _rms(x, weight, eps, *, eps_outside=False, dim=-1, center=False, use_weight=True):
    x32 = x.float()
    if center:
        x32 = x32 - x32.mean(dim=dim, keepdim=True)
    ms = x32.pow(2).mean(dim=dim, keepdim=True)
    normed = x32 / (ms.sqrt() + eps) if eps_outside else x32 * torch.rsqrt(ms + eps)
    return normed.to(x.dtype) * (weight if use_weight else 1)


def check_rms_norm(rms_norm, verbose: bool = True) -> CheckResult:
    """Check ``rms_norm(x, weight, eps) -> y`` with y = x / sqrt(mean(x^2) + eps) * weight.

    x is (..., D), weight (D,); the mean runs over the last axis, ``eps`` sits inside the square root. The
    output has x's dtype; compute the statistic in float32 so that fp16 inputs do not overflow when squared.
    """
    mistakes = [
        Mistake("eps is outside the square root: RMSNorm divides by sqrt(mean(x^2) + eps), not sqrt(mean(x^2)) + eps",
                lambda i: _rms(*i.values(), eps_outside=True)),
        Mistake("you subtract the mean: that is LayerNorm. RMSNorm divides by the root mean square only",
                lambda i: _rms(*i.values(), center=True)),
        Mistake("the mean runs over the wrong axis: normalise each token over its D features (dim=-1)",
                lambda i: _rms(*i.values(), dim=0)),
        Mistake("the learned weight is missing: multiply the normalised x by weight",
                lambda i: _rms(*i.values(), use_weight=False)),
        Mistake("float16 overflow: squaring values above 256 exceeds float16's maximum (65504), so mean(x^2) is inf "
                "and your output collapses to 0. Compute mean(x^2) in "
                "float32 (x.float()), then cast the result back to x's dtype",
                lambda i: (i["x"] * torch.rsqrt(i["x"].pow(2).mean(-1, keepdim=True) + i["eps"])) * i["weight"]),
    ]

    def case(what, shape, seed, eps=1e-6, scale=1.0, dtype=torch.float32, atol=1e-5):
        def make():
            d = shape[-1]
            return {"x": (randn(*shape, seed=seed) * scale).to(dtype),
                    "weight": (1 + 0.5 * randn(d, seed=seed + 1)).to(dtype), "eps": eps}
        i = make()
        rms = RMSNorm(shape[-1], eps=eps).to(dtype)
        rms.weight.data.copy_(i["weight"])
        with torch.no_grad():
            expected = rms(i["x"])
        return Case(what, make, expected, mistakes, atol=atol, rtol=1e-2 if dtype != torch.float32 else 1e-4)

    cases = [
        case("x (2, 5, 8)", (2, 5, 8), seed=1),
        case("small values (1e-3) with eps=1e-2, where eps matters", (3, 4, 6), seed=2, eps=1e-2, scale=1e-3),
        case("one token, odd D=7", (1, 1, 7), seed=3),
        case("float16 values near 500", (2, 3, 16), seed=4, scale=500.0, dtype=torch.float16, atol=1e-2),
    ]
    return run_cases("check_rms_norm", rms_norm, cases, verbose=verbose)


def _layer(x, w, b, eps, *, unbiased=False, eps_outside=False, dim=-1, center=True, affine=True):
    mean = x.mean(dim=dim, keepdim=True) if center else 0
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased) if center else x.pow(2).mean(dim, keepdim=True)
    y = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / torch.sqrt(var + eps)
    return y * w + b if affine else y


def check_layer_norm(layer_norm, verbose: bool = True) -> CheckResult:
    """Check ``layer_norm(x, weight, bias, eps) -> y`` with y = (x - mean) / sqrt(var + eps) * weight + bias.

    x is (..., D), weight and bias (D,); mean and (biased, divide by D) variance run over the last axis,
    as ``torch.nn.LayerNorm`` does.
    """
    mistakes = [
        Mistake("you used the unbiased variance (dividing by D - 1, torch.var's default); LayerNorm divides by D: "
                "x.var(dim=-1, unbiased=False)", lambda i: _layer(*i.values(), unbiased=True)),
        Mistake("eps is outside the square root: divide by sqrt(var + eps)",
                lambda i: _layer(*i.values(), eps_outside=True)),
        Mistake("you forgot to subtract the mean (that is RMSNorm)", lambda i: _layer(*i.values(), center=False)),
        Mistake("the statistics run over the wrong axis: normalise each token over its D features (dim=-1)",
                lambda i: _layer(*i.values(), dim=0)),
        Mistake("weight and bias are missing: return y * weight + bias", lambda i: _layer(*i.values(), affine=False)),
    ]

    def case(what, shape, seed, eps=1e-5, scale=1.0):
        def make():
            d = shape[-1]
            return {"x": randn(*shape, seed=seed) * scale + 3.0, "weight": 1 + 0.5 * randn(d, seed=seed + 1),
                    "bias": randn(d, seed=seed + 2), "eps": eps}
        i = make()
        return Case(what, make, F.layer_norm(i["x"], (shape[-1],), i["weight"], i["bias"], eps), mistakes, atol=1e-4)

    cases = [
        case("x (2, 5, 8), mean 3", (2, 5, 8), seed=1),
        case("D=4, small spread where eps=0.1 matters", (3, 2, 4), seed=2, eps=0.1, scale=0.1),
        case("one token, odd D=7", (1, 1, 7), seed=3),
    ]
    return run_cases("check_layer_norm", layer_norm, cases, verbose=verbose)
