"""Checker for scaled dot-product attention written from scratch (output and weights)."""
from __future__ import annotations

import math

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.layers.attention import scaled_dot_product_attention
from minitfm.layers.masks import causal_mask


def _variant(q, k, v, mask, *, scale=None, dim=-1, flip=False, fill=None, zero_empty=True):
    """Attention with one thing changed, to recognise a typical mistake by its output."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        mask = ~mask if flip else mask
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min if fill is None else fill)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and zero_empty:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def _mistakes(has_mask: bool, has_empty_row: bool) -> list[Mistake]:
    ref = lambda i: scaled_dot_product_attention(i["q"], i["k"], i["v"], i["mask"])  # noqa: E731
    found = [
        Mistake("return (output, weights) in this order; yours are swapped", lambda i: ref(i)[::-1]),
        Mistake("the 1/sqrt(d_k) scale is missing: divide the scores q @ k^T by sqrt(d_k) before the softmax",
                lambda i: _variant(**i, scale=1.0)),
        Mistake("you divide the scores by d_k; the scale is 1/sqrt(d_k)",
                lambda i: _variant(**i, scale=1 / i["q"].shape[-1])),
        Mistake("the softmax runs over the wrong axis: each query's weights (one row, the last axis, over the "
                "keys) must sum to 1; yours sum to 1 down each column", lambda i: _variant(**i, dim=-2)),
        Mistake("your weights are transposed: they must be (..., T_q, T_k), one row per query",
                lambda i: (ref(i)[0], ref(i)[1].transpose(-2, -1))),
    ]
    if has_mask:
        found.append(Mistake("the mask's polarity is flipped: True means \"may attend\"; your function hides the "
                             "keys where the mask is True", lambda i: _variant(**i, flip=True)))
    if has_empty_row:
        found += [
            Mistake("NaN in a fully masked row: a query whose keys are all masked gets softmax(-inf, ..., -inf) = "
                    "NaN. Fill with torch.finfo(dtype).min instead of -inf, then set the masked weights to 0",
                    lambda i: _variant(**i, fill=float("-inf"), zero_empty=False)),
            Mistake("a fully masked row must get weights of 0 (and an output of 0); yours spreads it evenly over "
                    "keys it may not see. Set the masked weights to 0 after the softmax",
                    lambda i: _variant(**i, zero_empty=False)),
        ]
    return found


def _case(what, make, atol=1e-5, rtol=1e-4) -> Case:
    inputs = make()
    expected = scaled_dot_product_attention(inputs["q"], inputs["k"], inputs["v"], inputs["mask"])
    mask = inputs["mask"]
    empty = mask is not None and bool((~mask.any(dim=-1)).any())
    return Case(what, make, expected, _mistakes(mask is not None, empty), atol=atol, rtol=rtol)


def check_attention(attention, verbose: bool = True) -> CheckResult:
    """Check ``attention(q, k, v, mask) -> (out, weights)``.

    q (..., T_q, Dh), k (..., T_k, Dh), v (..., T_k, Dv); ``mask`` is ``None`` or boolean, ``True`` = may
    attend, broadcastable to (..., T_q, T_k). Returns out (..., T_q, Dv) and weights (..., T_q, T_k),
    in the dtype of q. A query whose keys are all masked gets weights of 0 and an output of 0 (no NaN).
    """
    def qkv(b, t_q, t_k, dh, dv, seed, mask=None, dtype=torch.float32):
        return lambda: {"q": randn(*b, t_q, dh, seed=seed, dtype=dtype), "k": randn(*b, t_k, dh, seed=seed + 1,
                        dtype=dtype), "v": randn(*b, t_k, dv, seed=seed + 2, dtype=dtype), "mask": mask}

    keep = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]  # (2, 1, 1, 5) padding
    empty = causal_mask(4).clone()
    empty[0, 1] = False  # query 1 sees no key at all
    cases = [
        _case("B=2, H=3, T=4, Dh=8, no mask", qkv((2, 3), 4, 4, 8, 8, seed=1)),
        _case("T_q=3 != T_k=5, Dv=6 != Dh=4, a padding mask (2, 1, 1, 5)", qkv((2, 2), 3, 5, 4, 6, seed=2, mask=keep)),
        _case("a batch of 1 with a causal mask (1, 6, 6)", qkv((1, 1), 6, 6, 8, 8, seed=3, mask=causal_mask(6))),
        _case("no batch axes: q (7, 5), odd sizes", qkv((), 7, 7, 5, 3, seed=4)),
        _case("a fully masked row (query 1 may see no key)", qkv((1, 2), 4, 4, 8, 8, seed=5, mask=empty)),
        _case("float16 inputs with a causal mask", qkv((2, 2), 5, 5, 16, 16, seed=6, mask=causal_mask(5),
                                                      dtype=torch.float16), atol=2e-3, rtol=1e-2),
    ]
    return run_cases("check_attention", attention, cases, verbose=verbose)
