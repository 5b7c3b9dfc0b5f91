"""Windowed and shifted-window self-attention, the idea of the Swin Transformer (Liu et al., 2021).

Glossary: B batch, H/W the token grid's height/width, D d_model, M window size (M x M tokens per
window), nW = (H / M) * (W / M) windows, S shift, Hh heads.

Global attention over H * W tokens compares every pair: cost grows with (H W)^2. Windowed attention
only compares tokens inside the same M x M window: cost grows with H W M^2, linear in the image area.
To let information cross window borders, every second layer shifts the grid by S = M // 2 (a cyclic
roll) before cutting windows; a mask then stops tokens that the roll brought together from opposite
edges of the image from attending to each other.

Grids are channels-last, (B, H, W, D), like tokens in a sequence.
"""
from __future__ import annotations

import torch
from torch import nn

from minitfm._checks import check_positive_int, check_tensor
from minitfm.layers.multihead import MultiHeadAttention


def _check_grid(height: int, width: int, window_size: int, shift: int = 0) -> None:
    check_positive_int(window_size, "window_size")
    if height % window_size or width % window_size:
        raise ValueError(f"grid height and width must be divisible by window_size={window_size}, "
                         f"got H={height}, W={width}")
    if isinstance(shift, bool) or not isinstance(shift, int) or not 0 <= shift < window_size:
        raise ValueError(f"shift must be an int in [0, window_size={window_size}), got {shift!r}")


def window_partition(x: torch.Tensor, window_size: int) -> torch.Tensor:
    """(B, H, W, D) -> (B * nW, M * M, D): each window becomes one short sequence, windows row by row."""
    check_tensor(x, "x", ndim=4)
    b, h, w, d = x.shape
    _check_grid(h, w, window_size)
    m = window_size
    x = x.reshape(b, h // m, m, w // m, m, d)  # (B, H, W, D) -> (B, H/M, M, W/M, M, D)
    x = x.permute(0, 1, 3, 2, 4, 5)  # -> (B, H/M, W/M, M, M, D)
    return x.reshape(-1, m * m, d)  # -> (B * nW, M * M, D)


def window_merge(windows: torch.Tensor, window_size: int, height: int, width: int) -> torch.Tensor:
    """(B * nW, M * M, D) -> (B, H, W, D); the inverse of :func:`window_partition`."""
    check_tensor(windows, "windows", ndim=3)
    _check_grid(height, width, window_size)
    m = window_size
    n_windows = (height // m) * (width // m)
    if windows.shape[0] % n_windows or windows.shape[1] != m * m:
        raise ValueError(f"windows must have shape (B * {n_windows}, {m * m}, D) for a {height}x{width} grid "
                         f"and window_size={m}, got {tuple(windows.shape)}")
    d = windows.shape[-1]
    x = windows.reshape(-1, height // m, width // m, m, m, d)  # -> (B, H/M, W/M, M, M, D)
    x = x.permute(0, 1, 3, 2, 4, 5)  # -> (B, H/M, M, W/M, M, D)
    return x.reshape(-1, height, width, d)  # -> (B, H, W, D)


def cyclic_shift(x: torch.Tensor, shift: int) -> torch.Tensor:
    """Roll a (B, H, W, D) grid up and left by ``shift``; ``cyclic_shift(x, -shift)`` undoes it."""
    check_tensor(x, "x", ndim=4)
    return torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))


def shift_regions(height: int, width: int, window_size: int, shift: int) -> torch.Tensor:
    """Label each cell of the *shifted* grid with the region it came from: (H, W) ints.

    After rolling by S, the last window row/column holds tokens from two (or, in the corner, four)
    far-apart parts of the image. Cutting each axis at H - M and H - S gives up to 3 x 3 regions;
    tokens may attend to each other only inside one region.
    """
    _check_grid(height, width, window_size, shift)
    labels = torch.zeros(height, width, dtype=torch.long)
    if shift == 0:
        return labels
    cuts = (slice(0, -window_size), slice(-window_size, -shift), slice(-shift, None))
    for i, rows in enumerate(cuts):
        for j, cols in enumerate(cuts):
            labels[rows, cols] = 3 * i + j
    return labels


def shifted_window_mask(height: int, width: int, window_size: int, shift: int) -> torch.Tensor:
    """Boolean mask (nW, M * M, M * M), ``True`` = may attend: only pairs from the same region."""
    labels = shift_regions(height, width, window_size, shift)
    per_window = window_partition(labels[None, :, :, None], window_size)[..., 0]  # (1, H, W, 1) -> (nW, M*M)
    return per_window[:, :, None] == per_window[:, None, :]  # (nW, M*M, 1) vs (nW, 1, M*M) -> (nW, M*M, M*M)


class WindowAttention(nn.Module):
    """Multi-head self-attention inside M x M windows, optionally on a grid shifted by ``shift``.

    ``forward(x)`` takes (B, H, W, D) and returns ``(out, weights)``: out (B, H, W, D), weights
    (B * nW, Hh, M * M, M * M) with ``need_weights`` (else ``None``). Swin's relative position bias
    is left out to keep the mechanism visible.
    """

    def __init__(self, d_model: int, n_heads: int, window_size: int, shift: int = 0, bias: bool = True):
        super().__init__()
        _check_grid(window_size, window_size, window_size, shift)
        self.window_size, self.shift = window_size, shift
        self.attn = MultiHeadAttention(d_model, n_heads, bias=bias)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        check_tensor(x, "x", ndim=4, floating=True)
        b, h, w, d = x.shape
        _check_grid(h, w, self.window_size, self.shift)
        mask = None
        if self.shift:
            x = cyclic_shift(x, self.shift)
            mask = shifted_window_mask(h, w, self.window_size, self.shift).to(x.device)  # (nW, M*M, M*M)
            mask = mask[:, None].repeat(b, 1, 1, 1)  # -> (B * nW, 1, M*M, M*M), same window order
        windows = window_partition(x, self.window_size)  # (B, H, W, D) -> (B * nW, M*M, D)
        out, weights = self.attn(windows, mask=mask, need_weights=need_weights)
        out = window_merge(out, self.window_size, h, w)  # (B * nW, M*M, D) -> (B, H, W, D)
        if self.shift:
            out = cyclic_shift(out, -self.shift)
        return out, weights


def attention_flops(height: int, width: int, d_model: int, window_size: int | None = None) -> int:
    """Floating-point operations of one self-attention layer on an H x W token grid (2 per multiply-add).

    The Swin paper (eq. 1-2) counts multiply-adds; this is twice its numbers:
        global:   2 * (4 H W D^2 + 2 (H W)^2 D)      quadratic in the number of tokens H W
        windowed: 2 * (4 H W D^2 + 2 H W M^2 D)      linear in H W for a fixed window M
    4 H W D^2 are the q/k/v/out projections; the second term is Q K^T and weights @ V. Softmax,
    scaling and biases are left out (small next to the matrix products).
    """
    for name, value in (("height", height), ("width", width), ("d_model", d_model)):
        check_positive_int(value, name)
    n = height * width
    keys_per_query = n if window_size is None else window_size * window_size
    if window_size is not None:
        _check_grid(height, width, window_size)
    return 2 * (4 * n * d_model ** 2 + 2 * n * keys_per_query * d_model)
