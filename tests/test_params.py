import pytest
from torch import nn

from minitfm.config import ModelConfig
from minitfm.models import DecoderOnlyLM, EncoderDecoder
from minitfm.params import count_params, estimate_params

CONFIGS = [
    ModelConfig.tiny(),
    ModelConfig.copy_task(),
    ModelConfig.small_lm(vocab_size=40, n_layers=1),
    ModelConfig(vocab_size=30, d_model=24, n_heads=6, n_kv_heads=2, pos="learned", norm="rms",
                ffn="gelu", bias=False, tie_embeddings=False, norm_first=False, n_encoder_layers=3),
    ModelConfig(vocab_size=30, d_model=32, n_heads=4, pos="alibi", ffn="swiglu", bias=True, d_ff=40),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("model_cls,kind", [(DecoderOnlyLM, "decoder_only"), (EncoderDecoder, "encoder_decoder")])
def test_breakdown_is_exact_and_matches_the_formula(config, model_cls, kind):
    model = model_cls(config)
    counts = count_params(model)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert counts == estimate_params(config, kind)


def test_the_widely_copied_estimate_forgets_cross_attention_biases_and_norms():
    # d_model 128, 8 heads, 6 + 6 layers, vocab 50, relu FFN 4x, biases, LayerNorm, tied embeddings
    cfg = ModelConfig(vocab_size=50, d_model=128, n_heads=8, n_layers=6, norm_first=False, max_seq_len=64)
    counts = estimate_params(cfg, "encoder_decoder")
    naive = 6400 + 12 * (65_536 + 131_072)
    assert counts["embeddings"] == 6400
    cross = 6 * (4 * 128 * 128 + 4 * 128)
    assert counts["total"] - naive > cross  # cross-attention alone is ~0.4M that the estimate misses
    assert counts["total"] == count_params(EncoderDecoder(cfg))["total"]


def test_tied_head_counts_zero_and_untied_counts_v_times_d():
    assert count_params(DecoderOnlyLM(ModelConfig.tiny()))["head"] == 0
    assert count_params(DecoderOnlyLM(ModelConfig.tiny(tie_embeddings=False)))["head"] == 16 * 16


def test_unknown_parameters_and_kinds_raise():
    model = DecoderOnlyLM(ModelConfig.tiny())
    model.extra = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="parameters outside every part"):
        count_params(model)
    with pytest.raises(ValueError, match="kind must be one of"):
        estimate_params(ModelConfig.tiny(), "encoder_only")
