import dataclasses

import pytest

from minitfm.config import ModelConfig


def test_resolved_fills_defaults_and_is_idempotent():
    cfg = ModelConfig(d_model=48, n_heads=4, n_layers=3)
    r = cfg.resolved()
    assert (r.d_ff, r.n_kv_heads, r.n_encoder_layers, r.n_decoder_layers) == (192, 4, 3, 3)
    assert r.resolved() == r and cfg.d_ff is None
    assert ModelConfig(d_model=48, n_heads=4, ffn="swiglu").resolved().d_ff == 128  # 8/3 * 48


def test_replace_keeps_defaults_in_step_with_the_width():
    cfg = dataclasses.replace(ModelConfig(d_model=32), d_model=64)
    assert cfg.resolved().d_ff == 256 and cfg.d_head == 16


def test_dict_round_trip():
    cfg = ModelConfig.small_lm(vocab_size=100)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown ModelConfig fields"):
        ModelConfig.from_dict({**cfg.to_dict(), "colour": "red"})


def test_presets_are_valid_and_overridable():
    assert ModelConfig.tiny(pos="rope").pos == "rope"
    assert ModelConfig.copy_task().vocab_size == 13
    assert ModelConfig.small_lm(vocab_size=50).vocab_size == 50


@pytest.mark.parametrize("kwargs,kind,match", [
    (dict(d_model=30, n_heads=4), ValueError, r"d_model=30, n_heads=4"),
    (dict(n_heads=4, n_kv_heads=3), ValueError, "divisible by n_kv_heads"),
    (dict(norm="batch"), ValueError, "norm must be one of"),
    (dict(pos="relative"), ValueError, "pos must be one of"),
    (dict(ffn="tanh"), ValueError, "ffn must be one of"),
    (dict(attn_impl="flash"), ValueError, "attn_impl must be one of"),
    (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
    (dict(d_model=32.0), TypeError, "d_model must be an int"),
    (dict(n_layers=0), ValueError, "n_layers must be >= 1"),
    (dict(norm_first="yes"), TypeError, "norm_first must be a bool"),
    (dict(rope_scale=0), ValueError, "rope_scale must be > 0"),
    (dict(pad_id=16), ValueError, r"pad_id must be an int in \[0, vocab_size=16\)"),
    (dict(bos_id=0), ValueError, "three different ids"),
    (dict(d_model=12, n_heads=4, pos="rope"), ValueError, "d_head .* must be even"),
])
def test_inconsistent_configs_raise(kwargs, kind, match):
    with pytest.raises(kind, match=match):
        ModelConfig(**kwargs)


def test_attn_temperature_is_checked_and_decoder_only():
    """Ministral 3's query temperature (issue 48): one named kind, a beta >= 0 and a length >= 1."""
    import minitfm

    cfg = ModelConfig.tiny(attn_temperature="ministral3", attn_temperature_beta=0.5, attn_temperature_length=4)
    assert "attn_temperature='ministral3'" in repr(cfg) and "attn_temperature" not in repr(ModelConfig.tiny())
    with pytest.raises(ValueError, match="attn_temperature"):
        ModelConfig.tiny(attn_temperature="llama5")
    with pytest.raises((TypeError, ValueError), match="attn_temperature_beta"):
        ModelConfig.tiny(attn_temperature="ministral3", attn_temperature_beta=-1.0)
    with pytest.raises((TypeError, ValueError), match="attn_temperature_length"):
        ModelConfig.tiny(attn_temperature="ministral3", attn_temperature_length=0)
    with pytest.raises(ValueError, match="attn_temperature"):
        minitfm.EncoderDecoder(cfg)
    assert minitfm.DecoderOnlyLM(cfg).layers[0].self_attn.temperature == (0.5, 4)


def test_latent_attention_and_routed_experts_are_checked():
    """Issue 48: mla and routed read back from their dicts; what they cannot be combined with is refused by name."""
    from minitfm.config import LatentDims, RoutedExperts

    mla = dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6)
    cfg = ModelConfig.small_lm(mla=mla, n_experts=4, routed=RoutedExperts(8), moe_layers=[1, 2])
    assert cfg.mla == LatentDims(**mla) and cfg.moe_layers == (1, 2)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert [cfg.layer_moe(i) for i in range(4)] == [False, True, True, False]
    for bad, match in [(dict(n_kv_heads=2), "n_kv_heads"), (dict(sliding_window=4), "sliding_window"),
                       (dict(qk_norm="head"), "qk_norm"), (dict(pos="alibi"), "pos")]:
        with pytest.raises(ValueError, match=match):
            ModelConfig.small_lm(mla=mla, **bad)
    with pytest.raises(ValueError, match="need n_experts"):
        ModelConfig.small_lm(routed=RoutedExperts(8))
    with pytest.raises(ValueError, match="d_expert"):
        ModelConfig.small_lm(n_experts=4, moe_layers=(1,))
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even"):
        LatentDims(8, 4, 3, 6)
    with pytest.raises(ValueError, match="routed.topk_method"):
        RoutedExperts(8, topk_method="best")
    with pytest.raises(ValueError, match="unknown mla fields"):
        ModelConfig.small_lm(mla={**mla, "rank": 3})


def test_attn_sinks_is_a_decoder_only_bool_without_softcap_or_alibi():
    import minitfm

    assert minitfm.DecoderOnlyLM(ModelConfig.tiny(attn_sinks=True)).layers[0].self_attn.sinks.shape == (2,)
    with pytest.raises(TypeError, match="attn_sinks"):
        ModelConfig.tiny(attn_sinks=1)
    for bad in (dict(attn_softcap=5.0), dict(pos="alibi")):
        with pytest.raises(ValueError, match="attn_sinks"):
            ModelConfig.tiny(attn_sinks=True, **bad)
    with pytest.raises(ValueError, match="attn_sinks"):
        minitfm.EncoderDecoder(ModelConfig.tiny(attn_sinks=True))


def test_rope_dims_is_an_even_part_of_a_rope_head():
    import minitfm

    model = minitfm.DecoderOnlyLM(ModelConfig.small_lm(d_model=32, n_heads=2, rope_dims=8))
    assert model.rope.d_head == 8 and model.config.d_head == 16
    for bad in (dict(rope_dims=7), dict(rope_dims=18), dict(rope_dims=8, pos="learned")):
        with pytest.raises(ValueError, match="rope_dims"):
            ModelConfig.small_lm(d_model=32, n_heads=2, **{**dict(rope_dims=8), **bad})
