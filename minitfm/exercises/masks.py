"""Checkers for the two masks: padding and causal (convention: ``True`` = may attend)."""
from __future__ import annotations

import torch

from minitfm.exercises._core import Case, CheckResult, Mistake, run_cases
from minitfm.layers import masks as lib

POLARITY = ("the mask's polarity is flipped: True must mean \"may attend\" (as in "
            "F.scaled_dot_product_attention), and your mask is True exactly where attention is forbidden")
FLOAT_MASK = "your mask holds 0s and 1s as numbers; return a boolean tensor (True = may attend), e.g. with `!=`"


def _drop_leading_ones(ndim: int):
    def normalize(got):
        while isinstance(got, torch.Tensor) and got.dim() > ndim and got.shape[0] == 1:
            got = got[0]
        return got
    return normalize


def check_causal_mask(causal_mask, verbose: bool = True) -> CheckResult:
    """Check ``causal_mask(t_q, t_k) -> (T_q, T_k) bool`` (a leading axis of size 1 is fine).

    Query ``i`` may attend to keys ``0 .. i + (t_k - t_q)``: ``True`` on and below the diagonal, aligned
    bottom-right, so that with a KV cache (``t_k > t_q``) the queries are the last ``t_q`` positions and the
    last query sees every key. ``t_k >= t_q`` always.
    """
    cases = []
    for t_q, t_k, what in ((4, 4, "a square 4 x 4 mask"), (1, 1, "one token"), (7, 7, "odd size 7"),
                           (3, 5, "T_q=3 < T_k=5, the new queries of a KV cache"),
                           (1, 6, "one new query over 6 cached keys"), (2, 9, "T_q=2, T_k=9")):
        ref = lib.causal_mask(t_q, t_k)[0]
        mistakes = [
            Mistake(FLOAT_MASK, lambda _, r=ref: r.float()),
            Mistake(FLOAT_MASK, lambda _, r=ref: r.long()),
            Mistake(POLARITY, lambda _, r=ref: ~r),
            Mistake("off by one: a query must also see its own position (the diagonal); yours hides it, so "
                    "the first query sees nothing at all", lambda _, q=t_q, k=t_k: ~torch.ones(q, k, dtype=torch.bool)
                    .triu(diagonal=k - q)),
            Mistake("off by one: your mask lets every query see one future position too",
                    lambda _, q=t_q, k=t_k: ~torch.ones(q, k, dtype=torch.bool).triu(diagonal=k - q + 2)),
            Mistake("your mask is transposed: it lets each query see the future and hides the past",
                    lambda _, r=ref: r.T.contiguous()),
            Mistake("your mask is aligned top-left: with T_k > T_q the queries are the LAST T_q positions "
                    "(a KV cache), so query i sees keys 0 .. i + (T_k - T_q)",
                    lambda _, q=t_q, k=t_k: torch.ones(q, k, dtype=torch.bool).tril()),
        ]
        cases.append(Case(what, lambda q=t_q, k=t_k: {"t_q": q, "t_k": k}, ref, mistakes,
                          normalize=_drop_leading_ones(2)))
    return run_cases("check_causal_mask", causal_mask, cases, verbose=verbose)


def check_padding_mask(padding_mask, verbose: bool = True) -> CheckResult:
    """Check ``padding_mask(tokens, pad_id) -> (B, 1, 1, T) bool``.

    ``tokens`` is (B, T) integer ids; the mask is ``True`` for real tokens and ``False`` for ``pad_id``.
    The two axes of size 1 let it broadcast over heads and queries: padding is hidden as a *key*.
    """
    specs = [
        ("two sequences, the second padded with 0", [[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]], 0, torch.long),
        ("a batch of 1 without padding", [[4, 3, 2]], 0, torch.long),
        ("pad_id=3, and 0 is an ordinary token", [[0, 1, 2, 3, 3], [3, 3, 3, 3, 3]], 3, torch.long),
        ("odd length 7, int32 ids", [[1, 2, 3, 4, 5, 6, 7], [1, 2, 0, 0, 0, 0, 0]], 0, torch.int32),
    ]
    cases = []
    for what, rows, pad, dtype in specs:
        tokens = torch.tensor(rows, dtype=dtype)
        ref = lib.padding_mask(tokens, pad)
        mistakes = [
            Mistake(FLOAT_MASK, lambda _, r=ref: r.float()),
            Mistake(POLARITY, lambda _, r=ref: ~r),
            Mistake("you compare with 0 instead of pad_id: use the pad_id argument",
                    lambda _, t=tokens: (t != 0)[:, None, None, :]),
            Mistake("your mask is (B, T): add two axes, (B, 1, 1, T), so it broadcasts over heads and queries "
                    "against scores (B, H, T_q, T_k)", lambda _, r=ref: r[:, 0, 0]),
            Mistake("your mask has shape (B, 1, T, 1): it hides padded queries, but padding must be hidden "
                    "as keys, on the last axis: (B, 1, 1, T)", lambda _, r=ref: r.transpose(-1, -2)),
        ]
        cases.append(Case(what, lambda t=tokens, p=pad: {"tokens": t.clone(), "pad_id": p}, ref, mistakes))
    return run_cases("check_padding_mask", padding_mask, cases, verbose=verbose)
