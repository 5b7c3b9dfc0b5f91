"""Checkers for chapter 5: RMSNorm and LayerNorm as functions, and the SwiGLU feed-forward network as a function
of its three weight matrices.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.layers.feedforward import SwiGLU
from minitfm.layers.norms import RMSNorm


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


def _glu(x, w_gate, w_up, w_down, act=F.silu, swap=False):
    gate, up = (w_up, w_gate) if swap else (w_gate, w_up)
    return F.linear(act(F.linear(x, gate)) * F.linear(x, up), w_down)


def check_swiglu(swiglu, verbose: bool = True) -> CheckResult:
    """Check ``swiglu(x, w_gate, w_up, w_down) -> (..., D)``: down(silu(gate(x)) * up(x)), no biases.

    x is (..., D); weights keep nn.Linear's (out, in) layout: w_gate and w_up (F, D), w_down (D, F).
    """
    mistakes = [
        Mistake("gate and up are swapped: the SiLU goes on x @ w_gate.T, which then multiplies x @ w_up.T",
                lambda i: _glu(*i.values(), swap=True)),
        Mistake("you used a sigmoid gate (GLU); SwiGLU's gate is SiLU, x * sigmoid(x)",
                lambda i: _glu(*i.values(), act=torch.sigmoid)),
        Mistake("you used ReLU; SwiGLU's gate is SiLU, x * sigmoid(x)", lambda i: _glu(*i.values(), act=F.relu)),
        Mistake("you used GELU; SwiGLU's gate is SiLU, x * sigmoid(x)", lambda i: _glu(*i.values(), act=F.gelu)),
        Mistake("the gate is missing: you apply SiLU to one projection and never multiply by the other",
                lambda i: F.linear(F.silu(F.linear(i["x"], i["w_gate"])), i["w_down"])),
    ]

    def case(what, lead, d, f, seed, dtype=torch.float32, atol=1e-5):
        def make():
            return {"x": randn(*lead, d, seed=seed, dtype=dtype),
                    "w_gate": (randn(f, d, seed=seed + 1) / d ** 0.5).to(dtype),
                    "w_up": (randn(f, d, seed=seed + 2) / d ** 0.5).to(dtype),
                    "w_down": (randn(d, f, seed=seed + 3) / f ** 0.5).to(dtype)}
        i = make()
        ffn = SwiGLU(d, f).to(dtype)
        for name in ("gate", "up", "down"):
            getattr(ffn, f"{name}_proj").weight.data.copy_(i[f"w_{name}"])
        with torch.no_grad():
            expected = ffn(i["x"])
        return Case(what, make, expected, mistakes, atol=atol, rtol=1e-2 if dtype != torch.float32 else 1e-4)

    cases = [
        case("x (2, 4, 6), F=16", (2, 4), 6, 16, seed=1),
        case("F=5 < D=8, odd", (1, 3), 8, 5, seed=2),
        case("one token, x (1, 1, 4), F=4 (square weights)", (1, 1), 4, 4, seed=3),
        case("float16, x (2, 3, 8), F=12", (2, 3), 8, 12, seed=4, dtype=torch.float16, atol=2e-3),
    ]
    return run_cases("check_swiglu", swiglu, cases, verbose=verbose)
