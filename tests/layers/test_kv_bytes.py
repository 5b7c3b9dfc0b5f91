"""Issue 48: one formula for the bytes of a softmax KV cache, :func:`minitfm.layers.kv_cache.kv_cache_bytes`, which
every count calls: whole models (``generation.kv_memory``, ``minitfm.kv_cache_bytes``), latent attention's GQA
comparison and DeltaNet's softmax comparison. MLA's latent and DeltaNet's state keep their own formulas, on the same
bytes per number, and the whole-model count uses them layer kind by layer kind.
"""
from __future__ import annotations

import pytest
import torch

import minitfm
from minitfm.config import DeltaDims, ModelConfig
from minitfm.generation import kv_memory
from minitfm.layers import delta_net, latent_attention
from minitfm.layers.delta_net import GatedDeltaNet, cache_bytes, softmax_kv_bytes
from minitfm.layers.kv_cache import KVCache, bytes_per_element, kv_cache_bytes
from minitfm.layers.latent_attention import gqa_cache_bytes_per_token, mla_cache_bytes_per_token

DTYPES = (torch.float32, torch.bfloat16, torch.float64, "fp16", "int8")


def test_one_formula_under_every_name():
    assert kv_memory.kv_cache_bytes is kv_cache_bytes and minitfm.kv_cache_bytes is kv_cache_bytes
    assert kv_memory.bytes_per_element is bytes_per_element
    cache = KVCache(2, 3, 5, 4, dtype=torch.bfloat16)  # (B, H_kv, T_max, Dh): what the formula counts at T = T_max
    assert kv_cache_bytes(1, 3, 5, 4, batch_size=2, dtype=torch.bfloat16) == cache.k.nbytes + cache.v.nbytes == 480


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_layers_comparisons_are_that_formula(dtype):
    size = bytes_per_element(dtype)
    for t, h_kv, d_head, b in ((1, 1, 1, 1), (7, 2, 16, 3), (4096, 8, 128, 2)):
        one_layer = kv_cache_bytes(1, h_kv, t, d_head, batch_size=b, dtype=dtype)
        assert one_layer == 2 * t * h_kv * d_head * size * b
        assert softmax_kv_bytes(t, h_kv, d_head, batch_size=b, dtype=dtype) == one_layer
        assert gqa_cache_bytes_per_token(h_kv, d_head, size) == gqa_cache_bytes_per_token(h_kv, d_head, dtype) == \
            kv_cache_bytes(1, h_kv, 1, d_head, dtype=dtype)


def test_the_helpers_call_it_rather_than_a_copy(monkeypatch):
    """Change the formula in its one place: every comparison follows."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return 7

    for module in (delta_net, latent_attention, kv_memory):
        monkeypatch.setattr(module, "kv_cache_bytes", counted)
    dense = ModelConfig.small_lm(vocab_size=30, d_model=32, n_layers=2)
    assert (softmax_kv_bytes(5, 2, 8), gqa_cache_bytes_per_token(2, 8), kv_memory.config_cache_bytes(dense, 5)) == \
        (7, 7, 14)
    assert calls == [(1, 2, 5, 8), (1, 2, 1, 8), (1, 4, 5, 8), (1, 4, 5, 8)]


def test_bytes_per_element_takes_a_count_of_bytes_too():
    assert [bytes_per_element(x) for x in (1, 2, 4, torch.float16, "bf16")] == [1, 2, 4, 2, 2]
    for bad in (0, -2, True, 2.0, "fp12", None):
        with pytest.raises(ValueError, match="dtype must be a torch.dtype"):
            bytes_per_element(bad)
    with pytest.raises(ValueError, match="bytes_per_number must be >= 1"):
        gqa_cache_bytes_per_token(4, 8, 0)
    with pytest.raises(ValueError, match="bytes_per_number must be >= 1"):
        mla_cache_bytes_per_token(512, 64, 0)
    with pytest.raises(ValueError, match="seq_len must be >= 1"):
        softmax_kv_bytes(0, 4, 8)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float64))
def test_a_whole_model_adds_each_layer_kinds_own_formula(dtype):
    mla = ModelConfig.small_lm(vocab_size=30, d_model=32, n_layers=3,
                               mla=dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=6))
    per_token = mla_cache_bytes_per_token(8, 4, dtype)
    assert per_token == mla_cache_bytes_per_token(8, 4, bytes_per_element(dtype)) == 12 * bytes_per_element(dtype)
    assert kv_memory.config_cache_bytes(mla, 16, batch_size=2, dtype=dtype) == 3 * 16 * 2 * per_token
    with pytest.raises(ValueError, match="batch_size must be >= 1"):  # the latent branch checks it too
        kv_memory.config_cache_bytes(mla, 16, batch_size=0)

    sizes = DeltaDims(n_heads=4, n_key_heads=2, d_key_head=8, d_value_head=6, conv_kernel=3)
    hybrid = ModelConfig.small_lm(vocab_size=30, d_model=32, n_layers=3, linear_layers=(0, 2), delta_net=sizes)
    layer = GatedDeltaNet(32, 4, 2, 8, 6, conv_kernel=3).to(dtype)
    state = cache_bytes(sizes, 2, dtype)  # the sizes of a config, or the layer: one formula
    assert state == cache_bytes(layer, 2, dtype) == layer.new_cache(2).nbytes()
    assert kv_memory.config_cache_bytes(hybrid, 16, batch_size=2, dtype=dtype) == \
        kv_cache_bytes(1, 4, 16, 8, batch_size=2, dtype=dtype) + 2 * state
