"""Checkers for images as sequences: cutting patches (ViT) and cutting windows (Swin)."""
from __future__ import annotations

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases
from minitfm.vision.vit import patchify
from minitfm.vision.windows import window_partition


def _patches(images, p, order):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // p, p, w // p, p).permute(*order)
    return x.reshape(b, (h // p) * (w // p), c * p * p)


def check_patchify(patchify_fn, verbose: bool = True) -> CheckResult:
    """Check ``patchify(images, patch_size) -> (B, N, C * P * P)`` for images (B, C, H, W).

    Patches are numbered row by row (raster order), N = (H / P) * (W / P); each patch is flattened in
    (C, P, P) order, so a ``Conv2d(C, D, P, stride=P)`` weight reshaped to (D, C * P * P) is the Linear weight.
    """
    mistakes = [
        Mistake("you reshaped the image straight into (B, N, C * P * P): each \"patch\" is then a run of pixels from "
                "one row, not a P x P square. Cut (B, C, H/P, P, W/P, P) and move the two grid axes forward",
                lambda i: i["images"].reshape(i["images"].shape[0], -1, i["images"].shape[1] * i["patch_size"] ** 2)),
        Mistake("your patches are flattened as (P, P, C), channels last; this book flattens (C, P, P), the layout "
                "of a Conv2d weight", lambda i: _patches(*i.values(), (0, 2, 4, 3, 5, 1))),
        Mistake("your patches are numbered column by column; ViT numbers them row by row (raster order)",
                lambda i: _patches(*i.values(), (0, 4, 2, 1, 3, 5))),
        Mistake("your output is transposed: (B, C * P * P, N) as F.unfold returns it; the sequence axis N comes "
                "first: (B, N, C * P * P)", lambda i: patchify(*i.values()).transpose(1, 2)),
    ]

    def case(what, shape, p, seed):
        make = lambda: {"images": randn(*shape, seed=seed), "patch_size": p}  # noqa: E731
        return Case(what, make, patchify(*make().values()), mistakes)

    cases = [
        case("2 RGB images 8 x 8, P=4", (2, 3, 8, 8), 4, seed=1),
        case("one grey image 6 x 6, P=3 (odd)", (1, 1, 6, 6), 3, seed=2),
        case("a wide image 4 x 8, P=2: rows and columns differ", (2, 2, 4, 8), 2, seed=3),
        case("P=1: every pixel is a patch", (1, 3, 2, 3), 1, seed=4),
        case("P=H=W: one patch per image", (2, 3, 4, 4), 4, seed=5),
    ]
    return run_cases("check_patchify", patchify_fn, cases, verbose=verbose)


def _windows(x, m, order):
    b, h, w, d = x.shape
    return x.reshape(b, h // m, m, w // m, m, d).permute(*order).reshape(-1, m * m, d)


def check_window_partition(window_partition_fn, verbose: bool = True) -> CheckResult:
    """Check ``window_partition(x, window_size) -> (B * nW, M * M, D)`` for a grid x (B, H, W, D).

    Each M x M window becomes one sequence of M * M tokens in row order; windows are numbered row by row,
    all windows of image 0 first.
    """
    mistakes = [
        Mistake("you reshaped the grid straight into (B * nW, M * M, D): a \"window\" is then M * M consecutive "
                "tokens of one row. Cut (B, H/M, M, W/M, M, D) and put the two window axes together",
                lambda i: i["x"].reshape(-1, i["window_size"] ** 2, i["x"].shape[-1])),
        Mistake("your windows are numbered column by column; number them row by row",
                lambda i: _windows(*i.values(), (0, 3, 1, 2, 4, 5))),
        Mistake("the tokens inside each window are in column order; keep row order (row 0 of the window first)",
                lambda i: _windows(*i.values(), (0, 1, 3, 4, 2, 5))),
    ]

    def case(what, shape, m, seed):
        make = lambda: {"x": randn(*shape, seed=seed), "window_size": m}  # noqa: E731
        return Case(what, make, window_partition(*make().values()), mistakes)

    cases = [
        case("a 4 x 4 grid, D=2, M=2", (1, 4, 4, 2), 2, seed=1),
        case("2 grids 4 x 6 (not square), D=3, M=2", (2, 4, 6, 3), 2, seed=2),
        case("a 6 x 6 grid, M=3 (odd)", (1, 6, 6, 1), 3, seed=3),
        case("M=H=W: one window", (2, 3, 3, 4), 3, seed=4),
        case("M=1: every token is a window", (2, 2, 2, 5), 1, seed=5),
    ]
    return run_cases("check_window_partition", window_partition_fn, cases, verbose=verbose)
