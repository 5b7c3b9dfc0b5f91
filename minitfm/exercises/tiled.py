"""Checkers for memory-efficient attention written from scratch: the online softmax and tiled attention.

Glossary: T_q queries, T_k keys, Dh head dimension, Dv value dimension, ``...`` leading dimensions (B, H),
m running max, l running sum of exp(x - m), acc running sum of exp(s - m) v.
"""
from __future__ import annotations

import math

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.layers.tiled_attention import online_softmax, tiled_attention
from minitfm.training.activation_memory import OpRecorder

NEG_INF = float("-inf")


def _online(x, block_size, *, rescale=True, shift=True, finite=True):
    """The online softmax with one thing left out, to recognise a typical mistake by its output."""
    x32 = x.float()
    m = torch.full(x.shape[:-1], NEG_INF)  # (...,)
    l = torch.zeros(x.shape[:-1])
    for start in range(0, x.shape[-1], block_size):
        block = x32[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(-1)) if shift else torch.zeros_like(m)
        ref = m_new.masked_fill(m_new == NEG_INF, 0.0) if finite else m_new
        old = torch.exp(m - ref) if rescale and shift else 1.0
        l = l * old + torch.exp(block - ref[..., None]).sum(-1)
        m = m_new
    ref = m.masked_fill(m == NEG_INF, 0.0) if finite else m
    return (torch.exp(x32 - ref[..., None]) / l[..., None]).to(x.dtype)


def _per_block(x, block_size):
    """Each block normalised on its own (a softmax per block, concatenated)."""
    parts = [torch.softmax(x[..., s:s + block_size].float(), -1) for s in range(0, x.shape[-1], block_size)]
    return torch.cat(parts, -1).to(x.dtype)


def check_online_softmax(online_softmax_fn, verbose: bool = True) -> CheckResult:
    """Check ``online_softmax(x, block_size) -> weights``: the softmax over the last axis of ``x``, read in
    blocks of ``block_size`` columns (the last block may be shorter) with a running max and a running sum.

    ``weights`` has the shape and dtype of ``x``. Entries of -inf (masked) get weight 0; a row of only -inf
    (a query that sees nothing) gets all-zero weights, minitfm's convention, where ``torch.softmax`` gives
    NaN. Work in float32 for float16 input.
    """
    mistakes = [
        Mistake("when a later block raises the running max, the sum so far was counted against the old max: "
                "multiply it by exp(m_old - m_new) before adding the new block's exp(x - m_new)",
                lambda i: _online(*i.values(), rescale=False)),
        Mistake("a row with only -inf (a query that sees nothing) must get all-zero weights; yours gives NaN, "
                "as torch.softmax does. When the final sum l is 0, divide by 1 instead",
                lambda i: torch.softmax(i["x"].float(), -1).to(i["x"].dtype)),
        Mistake("exp overflowed: without subtracting the running max, exp(x) is inf for x above about 88 "
                "(float32). Subtract the max seen so far before every exp", lambda i: _online(*i.values(), shift=False)),
        Mistake("you normalised each block on its own: every weight must be divided by the sum over the whole "
                "row, so keep the running sum across blocks and divide at the end", lambda i: _per_block(*i.values())),
        Mistake("NaN where a whole block is -inf (masked keys at the start of a row): the running max is still "
                "-inf there, and exp(-inf - (-inf)) is NaN. While the max is -inf, subtract 0 instead",
                lambda i: _online(*i.values(), finite=False)),
    ]

    def case(what, make, atol=1e-6, rtol=1e-5):
        inputs = make()
        return Case(what, make, online_softmax(*inputs.values()), mistakes, atol=atol, rtol=rtol)

    def rising():  # the max grows in every block: forgetting to rescale shows at once
        return {"x": torch.linspace(-3.0, 3.0, 12)[None] + 0.1 * randn(2, 12, seed=2), "block_size": 3}

    def masked():
        x = randn(3, 12, seed=4) * 3
        x[:, :4] = NEG_INF  # the whole first block of every row is masked
        x[1, 7] = NEG_INF
        return {"x": x, "block_size": 4}

    def empty_row():
        x = randn(3, 8, seed=5)
        x[1] = NEG_INF  # a query with no visible key
        return {"x": x, "block_size": 3}

    cases = [
        case("x (3, 10), block_size 4: the last block is shorter", lambda: {"x": randn(3, 10, seed=1), "block_size": 4}),
        case("rows that rise: the max grows in every block of 3", rising),
        case("entries near +-1000, block_size 5: exp(x) overflows float32",
             lambda: {"x": randn(2, 4, 15, seed=3) * 1000, "block_size": 5}),
        case("masked entries (-inf), the whole first block of each row included", masked),
        case("a row of only -inf (a query that sees nothing)", empty_row),
        case("block_size 16, longer than the row (2, 3, 7): one block", lambda: {"x": randn(2, 3, 7, seed=6),
                                                                              "block_size": 16}),
        case("float16 input (4, 9), block_size 2: return float16",
             lambda: {"x": (randn(4, 9, seed=7) * 4).half(), "block_size": 2}, atol=1e-3, rtol=1e-2),
    ]
    return run_cases("check_online_softmax", online_softmax_fn, cases, verbose=verbose)


def _tiled(q, k, v, block_size, causal, *, scale=None, rescale=True, normalise=True, align="bottom"):
    """Tiled attention with one thing changed, to recognise a typical mistake by its output."""
    t_q, t_k = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    offset = t_k - t_q if align == "bottom" else 0
    out = torch.zeros(q.shape[:-1] + v.shape[-1:])
    for r in range(0, t_q, block_size):
        qs = q[..., r:r + block_size, :] * scale
        m = torch.full(qs.shape[:-1], NEG_INF)
        l = torch.zeros(qs.shape[:-1])
        acc = torch.zeros(qs.shape[:-1] + v.shape[-1:])
        for c in range(0, t_k, block_size):
            s = qs @ k[..., c:c + block_size, :].transpose(-2, -1)  # (..., b, b)
            if causal:
                rows = torch.arange(r, r + s.shape[-2])[:, None] + offset
                s = s.masked_fill(torch.arange(c, c + s.shape[-1]) > rows, NEG_INF)
            m_new = torch.maximum(m, s.amax(-1))
            ref = m_new.masked_fill(m_new == NEG_INF, 0.0)
            old = torch.exp(m - ref) if rescale else 1.0
            p = torch.exp(s - ref[..., None])
            l = l * old + p.sum(-1)
            acc = acc * (old[..., None] if rescale else 1.0) + p @ v[..., c:c + block_size, :]
            m = m_new
        out[..., r:r + block_size, :] = acc / l.masked_fill(l == 0, 1.0)[..., None] if normalise else acc
    return out


def _full_matrix_problem(shapes, block_size, d_max) -> str | None:
    """A message if a tensor wider than a tile was created with more rows than a head dimension (a score
    matrix or a mask of many keys), or None. Views of k^T and v^T (Dh or Dv rows) are allowed."""
    for shape in shapes:
        if len(shape) >= 2 and shape[-1] > block_size and shape[-2] > d_max:
            return (f"your answer is right, but your function created a tensor of shape {tuple(shape)}: scores or a "
                    f"mask over more keys than one tile ({block_size}). Tiled attention computes one "
                    f"(block_size x block_size) tile of scores at a time and never holds more")
    return None


def check_tiled_attention(tiled_attention_fn, verbose: bool = True) -> CheckResult:
    """Check ``tiled_attention(q, k, v, block_size, causal) -> out``, exact attention computed tile by tile.

    q (..., T_q, Dh), k (..., T_k, Dh), v (..., T_k, Dv) -> out (..., T_q, Dv) = softmax(q k^T / sqrt(Dh)) v.
    Query blocks of ``block_size`` rows visit key tiles of ``block_size`` columns with a running max, sum
    and output (online softmax); no tensor of scores wider than one tile may exist. With ``causal``, query i
    sees keys j <= i + T_k - T_q (bottom-right, as with a KV cache), and tiles wholly in the future may be
    skipped. Float32 in, float32 out.
    """
    if not callable(tiled_attention_fn):
        return run_cases("check_tiled_attention", tiled_attention_fn, [], verbose=verbose)
    created: list = []

    def recorded(*args):  # the student's function, with every tensor it creates noted
        with OpRecorder() as rec:
            out = tiled_attention_fn(*args)
        created[:] = [shape for r in rec.records for shape in r.shapes]
        return out

    mistakes = [
        Mistake("the 1/sqrt(Dh) scale is missing: multiply the scores (or q) by 1/sqrt(Dh)",
                lambda i: _tiled(*i.values(), scale=1.0)),
        Mistake("when a later tile raises a row's running max, both the running sum l and the running output acc "
                "were summed against the old max: multiply them by exp(m_old - m_new) first",
                lambda i: _tiled(*i.values(), rescale=False)),
        Mistake("you return the un-normalised sum: divide the running output acc by the running sum l at the end",
                lambda i: _tiled(*i.values(), normalise=False)),
        Mistake("your causal mask is aligned top-left: with T_k > T_q the queries are the LAST T_q positions "
                "(a KV cache), so query i sees keys 0 .. i + (T_k - T_q)", lambda i: _tiled(*i.values(), align="top")),
        Mistake("causal=True is ignored: query i may only see keys j <= i + (T_k - T_q)",
                lambda i: _tiled(*{**i, "causal": False}.values())),
    ]

    def case(what, b, t_q, t_k, dh, dv, block, causal, seed, scale=1.0, whole=False):
        def make():
            return {"q": randn(*b, t_q, dh, seed=seed) * scale, "k": randn(*b, t_k, dh, seed=seed + 1) * scale,
                    "v": randn(*b, t_k, dv, seed=seed + 2), "block_size": block, "causal": causal}
        i = make()
        expected = tiled_attention(i["q"], i["k"], i["v"], causal=causal, block_q=block, block_k=block)
        check_tiles = (lambda inputs, got: _full_matrix_problem(created, block, max(dh, dv))) if whole else None
        return Case(what, make, expected, mistakes, atol=1e-5, rtol=1e-4, after_call=check_tiles)

    cases = [
        case("B=2, H=2, T=37 (not a multiple of the tile), Dh=8, tiles of 16, not causal", (2, 2), 37, 37, 8, 8, 16,
             False, seed=1),
        case("causal, T=40, tiles of 8", (1, 2), 40, 40, 8, 8, 8, True, seed=4),
        case("Dv=6 != Dh=4, T=20, tiles of 32 (one tile holds everything)", (2, 1), 20, 20, 4, 6, 32, False, seed=7),
        case("causal with T_q=5 < T_k=37: the new queries of a KV cache (bottom-right)", (1, 1), 5, 37, 8, 8, 8, True,
             seed=10),
        case("large scores (q and k times 6), tiles of 4: exp must not overflow", (1, 1), 24, 24, 8, 8, 4, False,
             seed=13, scale=6.0),
        case("causal, T=64, Dh=8, tiles of 16: no tensor wider than one tile", (1, 2), 64, 64, 8, 8, 16, True,
             seed=16, whole=True),
    ]
    return run_cases("check_tiled_attention", recorded, cases, verbose=verbose)
