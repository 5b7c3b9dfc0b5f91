import pytest
import torch
from torch import nn
from torch.testing import assert_close

from minitfm.layers.multihead import MultiHeadAttention
from minitfm.vision import (
                            ViTBlock, PatchEmbedding, VisionTransformer, class_token_attention, patchify, unpatchify,
                            )


def test_patchify_shape_and_raster_order():
    images = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6)
    patches = patchify(images, 2)
    assert patches.shape == (2, 6, 12)  # 2x3 patches of 3 * 2 * 2 numbers
    # patch 4 is grid row 1, column 1: pixels rows 2-3, columns 2-3, flattened channel-major
    assert_close(patches[1, 4], images[1, :, 2:4, 2:4].reshape(-1))


def test_unpatchify_inverts_patchify():
    images = torch.randn(3, 2, 8, 12)
    assert torch.equal(unpatchify(patchify(images, 4), 4, 8, 12), images)


def test_patch_embedding_equals_strided_conv_with_copied_weights():
    emb = PatchEmbedding(image_size=8, patch_size=4, in_channels=3, d_model=5)
    conv = nn.Conv2d(3, 5, kernel_size=4, stride=4)
    with torch.no_grad():
        conv.weight.copy_(emb.proj.weight.reshape(5, 3, 4, 4))  # (D, C*P*P) -> (D, C, P, P)
        conv.bias.copy_(emb.proj.bias)
    images = torch.randn(2, 3, 8, 8)
    expected = conv(images).flatten(2).transpose(1, 2)  # (B, D, 2, 2) -> (B, 4, D), raster order
    assert_close(emb(images), expected)


def test_encoder_block_is_pre_ln_residual():
    block = ViTBlock(16, 4).eval()
    x = torch.randn(2, 5, 16)
    attn, _ = block.attn(block.attn_norm(x))
    h = x + attn
    assert_close(block(x)[0], h + block.ffn(block.ffn_norm(h)))
    assert isinstance(block.attn, MultiHeadAttention)


def test_vit_shapes_and_attention_weights():
    vit = VisionTransformer(8, 2, 1, n_classes=10, d_model=16, n_heads=2, n_layers=3)
    images = torch.randn(4, 1, 8, 8)
    assert vit(images).shape == (4, 10)
    logits, weights = vit(images, need_weights=True)
    assert len(weights) == 3 and weights[0].shape == (4, 2, 17, 17)
    assert_close(weights[-1].sum(-1), torch.ones(4, 2, 17))
    assert_close(logits, vit(images))


def test_vit_reads_only_the_class_token():
    vit = VisionTransformer(8, 4, 1, n_classes=3, d_model=8, n_heads=2, n_layers=1).eval()
    images = torch.randn(2, 1, 8, 8)
    tokens, _ = vit.forward_features(images)
    assert_close(vit(images), vit.head(tokens[:, 0]))


def test_class_token_attention_map_reads_row_zero():
    weights = torch.softmax(torch.randn(2, 3, 5, 5), dim=-1)
    amap = class_token_attention(weights, grid_size=2)
    assert amap.shape == (2, 2, 2)
    assert_close(amap[1, 1, 0], weights[1, :, 0, 3].mean())


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="divisible by patch_size=3"):
        patchify(torch.randn(1, 1, 8, 8), 3)
    with pytest.raises(ValueError, match="must have 4 dimensions"):
        patchify(torch.randn(8, 8), 2)
    with pytest.raises(ValueError, match=r"patches must have shape \(B, N=4"):
        unpatchify(torch.randn(1, 5, 4), 2, 4, 4)
    emb = PatchEmbedding(8, 2, 3, 4)
    with pytest.raises(ValueError, match=r"\(B, 3, 8, 8\)"):
        emb(torch.randn(1, 1, 8, 8))
    with pytest.raises(ValueError, match="N = 2\\^2 = 4"):
        class_token_attention(torch.rand(1, 1, 4, 4), 2)
