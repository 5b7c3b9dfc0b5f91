"""Parameter accounting: an exact count by part of the model, and the closed-form formula that matches it.

Glossary: V vocab_size, D d_model, H heads, H_kv key/value heads, Dh = D / H, F d_ff, T_max max_seq_len,
L layers. Parts: ``embeddings`` (token table, learned positions), ``attention`` (q/k/v/out projections,
self and cross), ``ffn``, ``norms`` (every LayerNorm/RMSNorm, final norms included), ``head`` (the
output projection; 0 when tied to the embedding, since it is the same matrix).
"""
from __future__ import annotations

from torch import nn

from minitfm.config import ModelConfig
from minitfm.layers.feedforward import FeedForward, SwiGLU
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import RMSNorm
from minitfm.layers.positional import LearnedPositionalEmbedding

PARTS = ("embeddings", "attention", "ffn", "norms", "head")
MODEL_KINDS = ("decoder_only", "encoder_decoder")


def _part(name: str, module: nn.Module) -> str | None:
    if isinstance(module, LearnedPositionalEmbedding) or name == "tok_emb":
        return "embeddings"
    if isinstance(module, MultiHeadAttention):
        return "attention"
    if isinstance(module, (FeedForward, SwiGLU)):
        return "ffn"
    if isinstance(module, (nn.LayerNorm, RMSNorm)):
        return "norms"
    if name == "lm_head":
        return "head"
    return None


def count_params(model: nn.Module) -> dict[str, int]:
    """Exact parameters per part, plus ``"total"`` (equal to ``sum(p.numel() for p in model.parameters())``).

    A tied matrix is counted once, under ``embeddings``. Raises if a parameter belongs to no part, so a
    new kind of module cannot silently escape the breakdown.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    counts = dict.fromkeys(PARTS, 0)
    seen: set[int] = set()
    for name, module in model.named_modules():
        part = _part(name, module)
        if part is None:
            continue
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                counts[part] += p.numel()
    missing = [n for n, p in model.named_parameters() if id(p) not in seen]
    if missing:
        raise ValueError(f"parameters outside every part {PARTS}: {missing}")
    counts["total"] = sum(counts[part] for part in PARTS)
    return counts


def attention_params(c: ModelConfig) -> int:
    """q_proj D x H Dh, k_proj and v_proj D x H_kv Dh each, out_proj H Dh x D, plus their biases."""
    if not isinstance(c, ModelConfig):
        raise TypeError(f"c must be a ModelConfig, got {type(c).__name__}")
    c = c.resolved()
    q, kv = c.n_heads * c.d_head, c.n_kv_heads * c.d_head
    weights = c.d_model * q + 2 * c.d_model * kv + q * c.d_model
    return weights + (q + 2 * kv + c.d_model if c.bias else 0)


def ffn_params(c: ModelConfig) -> int:
    """MLP: up D x F and down F x D (+ biases F + D); SwiGLU adds gate D x F (+ bias F)."""
    n_in = 2 if c.ffn == "swiglu" else 1  # input-side matrices: up (and gate)
    weights = (n_in + 1) * c.d_model * c.d_ff
    return weights + (n_in * c.d_ff + c.d_model if c.bias else 0)


def estimate_params(config: ModelConfig, kind: str = "decoder_only") -> dict[str, int]:
    """The closed-form count of :func:`count_params` for a ``"decoder_only"`` or ``"encoder_decoder"`` model."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
    if kind not in MODEL_KINDS:
        raise ValueError(f"kind must be one of {MODEL_KINDS}, got {kind!r}")
    c = config.resolved()
    norm = 2 * c.d_model if c.norm == "layer" else c.d_model  # LayerNorm has weight and bias
    if kind == "decoder_only":
        n_attn, n_ffn, n_norms = c.n_layers, c.n_layers, 2 * c.n_layers + c.norm_first
    else:
        enc, dec = c.n_encoder_layers, c.n_decoder_layers
        # encoder: self-attn + FFN (2 norms); decoder: self + cross + FFN (3 norms); a final norm each if Pre-LN
        n_attn, n_ffn, n_norms = enc + 2 * dec, enc + dec, 2 * enc + 3 * dec + 2 * c.norm_first
    counts = {
        "embeddings": c.vocab_size * c.d_model + (c.max_seq_len * c.d_model if c.pos == "learned" else 0),
        "attention": n_attn * attention_params(c),
        "ffn": n_ffn * ffn_params(c),
        "norms": n_norms * norm,
        "head": 0 if c.tie_embeddings else c.d_model * c.vocab_size,
    }
    counts["total"] = sum(counts.values())
    return counts
