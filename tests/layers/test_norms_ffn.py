import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from minitfm import FeedForward, RMSNorm, SwiGLU, make_ffn, make_norm, swiglu_hidden_size


def test_rmsnorm_matches_torch():
    ours, ref = RMSNorm(16, eps=1e-6), nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.uniform_()
        ref.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 16) * 4
    assert_close(ours(x), ref(x))


def test_rmsnorm_eps_is_inside_the_square_root():
    x = torch.zeros(1, 4)
    x[0, 0] = 1e-3
    # mean(x^2) = 2.5e-7; with eps=1e-6 inside the root: 1e-3 / sqrt(1.25e-6)
    assert_close(RMSNorm(4, eps=1e-6)(x)[0, 0], torch.tensor(1e-3 / (1.25e-6) ** 0.5))


def test_make_norm_choices():
    assert isinstance(make_norm("layer", 8), nn.LayerNorm)
    assert isinstance(make_norm("rms", 8), RMSNorm)
    with pytest.raises(ValueError, match="norm must be one of 'layer', 'rms', 'rms_offset'; got 'batch'"):
        make_norm("batch", 8)


@pytest.mark.parametrize("activation,approximate", [("gelu", "none"), ("gelu_tanh", "tanh")])
def test_gelu_variants_match_torch(activation, approximate):
    ffn = FeedForward(8, activation=activation)
    x = torch.randn(2, 3, 8)
    expected = ffn.down_proj(F.gelu(ffn.up_proj(x), approximate=approximate))
    assert_close(ffn(x), expected)


def test_relu_ffn_is_the_paper_formula():
    ffn = FeedForward(8)
    x = torch.randn(2, 3, 8)
    w1, b1, w2, b2 = ffn.up_proj.weight, ffn.up_proj.bias, ffn.down_proj.weight, ffn.down_proj.bias
    assert_close(ffn(x), torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2)
    assert ffn.up_proj.out_features == 32


def test_swiglu_matches_its_formula():
    ffn = SwiGLU(12)
    x = torch.randn(2, 3, 12)
    gate, up, down = ffn.gate_proj.weight, ffn.up_proj.weight, ffn.down_proj.weight
    assert_close(ffn(x), (F.silu(x @ gate.T) * (x @ up.T)) @ down.T)


@pytest.mark.parametrize("d_model", [48, 96, 384])
def test_swiglu_default_size_keeps_the_parameter_count_of_a_4x_mlp(d_model):
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert swiglu_hidden_size(d_model) == 8 * d_model // 3  # these sizes divide exactly
    assert count(SwiGLU(d_model)) == count(FeedForward(d_model, bias=False))


def test_make_ffn_and_errors():
    assert isinstance(make_ffn("swiglu", 12), SwiGLU)
    assert make_ffn("gelu", 12).activation == "gelu"
    with pytest.raises(ValueError, match="ffn must be one of .*'swiglu', 'geglu', 'geglu_tanh'; got 'silu'"):
        make_ffn("silu", 12)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 2"):
        FeedForward(8, dropout=2)


def test_gemmas_norm_in_bfloat16_multiplies_the_gain_in_float32_as_transformers_does():
    """Library review L1: transformers' Gemma RMSNorm computes (x_f32 normed) * (1 + w_f32), then rounds once."""
    torch.manual_seed(0)
    norm = make_norm("rms_offset", 64, eps=1e-6).to(torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(64) * 0.7)
    x = (torch.randn(32, 64) * 3).to(torch.bfloat16)
    wide = x.float()
    want = (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + norm.weight.float())).to(x.dtype)
    assert torch.equal(norm(x), want)


def test_layer_norm_without_bias():
    """make_norm(..., bias=False) and ModelConfig(norm_bias=False): LayerNorm without its additive bias, as nanoGPT's
    bias=False (issue 46's benchmark needs the same model); the RMSNorms have none to drop."""
    norm = make_norm("layer", 8, bias=False)
    assert norm.bias is None and norm.weight.shape == (8,)
    x = torch.randn(3, 8)
    assert_close(norm(x), F.layer_norm(x, (8,), norm.weight, None, norm.eps))
    with pytest.raises(TypeError, match="bias must be a bool"):
        make_norm("layer", 8, bias=None)


def test_config_norm_bias_reaches_every_norm_and_is_checked():
    from minitfm import DecoderOnlyLM, EncoderDecoder, ModelConfig

    for cls in (DecoderOnlyLM, EncoderDecoder):
        model = cls(ModelConfig.tiny(norm_bias=False, bias=False))
        norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
        assert norms and all(m.bias is None for m in norms)
        with_bias = cls(ModelConfig.tiny(bias=False))
        assert sum(p.numel() for p in with_bias.parameters()) - sum(p.numel() for p in model.parameters()) == \
            len(norms) * 16
    with pytest.raises(ValueError, match="norm_bias=False drops LayerNorm's bias"):
        ModelConfig.tiny(norm="rms", norm_bias=False)
    with pytest.raises(TypeError, match="norm_bias must be a bool"):
        ModelConfig.tiny(norm_bias=0)
