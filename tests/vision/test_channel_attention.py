import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from minitfm.vision.channel_attention import CBAM, CoordinateAttention, SqueezeExcitation


def test_squeeze_excitation_matches_hand_computation_and_conv_form():
    se = SqueezeExcitation(8, reduction=4)
    x = torch.randn(2, 8, 5, 5)
    s = x.mean(dim=(2, 3))
    gate = torch.sigmoid(se.up_proj(torch.relu(se.down_proj(s))))
    assert_close(se(x), x * gate[:, :, None, None])
    # the paper draws SE with 1x1 convs; copy the weights into that form
    down, up = nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)
    with torch.no_grad():
        down.weight.copy_(se.down_proj.weight[:, :, None, None]); down.bias.copy_(se.down_proj.bias)
        up.weight.copy_(se.up_proj.weight[:, :, None, None]); up.bias.copy_(se.up_proj.bias)
    conv_gate = torch.sigmoid(up(F.relu(down(F.adaptive_avg_pool2d(x, 1)))))
    assert_close(se(x), x * conv_gate)


def test_cbam_matches_hand_computation():
    cbam = CBAM(8, reduction=2, kernel_size=3)
    x = torch.randn(2, 8, 6, 5)
    channel = torch.sigmoid(cbam.mlp(x.mean((2, 3))) + cbam.mlp(x.amax((2, 3))))[:, :, None, None]
    y = x * channel
    pooled = torch.stack([y.mean(1), y.amax(1)], dim=1)
    spatial = torch.sigmoid(F.conv2d(pooled, cbam.spatial_conv.weight, cbam.spatial_conv.bias, padding=1))
    assert_close(cbam(x), y * spatial)


def test_coordinate_attention_gate_factorises_into_rows_times_columns():
    ca = CoordinateAttention(16, reduction=4).eval()
    x = torch.rand(2, 16, 6, 7) + 0.5  # positive, so out / x is the gate
    ratio = ca(x) / x  # (B, C, H, W)
    gate_h, gate_w = ca.gates(x)
    assert gate_h.shape == (2, 16, 6, 1) and gate_w.shape == (2, 16, 1, 7)
    assert_close(ratio, gate_h * gate_w)
    # rank one per (image, channel): every 2x2 minor of the ratio matrix vanishes
    minor = ratio[..., :1, :1] * ratio[..., 1:, 1:] - ratio[..., :1, 1:] * ratio[..., 1:, :1]
    assert_close(minor, torch.zeros_like(minor))


@pytest.mark.parametrize("module", [SqueezeExcitation(8, 2), CBAM(8, 2), CoordinateAttention(8, 2).eval()],
                         ids=["se", "cbam", "ca"])
def test_gates_only_rescale_zero_positions_stay_zero(module):
    x = torch.zeros(1, 8, 6, 6)
    x[0, :, 2, 3] = torch.randn(8)
    out = module(x)
    assert out.shape == x.shape
    assert (out[0, :, 2, 3] != 0).all()
    out[0, :, 2, 3] = 0
    assert torch.equal(out, torch.zeros_like(out))  # nothing was written into another position


@pytest.mark.parametrize("module", [SqueezeExcitation(8, 2), CBAM(8, 2), CoordinateAttention(8, 2).eval()],
                         ids=["se", "cbam", "ca"])
def test_gate_is_between_zero_and_one(module):
    x = torch.rand(3, 8, 5, 5) + 0.1
    ratio = module(x) / x
    assert (ratio > 0).all() and (ratio < 1).all()


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="reduction must be <= channels"):
        SqueezeExcitation(4, reduction=8)
    with pytest.raises(ValueError, match=r"x must have shape \(B, C=8, H, W\), got \(1, 4, 3, 3\)"):
        SqueezeExcitation(8, 2)(torch.randn(1, 4, 3, 3))
    with pytest.raises(ValueError, match="kernel_size must be odd"):
        CBAM(8, 2, kernel_size=4)
    with pytest.raises(ValueError, match="must have 4 dimensions"):
        CoordinateAttention(8, 2)(torch.randn(8, 3, 3))


def test_coordinate_attention_default_reduction_works_for_few_channels():
    # the paper's code: hidden = max(8, C // r), so C=16 with the default r=32 uses 8 hidden channels
    ca = CoordinateAttention(16).eval()
    assert ca.shared_conv.out_channels == 8
    x = torch.randn(2, 16, 3, 5)
    assert ca(x).shape == x.shape
