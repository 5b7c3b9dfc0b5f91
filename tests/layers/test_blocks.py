import pytest
import torch
from torch import nn
from torch.testing import assert_close

from minitfm.config import ModelConfig
from minitfm.layers.blocks import DecoderBlock, EncoderBlock
from minitfm.layers.masks import causal_mask, padding_mask

D, H, F = 16, 4, 32


def cfg(norm_first, **kw):
    return ModelConfig(**{**dict(d_model=D, n_heads=H, d_ff=F, norm_first=norm_first, dropout=0.0), **kw})


def copy_attention(ours, theirs: nn.MultiheadAttention):
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)


def copy_common(block, ref, norm_names):
    copy_attention(block.self_attn, ref.self_attn)
    with torch.no_grad():
        ref.linear1.weight.copy_(block.ffn.up_proj.weight)
        ref.linear1.bias.copy_(block.ffn.up_proj.bias)
        ref.linear2.weight.copy_(block.ffn.down_proj.weight)
        ref.linear2.bias.copy_(block.ffn.down_proj.bias)
        for ours, theirs in norm_names:
            getattr(ref, theirs).load_state_dict(getattr(block, ours).state_dict())


def randomise(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3)


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_block_matches_torch_encoder_layer(norm_first):
    block = EncoderBlock(cfg(norm_first)).eval()
    randomise(block)  # random norm weights/biases too, so a swapped norm would show
    ref = nn.TransformerEncoderLayer(D, H, F, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    copy_common(block, ref, [("attn_norm", "norm1"), ("ffn_norm", "norm2")])
    x = torch.randn(2, 5, D)
    tokens = torch.tensor([[3, 4, 5, 6, 7], [3, 4, 5, 0, 0]])
    out, _ = block(x, mask=padding_mask(tokens, 0))
    # torch's key padding mask means the opposite: True = ignore this key
    expected = ref(x, src_key_padding_mask=tokens == 0)
    assert_close(out[0], expected[0], atol=1e-5, rtol=1e-4)
    assert_close(out[1, :3], expected[1, :3], atol=1e-5, rtol=1e-4)  # torch's fast path zeroes pad rows


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch_decoder_layer(norm_first):
    block = DecoderBlock(cfg(norm_first)).eval()
    randomise(block)
    ref = nn.TransformerDecoderLayer(D, H, F, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    copy_common(block, ref, [("attn_norm", "norm1"), ("cross_norm", "norm2"), ("ffn_norm", "norm3")])
    copy_attention(block.cross_attn, ref.multihead_attn)
    x, memory = torch.randn(2, 4, D), torch.randn(2, 6, D)
    src = torch.tensor([[3] * 6, [3, 3, 3, 3, 0, 0]])
    out, _, _ = block(x, memory, mask=causal_mask(4), memory_mask=padding_mask(src, 0))
    expected = ref(x, memory, tgt_mask=~causal_mask(4)[0], memory_key_padding_mask=src == 0)
    assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_post_ln_output_is_normalised_and_pre_ln_is_not():
    x = torch.randn(2, 5, D) * 5 + 3
    post, _ = EncoderBlock(cfg(False)).eval()(x)
    pre, _ = EncoderBlock(cfg(True)).eval()(x)
    assert_close(post.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    assert pre.mean(-1).abs().mean() > 1.0  # Pre-LN keeps the raw residual stream


def test_decoder_block_weights_and_memory_checks():
    block = DecoderBlock(cfg(True)).eval()
    x, memory = torch.randn(1, 3, D), torch.randn(1, 5, D)
    _, self_w, cross_w = block(x, memory, mask=causal_mask(3), need_weights=True)
    assert self_w.shape == (1, H, 3, 3) and cross_w.shape == (1, H, 3, 5)
    with pytest.raises(ValueError, match="expects an encoder output"):
        block(x)
    with pytest.raises(ValueError, match="no memory"):
        DecoderBlock(cfg(True), cross_attention=False)(x, memory)


def test_residual_dropout_is_active_only_in_training():
    block = EncoderBlock(cfg(True, dropout=0.5))
    x = torch.randn(2, 5, D)
    assert not torch.allclose(block.train()(x)[0], block(x)[0])
    assert_close(block.eval()(x)[0], block(x)[0])
