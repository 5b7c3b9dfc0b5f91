"""Checkers for positional information: the sinusoidal table, RoPE's rotation and ALiBi's slopes."""
from __future__ import annotations

import math

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.layers.positional import RotaryEmbedding, alibi_slopes, sinusoidal_encoding


def _table(positions, d, *, exponent_step=2, swap=False, halves=False, sign=-1):
    i = torch.arange(0, d, 2) if exponent_step == 2 else torch.arange(d // 2)
    angles = positions.float()[:, None] * torch.exp(sign * i * math.log(10000.0) / d)
    first, second = (torch.cos(angles), torch.sin(angles)) if swap else (torch.sin(angles), torch.cos(angles))
    if halves:
        return torch.cat([first, second], dim=-1)
    return torch.stack([first, second], dim=-1).flatten(-2)


def check_sinusoidal_encoding(sinusoidal_encoding_fn, verbose: bool = True) -> CheckResult:
    """Check ``sinusoidal_encoding(positions, d_model) -> (T, D) float32``.

    ``positions`` is a (T,) integer tensor; D is even. PE[pos, 2i] = sin(pos / 10000^(2i/D)) and
    PE[pos, 2i+1] = cos(pos / 10000^(2i/D)): sines in the even columns, cosines in the odd ones.
    """
    mistakes = [
        Mistake("sine and cosine are swapped: the even columns (0, 2, ...) hold the sines, the odd ones the cosines",
                lambda i: _table(*i.values(), swap=True)),
        Mistake("you put all the sines first and all the cosines after; the paper interleaves them: sin in column "
                "2i, cos in column 2i+1", lambda i: _table(*i.values(), halves=True)),
        Mistake("the exponent is off by a factor of 2: the frequency of pair i is 10000^(-2i/D), with 2i the even "
                "column index, not 10000^(-i/D)", lambda i: _table(*i.values(), exponent_step=1)),
        Mistake("the frequencies grow instead of shrink: divide pos by 10000^(2i/D), do not multiply",
                lambda i: _table(*i.values(), sign=1), atol=0.05),  # angles of 1e4 rad: float32 rounding
    ]

    def case(what, positions, d):
        make = lambda: {"positions": positions.clone(), "d_model": d}  # noqa: E731
        return Case(what, make, sinusoidal_encoding(positions, d), mistakes, atol=1e-4)

    cases = [
        case("positions 0..7, D=16", torch.arange(8), 16),
        case("one position, D=2", torch.arange(1), 2),
        case("positions 100..105 (not starting at 0), D=6", torch.arange(100, 106), 6),
        case("odd length 9, D=10", torch.arange(9), 10),
    ]
    return run_cases("check_sinusoidal_encoding", sinusoidal_encoding_fn, cases, verbose=verbose)


def _rope(x, positions, *, halves=False, sign=1, ignore_positions=False):
    d = x.shape[-1]
    pos = torch.arange(x.shape[-2]) if ignore_positions else positions
    ang = pos.float()[:, None] * 10000.0 ** (-torch.arange(0, d, 2).float() / d)  # (T, Dh/2)
    cos, sin = ang.cos().to(x.dtype), (sign * ang.sin()).to(x.dtype)
    if halves:
        x0, x1 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def check_rope(apply_rope, verbose: bool = True) -> CheckResult:
    """Check ``apply_rope(x, positions) -> rotated x`` (same shape and dtype).

    x is (..., T, Dh) with Dh even; ``positions`` is a (T,) integer tensor. Adjacent pairs
    (x_{2i}, x_{2i+1}) rotate by the angle pos * theta_i, theta_i = 10000^(-2i/Dh):
    (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos).
    """
    mistakes = [
        Mistake("you rotate the two halves (x_i, x_{i + Dh/2}) as GPT-NeoX and Llama do; this book pairs adjacent "
                "dimensions (x_{2i}, x_{2i+1}), as in the RoFormer paper", lambda i: _rope(**i, halves=True)),
        Mistake("your rotation goes the wrong way: (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos); check the sign "
                "of the sines", lambda i: _rope(**i, sign=-1)),
        Mistake("you ignore the positions argument and rotate token t by t; with a KV cache the new tokens sit at "
                "positions like 5, 6, 7", lambda i: _rope(**i, ignore_positions=True)),
    ]

    def case(what, shape, positions, seed, dtype=torch.float32, atol=1e-5):
        make = lambda: {"x": randn(*shape, seed=seed, dtype=dtype), "positions": positions.clone()}  # noqa: E731
        x = make()["x"]
        expected = RotaryEmbedding(shape[-1])(x, positions=positions)
        return Case(what, make, expected, mistakes, atol=atol, rtol=1e-3 if dtype != torch.float32 else 1e-4)

    cases = [
        case("x (2, 3, 4, 8) (B, H, T, Dh), positions 0..3", (2, 3, 4, 8), torch.arange(4), seed=1),
        case("positions 5..7: new tokens after a cache of 5", (1, 2, 3, 8), torch.arange(5, 8), seed=2),
        case("one token at position 100, Dh=2", (1, 1, 1, 2), torch.tensor([100]), seed=3),
        case("no batch axes: x (6, 10)", (6, 10), torch.arange(6), seed=4),
        case("float16 input", (2, 2, 5, 16), torch.arange(5), seed=5, dtype=torch.float16, atol=2e-3),
    ]
    return run_cases("check_rope", apply_rope, cases, verbose=verbose)


def _geometric(n, first_power=1):
    start = 2.0 ** (-8.0 / n)
    return torch.tensor([start ** (i + first_power) for i in range(n)])


def check_alibi_slopes(alibi_slopes_fn, verbose: bool = True) -> CheckResult:
    """Check ``alibi_slopes(n_heads) -> (H,) tensor`` (a list of floats is accepted).

    For H a power of two: 2^(-8/H), 2^(-16/H), ..., 2^(-8). Otherwise take the H' slopes of the largest
    power of two H' < H, then every other slope of 2 H' (1st, 3rd, ...) for the remaining H - H' heads.
    """
    def normalize(got):
        if isinstance(got, (list, tuple)):
            try:
                return torch.tensor(got, dtype=torch.float32)
            except (TypeError, ValueError, RuntimeError):
                return got
        return got.float() if isinstance(got, torch.Tensor) and got.dtype == torch.float64 else got

    mistakes = [
        Mistake("your slopes start at 1: the first head's slope is 2^(-8/H), not 2^0",
                lambda i: _geometric(i["n_heads"], first_power=0)),
        Mistake("your slopes are in the wrong order: the first head has the largest slope, 2^(-8/H)",
                lambda i: alibi_slopes(i["n_heads"]).flip(0)),
        Mistake("you used the power-of-two formula 2^(-8k/H) for a head count that is not a power of two; the "
                "paper takes the largest power of two below H, then every other slope of twice that",
                lambda i: _geometric(i["n_heads"])),
    ]
    cases = [Case(f"n_heads={n}" + (" (not a power of two)" if n & (n - 1) else ""), lambda n=n: {"n_heads": n},
                  alibi_slopes(n), mistakes, normalize=normalize) for n in (8, 1, 2, 12, 6, 3)]
    return run_cases("check_alibi_slopes", alibi_slopes_fn, cases, verbose=verbose)
