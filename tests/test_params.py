import dataclasses
import itertools

import pytest
from torch import nn

from minitfm.config import SUBLAYER_NORMS, ModelConfig
from minitfm.layers.feedforward import FFN_KINDS
from minitfm.layers.moe import MoEFeedForward
from minitfm.layers.multihead import QK_NORMS
from minitfm.layers.norms import NORMS
from minitfm.models import DecoderOnlyLM, EncoderDecoder
from minitfm.params import PARTS, active_params, attention_params, count_params, estimate_params, ffn_params

CONFIGS = [
    ModelConfig.tiny(),
    ModelConfig.copy_task(),
    ModelConfig.small_lm(vocab_size=40, n_layers=1),
    ModelConfig(vocab_size=30, d_model=24, n_heads=6, n_kv_heads=2, pos="learned", norm="rms",
                ffn="gelu", bias=False, tie_embeddings=False, norm_first=False, n_encoder_layers=3),
    ModelConfig(vocab_size=30, d_model=32, n_heads=4, pos="alibi", ffn="swiglu", bias=True, d_ff=40),
    # today's decoders' axes, in both kinds of model: every attention (cross too) has the QK-norm
    ModelConfig(vocab_size=30, d_model=24, n_heads=4, n_kv_heads=2, head_dim=10, qkv_bias=True, bias=False,
                qk_norm="head", sublayer_norm="both", norm="rms_offset", ffn="geglu_tanh", pos="rope", d_ff=20),
    ModelConfig(vocab_size=30, d_model=24, n_heads=4, n_kv_heads=1, qkv_bias=False, bias=True, qk_norm="all",
                sublayer_norm="output", norm="layer", ffn="geglu", n_decoder_layers=3),
    ModelConfig(vocab_size=65, d_model=32, n_heads=4, n_layers=2, norm="layer", norm_bias=False, bias=False,
                pos="learned", ffn="gelu"),  # nanoGPT's bias=False: LayerNorm without bias (issue 46)
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("model_cls,kind", [(DecoderOnlyLM, "decoder_only"), (EncoderDecoder, "encoder_decoder")])
def test_breakdown_is_exact_and_matches_the_formula(config, model_cls, kind):
    model = model_cls(config)
    counts = count_params(model)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert counts == estimate_params(config, kind)
    assert active_params(config, kind) == counts["total"]  # dense: a token uses every parameter


def test_every_combination_of_the_open_decoders_axes_matches_the_formula():
    """The closed form equals the exact count of the decoder-only model over all 216 combinations of the block's
    axes (biases, norm placement, norm kind, FFN kind, mixture of experts), with the 24 combinations of the
    attention's (head size, q/k/v biases, QK-norm) cycled along them."""
    attention = itertools.cycle(itertools.product((None, 6), (None, True, False), QK_NORMS))
    block = itertools.product((True, False), SUBLAYER_NORMS, NORMS, FFN_KINDS, (None, 3))
    seen = set()
    for (head_dim, qkv_bias, qk_norm), (bias, placement, norm, ffn, experts) in zip(attention, block):
        config = ModelConfig(vocab_size=11, d_model=8, n_heads=2, n_kv_heads=1, d_ff=5, n_layers=1, max_seq_len=8,
                             head_dim=head_dim, qkv_bias=qkv_bias, bias=bias, qk_norm=qk_norm, sublayer_norm=placement,
                             norm=norm, ffn=ffn, n_experts=experts, pos="learned", tie_embeddings=False)
        assert count_params(DecoderOnlyLM(config)) == estimate_params(config), config
        seen.add((qk_norm, norm))
    assert len(seen) == len(QK_NORMS) * 3  # each QK-norm met each norm kind (an RMSNorm, with Gemma's offset or not)


def test_gated_geglu_counts_three_matrices_as_swiglu_does():
    """The formula once counted only SwiGLU as gated: a GeGLU FFN of the same F has SwiGLU's parameters, not the
    two-matrix MLP's (D 16, F 24, 2 layers, no biases: 3 x 16 x 24 x 2 = 2304, where the MLP has 1536)."""
    gelu, swiglu, geglu, geglu_tanh = (ModelConfig.tiny(ffn=f, d_ff=24, bias=False) for f in
                                       ("gelu", "swiglu", "geglu", "geglu_tanh"))
    for config in (geglu, geglu_tanh):
        assert count_params(DecoderOnlyLM(config))["ffn"] == 2 * 3 * 16 * 24 == estimate_params(config)["ffn"]
        assert ffn_params(config) == ffn_params(swiglu) != ffn_params(gelu) == 2 * 16 * 24


def test_qk_norm_sandwich_and_qkv_bias_are_counted_where_they_sit():
    base = ModelConfig.tiny(n_layers=3, norm="rms", bias=False)  # D 16, H 2, Dh 8, 3 layers, RMSNorm
    dense = count_params(DecoderOnlyLM(base))
    head = count_params(DecoderOnlyLM(dataclasses.replace(base, qk_norm="head")))
    every = count_params(DecoderOnlyLM(dataclasses.replace(base, qk_norm="all", n_kv_heads=1)))
    assert head["attention"] - dense["attention"] == 3 * 2 * 8  # q_norm and k_norm of width Dh per layer
    assert every["attention"] - count_params(DecoderOnlyLM(dataclasses.replace(base, n_kv_heads=1)))["attention"] \
        == 3 * (2 * 8 + 1 * 8)  # widths H Dh and H_kv Dh
    both = count_params(DecoderOnlyLM(dataclasses.replace(base, sublayer_norm="both")))
    output = count_params(DecoderOnlyLM(dataclasses.replace(base, sublayer_norm="output")))
    assert (both["norms"], output["norms"], dense["norms"]) == (16 * (4 * 3 + 1), 16 * (2 * 3 + 1), 16 * (2 * 3 + 1))
    qkv = count_params(DecoderOnlyLM(dataclasses.replace(base, qkv_bias=True)))
    assert qkv["attention"] - dense["attention"] == 3 * 3 * 16  # q, k, v biases; out_proj keeps none
    assert attention_params(dataclasses.replace(base, qkv_bias=True)) == attention_params(base) + 3 * 16


def test_a_mixture_of_experts_counts_its_router_under_ffn_and_k_experts_as_active():
    config = ModelConfig.tiny(n_layers=2, ffn="swiglu", d_ff=12, bias=False, n_experts=4, experts_per_token=2)
    model = DecoderOnlyLM(config)
    counts = count_params(model)  # the router (a plain Linear inside the MoE layer) used to raise here
    expert = 3 * 16 * 12
    assert counts["ffn"] == 2 * (16 * 4 + 4 * expert) == estimate_params(config)["ffn"]
    assert counts == estimate_params(config)
    moe = [m.parameter_counts() for m in model.modules() if isinstance(m, MoEFeedForward)]  # (total, active)
    assert len(moe) == 2
    assert active_params(config) == counts["total"] - sum(total - active for total, active in moe)
    assert active_params(config) == counts["total"] - 2 * 2 * expert
    assert active_params(dataclasses.replace(config, experts_per_token=4)) == counts["total"]


def test_mixtral_8x7b_has_the_published_46_7b_parameters_and_12_9b_active():
    """Mixtral 8x7B's published config (Jiang et al., 2024): 46.7B parameters, 12.9B used per token."""
    mixtral = ModelConfig(vocab_size=32000, d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336, n_layers=32,
                          norm="rms", pos="rope", ffn="swiglu", bias=False, tie_embeddings=False, n_experts=8,
                          experts_per_token=2)
    total, active = estimate_params(mixtral)["total"], active_params(mixtral)
    assert (round(total / 1e9, 1), round(active / 1e9, 1)) == (46.7, 12.9)
    assert total == 46_702_792_704 and active == 12_879_925_248


def test_tied_head_counts_zero_and_untied_counts_v_times_d():
    assert count_params(DecoderOnlyLM(ModelConfig.tiny()))["head"] == 0
    assert count_params(DecoderOnlyLM(ModelConfig.tiny(tie_embeddings=False)))["head"] == 16 * 16


def test_the_widely_copied_estimate_forgets_cross_attention_biases_and_norms():
    # d_model 128, 8 heads, 6 + 6 layers, vocab 50, relu FFN 4x, biases, LayerNorm, tied embeddings
    cfg = ModelConfig(vocab_size=50, d_model=128, n_heads=8, n_layers=6, norm_first=False, max_seq_len=64)
    counts = estimate_params(cfg, "encoder_decoder")
    naive = 6400 + 12 * (65_536 + 131_072)
    assert counts["embeddings"] == 6400
    cross = 6 * (4 * 128 * 128 + 4 * 128)
    assert counts["total"] - naive > cross  # cross-attention alone is ~0.4M that the estimate misses
    assert counts["total"] == count_params(EncoderDecoder(cfg))["total"]


def test_unknown_parameters_and_kinds_raise():
    model = DecoderOnlyLM(ModelConfig.tiny())
    model.extra = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="parameters outside every part"):
        count_params(model)
    with pytest.raises(ValueError, match="kind must be one of"):
        estimate_params(ModelConfig.tiny(), "encoder_only")
    with pytest.raises(ValueError, match="kind must be one of"):
        active_params(ModelConfig.tiny(), "encoder_only")
    with pytest.raises(TypeError, match="config must be a ModelConfig, got dict"):
        active_params({})
    with pytest.raises(TypeError, match="c must be a ModelConfig, got NoneType"):
        ffn_params(None)
    with pytest.raises(TypeError, match="active must be a bool, got int"):
        ffn_params(ModelConfig.tiny(), active=1)
    assert PARTS == ("embeddings", "attention", "ffn", "norms", "head")


@pytest.mark.parametrize("q_lora_rank, bias", [(None, False), (12, True)])
def test_latent_attention_and_routed_experts_are_counted(q_lora_rank, bias):
    """Issue 48: the formula counts latent attention, routed and shared experts and the dense layers before them."""
    from minitfm.config import RoutedExperts

    cfg = ModelConfig.small_lm(vocab_size=50, d_model=32, n_layers=3, bias=bias, tie_embeddings=False, n_experts=4,
                               mla=dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6,
                                        q_lora_rank=q_lora_rank), experts_per_token=2,
                               routed=RoutedExperts(8, n_shared_experts=1), moe_layers=(1, 2))
    model = DecoderOnlyLM(cfg)
    assert count_params(model) == estimate_params(cfg)
    unused = 2 * (4 - 2) * 3 * 32 * 8  # two MoE layers, E - k experts of 3 D F each
    assert active_params(cfg) == count_params(model)["total"] - unused
