"""Channel and spatial "attention" for convolutional feature maps: SE, CBAM and coordinate attention.

Glossary: B batch, C channels, H/W height/width, r reduction ratio, C_r = hidden channels.

All three compute a gate in (0, 1) from pooled statistics and *multiply* the input by it:
    out[b, c, h, w] = x[b, c, h, w] * gate[b, c, h, w]
so each output position keeps its own content, re-weighted; a position whose input is zero stays
zero. Self-attention instead writes a weighted sum of *other* positions' values into each position.

- Squeeze-and-Excitation (Hu et al., 2018): one gate per channel from the global average.
- CBAM (Woo et al., 2018): a channel gate (average- and max-pooled, shared MLP), then a spatial
  gate (a 7 x 7 conv over the channel average and maximum).
- Coordinate attention (Hou et al., 2021): pool along H and along W separately, so the gate is one
  factor per (channel, row) times one per (channel, column).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import check_positive_int, check_tensor


def _hidden_channels(channels: int, reduction: int, minimum: int = 1) -> int:
    check_positive_int(channels, "channels")
    check_positive_int(reduction, "reduction")
    if reduction > channels and minimum <= 1:  # with a floor (coordinate attention's 8) any ratio leaves some
        raise ValueError(f"reduction must be <= channels to leave at least one hidden channel, "
                         f"got reduction={reduction}, channels={channels}")
    return max(minimum, channels // reduction)


def _check_feature_map(x: torch.Tensor, channels: int) -> None:
    check_tensor(x, "x", ndim=4, floating=True)
    if x.shape[1] != channels:
        raise ValueError(f"x must have shape (B, C={channels}, H, W), got {tuple(x.shape)}")


class SqueezeExcitation(nn.Module):
    """x * sigmoid(up(relu(down(mean over H, W of x)))): one weight per (image, channel)."""

    def __init__(self, channels: int, reduction: int = 16):
        super().__init__()
        hidden = _hidden_channels(channels, reduction)
        self.channels = channels
        self.down_proj = nn.Linear(channels, hidden)
        self.up_proj = nn.Linear(hidden, channels)

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C, 1, 1) channel weights in (0, 1)."""
        _check_feature_map(x, self.channels)
        squeezed = x.mean(dim=(2, 3))  # (B, C, H, W) -> (B, C)
        excited = torch.sigmoid(self.up_proj(F.relu(self.down_proj(squeezed))))  # (B, C)
        return excited[:, :, None, None]  # (B, C) -> (B, C, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(x)


class CBAM(nn.Module):
    """Convolutional Block Attention Module: channel gate, then spatial gate, both multiplicative."""

    def __init__(self, channels: int, reduction: int = 16, kernel_size: int = 7):
        super().__init__()
        hidden = _hidden_channels(channels, reduction)
        check_positive_int(kernel_size, "kernel_size")
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd so the spatial gate keeps H x W, got {kernel_size}")
        self.channels = channels
        self.mlp = nn.Sequential(nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, channels))
        self.spatial_conv = nn.Conv2d(2, 1, kernel_size, padding=kernel_size // 2)

    def channel_gate(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C, 1, 1): the shared MLP on the average- and the max-pooled vector."""
        _check_feature_map(x, self.channels)
        scores = self.mlp(x.mean(dim=(2, 3))) + self.mlp(x.amax(dim=(2, 3)))  # (B, C)
        return torch.sigmoid(scores)[:, :, None, None]  # (B, C) -> (B, C, 1, 1)

    def spatial_gate(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, 1, H, W): a conv over the per-position channel mean and maximum."""
        pooled = torch.cat([x.mean(dim=1, keepdim=True), x.amax(dim=1, keepdim=True)], dim=1)  # (B, 2, H, W)
        return torch.sigmoid(self.spatial_conv(pooled))  # (B, 2, H, W) -> (B, 1, H, W)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.channel_gate(x)
        return x * self.spatial_gate(x)


class CoordinateAttention(nn.Module):
    """x * gate_h * gate_w, with gate_h (B, C, H, 1) per row and gate_w (B, C, 1, W) per column.

    The row and column descriptors go through one shared 1 x 1 conv (with BatchNorm and h-swish, as
    in the paper), are split again and each gets its own 1 x 1 conv and sigmoid.
    """

    def __init__(self, channels: int, reduction: int = 32):
        super().__init__()
        hidden = _hidden_channels(channels, reduction, minimum=8)
        self.channels = channels
        self.shared_conv = nn.Conv2d(channels, hidden, kernel_size=1)
        self.norm = nn.BatchNorm2d(hidden)
        self.conv_h = nn.Conv2d(hidden, channels, kernel_size=1)
        self.conv_w = nn.Conv2d(hidden, channels, kernel_size=1)

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C, H, W) -> (gate_h (B, C, H, 1), gate_w (B, C, 1, W))."""
        _check_feature_map(x, self.channels)
        h, w = x.shape[2], x.shape[3]
        along_h = x.mean(dim=3, keepdim=True)  # (B, C, H, W) -> (B, C, H, 1)
        along_w = x.mean(dim=2, keepdim=True).transpose(2, 3)  # (B, C, H, W) -> (B, C, W, 1)
        y = F.hardswish(self.norm(self.shared_conv(torch.cat([along_h, along_w], dim=2))))  # (B, C_r, H+W, 1)
        y_h, y_w = torch.split(y, [h, w], dim=2)  # (B, C_r, H, 1), (B, C_r, W, 1)
        gate_h = torch.sigmoid(self.conv_h(y_h))  # (B, C, H, 1)
        gate_w = torch.sigmoid(self.conv_w(y_w)).transpose(2, 3)  # (B, C, W, 1) -> (B, C, 1, W)
        return gate_h, gate_w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_h, gate_w = self.gates(x)
        return x * gate_h * gate_w
