"""Checkers for splitting the model width into heads and merging the heads back."""
from __future__ import annotations

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases


def _split(x, h):
    b, t, d = x.shape
    return x.reshape(b, t, h, d // h).transpose(1, 2)  # (B, T, D) -> (B, H, T, Dh)


def _merge(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)  # (B, H, T, Dh) -> (B, T, D)


def check_split_heads(split_heads, verbose: bool = True) -> CheckResult:
    """Check ``split_heads(x, n_heads) -> (B, H, T, Dh)`` for x of shape (B, T, D), Dh = D / H.

    Head h holds the consecutive features ``h * Dh .. (h + 1) * Dh - 1`` of every token.
    """
    mistakes = [
        Mistake("you split with a single view(B, H, T, Dh): each \"head\" then holds whole tokens instead of a "
                "slice of every token. Cut the last axis first, view(B, T, H, Dh), then move H forward",
                lambda i: i["x"].reshape(i["x"].shape[0], i["n_heads"], i["x"].shape[1], -1)),
        Mistake("you forgot the transpose: your output is (B, T, H, Dh); heads go on axis 1, (B, H, T, Dh)",
                lambda i: _split(i["x"], i["n_heads"]).transpose(1, 2)),
        Mistake("each of your heads takes every H-th feature (a strided split); a head must be a consecutive "
                "block of Dh features", lambda i: i["x"].reshape(*i["x"].shape[:2], -1, i["n_heads"])
                .permute(0, 3, 1, 2)),
        Mistake("your last two axes are swapped: (B, H, Dh, T) instead of (B, H, T, Dh)",
                lambda i: _split(i["x"], i["n_heads"]).transpose(-2, -1)),
    ]

    def case(what, b, t, d, h, seed, strided=False):
        def make():
            x = randn(b, d, t, seed=seed).transpose(1, 2) if strided else randn(b, t, d, seed=seed)
            return {"x": x, "n_heads": h}
        return Case(what, make, _split(make()["x"], h), mistakes)

    cases = [
        case("B=2, T=5, D=12, H=3", 2, 5, 12, 3, seed=1),
        case("T=4 equals H=4, so the shape alone cannot tell", 2, 4, 8, 4, seed=2),
        case("a batch of 1, one head", 1, 3, 6, 1, seed=3),
        case("Dh=1: as many heads as features", 2, 3, 5, 5, seed=4),
        case("x is not contiguous (the output of a transpose)", 2, 5, 12, 3, seed=5, strided=True),
    ]
    return run_cases("check_split_heads", split_heads, cases, verbose=verbose)


def check_merge_heads(merge_heads, verbose: bool = True) -> CheckResult:
    """Check ``merge_heads(x) -> (B, T, H * Dh)`` for x of shape (B, H, T, Dh): the inverse of splitting.

    Each token's output is its heads concatenated: head 0's Dh features, then head 1's, and so on.
    """
    mistakes = [
        Mistake("you reshaped (B, H, T, Dh) to (B, T, D) without moving H next to Dh first, so tokens get mixed. "
                "Transpose to (B, T, H, Dh), then reshape", lambda i: i["x"].reshape(i["x"].shape[0],
                                                                                    i["x"].shape[2], -1)),
        Mistake("your features are interleaved (feature j of every head, then j + 1); concatenate whole heads: "
                "head 0's Dh features, then head 1's", lambda i: i["x"].permute(0, 2, 3, 1).reshape(
                    i["x"].shape[0], i["x"].shape[2], -1)),
        Mistake("the heads are not merged: your output is (B, T, H, Dh); concatenate them into one last axis",
                lambda i: i["x"].transpose(1, 2)),
    ]

    def case(what, b, h, t, dh, seed):
        make = lambda: {"x": randn(b, h, t, dh, seed=seed)}  # noqa: E731
        return Case(what, make, _merge(make()["x"]), mistakes)

    cases = [
        case("B=2, H=3, T=5, Dh=4", 2, 3, 5, 4, seed=1),
        case("T=4 equals H=4", 2, 4, 4, 2, seed=2),
        case("a batch of 1, one head", 1, 1, 3, 6, seed=3),
        case("Dh=1, odd sizes", 3, 5, 7, 1, seed=4),
    ]
    return run_cases("check_merge_heads", merge_heads, cases, verbose=verbose)
