"""Vision Transformer pieces: cut an image into patches, embed them, add a class token, classify.

Glossary: B batch, C image channels, H/W image height/width in pixels, P patch size,
N = (H / P) * (W / P) patches, D d_model, L layers, K classes.

An image becomes a sequence: each P x P patch is flattened to C * P * P numbers and projected to D.
That projection is exactly a ``Conv2d(C, D, kernel_size=P, stride=P)``; ``patchify`` flattens a
patch in (C, P, P) order so that the conv's weight (D, C, P, P) reshaped to (D, C * P * P) is the
Linear weight. Patches are numbered row by row (raster order), as in ViT (Dosovitskiy et al., 2021).
"""
from __future__ import annotations

import torch
from torch import nn

from minitfm._checks import check_positive_int, check_tensor
from minitfm.layers.feedforward import make_ffn
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import make_norm
from minitfm.layers.positional import LearnedPositionalEmbedding


def _check_divisible(height: int, width: int, patch_size: int) -> None:
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"image height and width must be divisible by patch_size={patch_size}, got H={height}, W={width}"
        )


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping patches: (B, C, H, W) -> (B, N, C * P * P), raster order."""
    check_tensor(images, "images", ndim=4)
    check_positive_int(patch_size, "patch_size")
    b, c, h, w = images.shape
    _check_divisible(h, w, patch_size)
    p = patch_size
    x = images.reshape(b, c, h // p, p, w // p, p)  # (B, C, H, W) -> (B, C, H/P, P, W/P, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # -> (B, H/P, W/P, C, P, P)
    return x.reshape(b, (h // p) * (w // p), c * p * p)  # -> (B, N, C * P * P)


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """Put patches back into images: (B, N, C * P * P) -> (B, C, H, W); the inverse of :func:`patchify`."""
    check_tensor(patches, "patches", ndim=3)
    check_positive_int(patch_size, "patch_size")
    _check_divisible(height, width, patch_size)
    b, n, f = patches.shape
    p, gh, gw = patch_size, height // patch_size, width // patch_size
    if n != gh * gw or f % (p * p):
        raise ValueError(
            f"patches must have shape (B, N={gh * gw}, C * {p * p}) for a {height}x{width} image with "
            f"patch_size={p}, got {tuple(patches.shape)}"
        )
    c = f // (p * p)
    x = patches.reshape(b, gh, gw, c, p, p)  # (B, N, C * P * P) -> (B, H/P, W/P, C, P, P)
    x = x.permute(0, 3, 1, 4, 2, 5)  # -> (B, C, H/P, P, W/P, P)
    return x.reshape(b, c, height, width)  # -> (B, C, H, W)


class PatchEmbedding(nn.Module):
    """patchify, then one Linear layer: (B, C, H, W) -> (B, N, D)."""

    def __init__(self, image_size: int, patch_size: int, in_channels: int, d_model: int):
        super().__init__()
        for name, value in (("image_size", image_size), ("patch_size", patch_size),
                            ("in_channels", in_channels), ("d_model", d_model)):
            check_positive_int(value, name)
        _check_divisible(image_size, image_size, patch_size)
        self.image_size, self.patch_size, self.in_channels = image_size, patch_size, in_channels
        self.grid_size = image_size // patch_size
        self.n_patches = self.grid_size ** 2
        self.proj = nn.Linear(in_channels * patch_size ** 2, d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_tensor(images, "images", ndim=4, floating=True)
        want = (self.in_channels, self.image_size, self.image_size)
        if tuple(images.shape[1:]) != want:
            raise ValueError(f"images must have shape (B, C, H, W) = (B, {', '.join(map(str, want))}), "
                             f"got {tuple(images.shape)}")
        return self.proj(patchify(images, self.patch_size))  # (B, N, C * P * P) -> (B, N, D)


class ViTBlock(nn.Module):
    """Pre-LN encoder block: x + attn(norm(x)), then x + ffn(norm(x)), as in ViT."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None, norm: str = "layer",
                 ffn: str = "gelu", dropout: float = 0.0):
        super().__init__()
        self.attn_norm = make_norm(norm, d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn_norm = make_norm(norm, d_model)
        self.ffn = make_ffn(ffn, d_model, d_ff, dropout=dropout)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        """x (B, T, D) -> ``(x, weights)``; weights (B, H, T, T) or ``None``."""
        attended, weights = self.attn(self.attn_norm(x), need_weights=need_weights)
        x = x + attended
        return x + self.ffn(self.ffn_norm(x)), weights


class VisionTransformer(nn.Module):
    """A small ViT classifier: patches + class token + learned positions -> L pre-LN blocks -> head.

    The class token is one learned vector put in front of the patch tokens (position 0); it holds no
    pixels, so whatever it knows at the end it gathered by attention, and the head reads only it.
    """

    def __init__(self, image_size: int, patch_size: int, in_channels: int, n_classes: int,
                 d_model: int = 64, n_heads: int = 4, n_layers: int = 2, d_ff: int | None = None,
                 norm: str = "layer", ffn: str = "gelu", dropout: float = 0.0):
        super().__init__()
        check_positive_int(n_classes, "n_classes")
        check_positive_int(n_layers, "n_layers")
        self.patch_emb = PatchEmbedding(image_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        nn.init.normal_(self.cls_token, std=0.02)
        self.pos_emb = LearnedPositionalEmbedding(self.patch_emb.n_patches + 1, d_model)
        self.blocks = nn.ModuleList(
            ViTBlock(d_model, n_heads, d_ff, norm=norm, ffn=ffn, dropout=dropout) for _ in range(n_layers)
        )
        self.final_norm = make_norm(norm, d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward_features(self, images: torch.Tensor, need_weights: bool = False):
        """images (B, C, H, W) -> ``(tokens, weights)``: tokens (B, 1 + N, D) after the final norm,
        weights a list of L tensors (B, H, 1 + N, 1 + N) (empty unless ``need_weights``)."""
        patches = self.patch_emb(images)  # (B, C, H, W) -> (B, N, D)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)  # (1, 1, D) -> (B, 1, D)
        x = torch.cat([cls, patches], dim=1)  # -> (B, 1 + N, D)
        x = x + self.pos_emb(x.shape[1])
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, need_weights=need_weights)
            if need_weights:
                all_weights.append(weights)
        return self.final_norm(x), all_weights

    def forward(self, images: torch.Tensor, need_weights: bool = False):
        """images (B, C, H, W) -> logits (B, K), or ``(logits, weights)`` with ``need_weights``."""
        tokens, weights = self.forward_features(images, need_weights=need_weights)
        logits = self.head(tokens[:, 0])  # read the class token only: (B, D) -> (B, K)
        return (logits, weights) if need_weights else logits


def class_token_attention(weights: torch.Tensor, grid_size: int) -> torch.Tensor:
    """How much the class token attends to each patch, averaged over heads, as an image-shaped map.

    weights (B, H, 1 + N, 1 + N) from one layer -> (B, grid_size, grid_size). The class token's
    attention to itself is dropped, so a map row sums to at most 1.
    """
    check_tensor(weights, "weights", ndim=4, floating=True)
    n = grid_size * grid_size
    if weights.shape[-1] != n + 1 or weights.shape[-2] != n + 1:
        raise ValueError(f"weights must have shape (B, H, 1 + N, 1 + N) with N = {grid_size}^2 = {n}, "
                         f"got {tuple(weights.shape)}")
    cls_row = weights[:, :, 0, 1:].mean(dim=1)  # (B, H, 1 + N, 1 + N) -> (B, N)
    return cls_row.reshape(-1, grid_size, grid_size)  # (B, N) -> (B, grid, grid)
