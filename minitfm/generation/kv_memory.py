"""How much memory a KV cache takes, for minitfm models and for well-known published models.

Every layer keeps one key and one value tensor of shape (B, H_kv, T, Dh), so

    cache bytes = 2 (K and V) x layers x H_kv x T x Dh x bytes per element x B

(:func:`kv_cache_bytes`, defined with the caches in :mod:`minitfm.layers.kv_cache`).

Glossary: B batch, T context length (prompt + generated tokens), H_kv key/value heads (fewer than the
query heads with grouped-query attention), Dh head dimension.

The cache grows linearly with T *and* with B while the weights stay fixed, so "what fraction of
inference memory is the cache" has no single answer: it depends on the context, the batch and on
grouped-query attention. :func:`memory_breakdown` computes it; :func:`batch_for_cache_fraction` finds
the batch at which the cache reaches a given share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import torch

from minitfm._checks import check_number, check_positive_int
from minitfm.config import ModelConfig
from minitfm.layers import delta_net
from minitfm.layers.kv_cache import bytes_per_element, kv_cache_bytes  # noqa: F401  (the formula, named here too)
from minitfm.layers.latent_attention import mla_cache_bytes_per_token


def config_cache_bytes(config: ModelConfig, seq_len: int, *, batch_size: int = 1,
                       dtype: torch.dtype | str = torch.float16) -> int:
    """The KV cache of a decoder-only :class:`~minitfm.config.ModelConfig` after ``seq_len`` tokens: a layer with a
    sliding window of W (``config.layer_window``: Mistral, Gemma 2/3) must keep only min(T, W) positions, the others
    all T; a latent attention layer (``config.mla``, DeepSeek-V2/V3) keeps R + Dr numbers per token for all its heads,
    a Gated DeltaNet layer (``config.linear_layers``) a state of fixed size; Gemma 4 counts its own layers
    (:func:`minitfm._gemma4.gemma4_cache_bytes`).
    Equal to :func:`kv_cache_bytes` for a model without windows or latents. (minitfm's bounded
    :class:`~minitfm.layers.kv_cache.SlidingKVCache` allocates min(max_seq_len, 2 W) positions: up to 2 W it is the
    plain buffer, beyond it a ring that writes each position twice, into 2 W slots, to keep the window one
    contiguous view: then it allocates twice what this counts for a windowed layer.)"""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    check_positive_int(seq_len, "seq_len")
    check_positive_int(batch_size, "batch_size")
    c = config.resolved()
    if c.gemma4 is not None:  # Gemma 4: global layers of their own width, layers that share another's keys and values
        from minitfm._gemma4 import gemma4_cache_bytes
        return gemma4_cache_bytes(c, seq_len, batch_size, dtype)
    if c.mla is not None:  # latent attention: R + Dr numbers per token and layer, shared by every head
        return c.n_layers * seq_len * batch_size * mla_cache_bytes_per_token(c.mla.kv_lora_rank,
                                                                               c.mla.qk_rope_head_dim, dtype)
    held = [seq_len if c.layer_window(i) is None else min(seq_len, c.layer_window(i)) for i in range(c.n_layers)
            if i not in c.linear_layers]
    return sum(kv_cache_bytes(1, c.n_kv_heads, n, c.d_head, batch_size=batch_size, dtype=dtype) for n in held) + \
        (len(c.linear_layers) * delta_net.cache_bytes(c.delta_net, batch_size, dtype) if c.linear_layers else 0)


def allocated_cache_bytes(caches: Iterable) -> int:
    """Bytes actually held by the key/value buffers of a list of caches (one per layer).

    For preallocated :class:`~minitfm.layers.kv_cache.KVCache` objects this equals :func:`kv_cache_bytes` at
    ``seq_len = max_seq_len``: the memory is taken up front, whatever the current length.
    """
    return sum(c.nbytes() if hasattr(c, "state") else c.nbytes if hasattr(c, "latent") else  # DeltaNet, MLA caches
               c.k.numel() * c.k.element_size() + c.v.numel() * c.v.element_size() for c in caches)


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a published decoder that decide its KV cache and weight memory."""

    name: str
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads: = n_heads for multi-head, fewer for grouped-query attention
    d_head: int
    n_params: int  # total parameters (weights memory = n_params x bytes per element)
    max_seq_len: int  # context length it was trained for
    source: str


# Shapes from the papers and the released model configurations. Parameter counts are those of the
# released checkpoints.
PUBLISHED_SHAPES = {
    s.name: s for s in [
        # Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", table 2 + released gpt2 config.
        ModelShape("GPT-2 small", 12, 12, 12, 64, 124_439_808, 1024, "Radford et al. 2019"),
        ModelShape("GPT-2 XL", 48, 25, 25, 64, 1_557_611_200, 1024, "Radford et al. 2019"),
        # Zhang et al. 2022, "OPT", table 1 (the model the vLLM paper, Kwon et al. 2023, uses for its
        # "800 KB of cache per token" and "about 30% of memory" figures).
        ModelShape("OPT-13B", 40, 40, 40, 128, 12_853_000_000, 2048, "Zhang et al. 2022"),
        # Touvron et al. 2023, "Llama 2", table 1 and the model card; 70B uses grouped-query attention (8 KV heads).
        ModelShape("Llama-2-7B", 32, 32, 32, 128, 6_738_415_616, 4096, "Touvron et al. 2023"),
        ModelShape("Llama-2-70B", 80, 64, 8, 128, 68_976_648_192, 4096, "Touvron et al. 2023"),
        # Jiang et al. 2023, "Mistral 7B", table 1 (GQA with 8 KV heads; its sliding window of 4096 lets a
        # rolling cache stop growing at 4096 positions, which a ModelShape does not model: config_cache_bytes does).
        ModelShape("Mistral-7B", 32, 32, 8, 128, 7_241_732_096, 8192, "Jiang et al. 2023"),
        # Grattafiori/Dubey et al. 2024, "The Llama 3 Herd of Models", table 3 and the Llama-3-8B model card.
        ModelShape("Llama-3-8B", 32, 32, 8, 128, 8_030_261_248, 8192, "Dubey et al. 2024"),
    ]
}


def cache_bytes_for(shape: ModelShape, seq_len: int, batch_size: int = 1,
                    dtype: torch.dtype | str = torch.float16) -> int:
    """KV-cache bytes of a published model shape at ``seq_len`` tokens and ``batch_size`` sequences."""
    return kv_cache_bytes(shape.n_layers, shape.n_kv_heads, seq_len, shape.d_head,
                          batch_size=batch_size, dtype=dtype)


def memory_breakdown(shape: ModelShape, seq_len: int, batch_size: int = 1,
                     dtype: torch.dtype | str = torch.float16) -> dict:
    """Weights versus KV cache at inference (activations, a few MB per step, are left out).

    Returns a dict with ``weights_bytes``, ``cache_bytes``, ``cache_per_token_bytes`` (one token of one
    sequence) and ``cache_fraction`` = cache / (weights + cache).
    """
    weights = shape.n_params * bytes_per_element(dtype)
    cache = cache_bytes_for(shape, seq_len, batch_size, dtype)
    return {
        "model": shape.name, "seq_len": seq_len, "batch_size": batch_size,
        "weights_bytes": weights, "cache_bytes": cache,
        "cache_per_token_bytes": cache_bytes_for(shape, 1, 1, dtype),
        "cache_fraction": cache / (weights + cache),
    }


def batch_for_cache_fraction(shape: ModelShape, seq_len: int, fraction: float,
                             dtype: torch.dtype | str = torch.float16) -> int:
    """The smallest batch at which the cache takes at least ``fraction`` of weights + cache."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    weights = shape.n_params * bytes_per_element(dtype)
    per_sequence = cache_bytes_for(shape, seq_len, 1, dtype)
    # cache / (weights + cache) >= f  <=>  B x per_sequence >= f / (1 - f) x weights
    needed = fraction / (1 - fraction) * weights / per_sequence
    return max(1, math.ceil(needed))


def format_bytes(n: float) -> str:
    """Human-readable bytes with binary units: 1536 -> '1.50 KiB'."""
    check_number(n, "n (bytes)")
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
