import pytest
import torch

from minitfm.generation.kv_memory import (
                                          PUBLISHED_SHAPES,
                                          allocated_cache_bytes,
                                          batch_for_cache_fraction,
                                          bytes_per_element,
                                          cache_bytes_for,
                                          format_bytes,
                                          kv_cache_bytes,
                                          memory_breakdown,
                                          )
from minitfm.layers.kv_cache import KVCache


def test_kv_cache_bytes_by_hand():
    # 2 (K, V) x 3 layers x 4 heads x 10 positions x 8 dims x 2 bytes x 5 sequences
    assert kv_cache_bytes(3, 4, 10, 8, batch_size=5, dtype=torch.float16) == 2 * 3 * 4 * 10 * 8 * 2 * 5 == 19200
    assert kv_cache_bytes(3, 4, 10, 8, dtype="fp32") == 2 * 3 * 4 * 10 * 8 * 4


def test_bytes_per_element():
    assert bytes_per_element(torch.float32) == 4
    assert bytes_per_element(torch.bfloat16) == 2
    assert bytes_per_element("int8") == 1
    with pytest.raises(ValueError, match="dtype must be"):
        bytes_per_element("fp12")


def test_allocated_bytes_match_formula():
    caches = [KVCache(2, 3, 16, 4, dtype=torch.float32) for _ in range(5)]
    assert allocated_cache_bytes(caches) == kv_cache_bytes(5, 3, 16, 4, batch_size=2, dtype=torch.float32)


def test_published_shapes_known_figures():
    # Llama-2-7B: 2 x 32 x 32 x 128 x 2 bytes = 512 KiB per token, so 1 GiB at 2048 tokens
    assert cache_bytes_for(PUBLISHED_SHAPES["Llama-2-7B"], 2048) == 2 ** 30
    # OPT-13B: the vLLM paper's "800 KB per token"
    assert cache_bytes_for(PUBLISHED_SHAPES["OPT-13B"], 1) == 800 * 1024
    # grouped-query attention: Llama-2-70B keeps 8 of 64 heads -> 80 x 8 x 128 x 2 x 2 bytes per token
    assert cache_bytes_for(PUBLISHED_SHAPES["Llama-2-70B"], 1) == 2 * 80 * 8 * 128 * 2


def test_memory_breakdown_and_batch_for_fraction():
    shape = PUBLISHED_SHAPES["Llama-2-7B"]
    info = memory_breakdown(shape, 2048, batch_size=1)
    assert info["weights_bytes"] == shape.n_params * 2
    assert info["cache_fraction"] == pytest.approx(2 ** 30 / (2 ** 30 + shape.n_params * 2))
    batch = batch_for_cache_fraction(shape, 2048, 0.3)
    assert memory_breakdown(shape, 2048, batch)["cache_fraction"] >= 0.3
    assert memory_breakdown(shape, 2048, batch - 1)["cache_fraction"] < 0.3
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        batch_for_cache_fraction(shape, 2048, 1.5)


def test_invalid_sizes_raise():
    with pytest.raises(ValueError, match="seq_len must be >= 1"):
        kv_cache_bytes(1, 1, 0, 8)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(2 ** 30) == "1.00 GiB"


def test_config_cache_bytes_keeps_only_the_window_of_a_windowed_layer():
    import pytest

    from minitfm.config import ModelConfig
    from minitfm.generation.kv_memory import config_cache_bytes, kv_cache_bytes

    dense = ModelConfig.small_lm(d_model=64, n_heads=4, n_kv_heads=2, n_layers=3, max_seq_len=512)
    assert config_cache_bytes(dense, 100) == kv_cache_bytes(3, 2, 100, 16)
    windowed = ModelConfig.small_lm(d_model=64, n_heads=4, n_kv_heads=2, n_layers=3, max_seq_len=512,
                                    sliding_window=8, sliding_layers=(0, 2))
    per_position = 2 * 2 * 16 * 2  # K and V, 2 heads of 16, 2 bytes
    assert config_cache_bytes(windowed, 100) == per_position * (8 + 100 + 8)
    assert config_cache_bytes(windowed, 5) == config_cache_bytes(dense, 5)  # shorter than the window: no saving
    with pytest.raises(TypeError, match="config must be a ModelConfig"):
        config_cache_bytes("Mistral-7B", 100)


def test_latent_attention_caches_its_latent_and_rope_key_per_token():
    """Issue 48: a latent attention layer keeps R + Dr numbers per token for all its heads."""
    from minitfm.config import ModelConfig
    from minitfm.generation.kv_memory import config_cache_bytes
    from minitfm.models import DecoderOnlyLM

    cfg = ModelConfig.small_lm(vocab_size=30, d_model=32, n_layers=3,
                               mla=dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6))
    assert config_cache_bytes(cfg, 16, batch_size=2, dtype=torch.float32) == 3 * 16 * (8 + 4) * 4 * 2
    caches = DecoderOnlyLM(cfg).new_caches(2, 16)
    assert allocated_cache_bytes([c.self_attn for c in caches]) == config_cache_bytes(cfg, 16, batch_size=2,
                                                                                      dtype=torch.float32)


def test_a_gated_deltanet_layer_holds_a_state_of_fixed_size():
    """Issue 48: config_cache_bytes counts a DeltaNet layer's convolution window and state, whatever T."""
    from minitfm.config import ModelConfig
    from minitfm.generation.kv_memory import config_cache_bytes
    from minitfm.models import DecoderOnlyLM

    cfg = ModelConfig.small_lm(vocab_size=30, d_model=32, n_layers=2, linear_layers=(0,),
                               delta_net=dict(n_heads=4, n_key_heads=2, d_key_head=8, d_value_head=6))
    caches = DecoderOnlyLM(cfg).new_caches(2, 16)
    held = config_cache_bytes(cfg, 16, batch_size=2, dtype=torch.float32)
    assert allocated_cache_bytes([c.self_attn for c in caches]) == held
    attention = kv_cache_bytes(1, 4, 16, 32 // 4, batch_size=2, dtype=torch.float32)  # layer 1: K and V, 16 tokens
    state = 2 * ((2 * 2 * 8 + 4 * 6) * 3 + 4 * 8 * 6) * 4  # B (C_conv (K - 1) + H Dk Dv) float32 numbers
    assert held == attention + state
    assert config_cache_bytes(cfg, 32, batch_size=2, dtype=torch.float32) == 2 * attention + state  # only attention grows
