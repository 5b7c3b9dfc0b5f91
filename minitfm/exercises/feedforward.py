"""Checker for the SwiGLU feed-forward network written as a function of its three weight matrices."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..feedforward import SwiGLU
from ._core import Case, CheckResult, Mistake, randn, run_cases


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
