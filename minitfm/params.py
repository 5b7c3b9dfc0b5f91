"""Parameter accounting: an exact count by part of the model, and the closed-form formula that matches it.

Glossary: V vocab_size, D d_model, H heads, H_kv key/value heads, Dh head size (``head_dim``, else D / H), F d_ff
(one expert's hidden size in a mixture of experts), T_max max_seq_len, L layers, E experts, k experts per token.
Parts: ``embeddings`` (token table, learned positions), ``attention`` (q/k/v/out projections, self and cross,
with their QK-norms), ``ffn`` (the MLP; in a mixture of experts the router and every expert), ``norms`` (every
LayerNorm/RMSNorm around the sublayers, sandwich and output norms and final norms included), ``head`` (the output
projection; 0 when tied to the embedding, since it is the same matrix).

A mixture of experts stores E experts per layer but runs k of them for a token: :func:`active_params` counts
what one token uses (Mixtral 8x7B: 46.7B stored, 12.9B per token). Latent attention (``config.mla``) and routed
experts (``config.routed``, only in ``config.moe_layers``, the other layers dense) are counted by their own sizes.
"""
from __future__ import annotations

from torch import nn

from minitfm._gemma4 import Gemma4Experts, PerLayerEmbeddings, PerLayerInput, gemma4_lookups, gemma4_params
from minitfm.config import ModelConfig
from minitfm.layers.delta_net import GatedDeltaNet
from minitfm.layers.feedforward import GATED, FeedForward, SwiGLU
from minitfm.layers.latent_attention import LatentAttention
from minitfm.layers.moe import MoEFeedForward
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import RMSNorm
from minitfm.layers.positional import LearnedPositionalEmbedding
from minitfm.layers.routed_moe import RoutedMoE, moe_params

PARTS = ("embeddings", "attention", "ffn", "norms", "head")
MODEL_KINDS = ("decoder_only", "encoder_decoder")


def _part(name: str, module: nn.Module) -> str | None:
    if isinstance(module, (LearnedPositionalEmbedding, PerLayerEmbeddings, PerLayerInput)) or name == "tok_emb":
        return "embeddings"
    if isinstance(module, (MultiHeadAttention, LatentAttention, GatedDeltaNet)):  # its norms too: inside it
        return "attention"
    if isinstance(module, (FeedForward, SwiGLU, MoEFeedForward, RoutedMoE, Gemma4Experts)):  # SwiGLU covers GeGLU; MoE: router + experts
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
    for name, module in model.named_modules():  # a module comes before its children: the outer part wins
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


def _check(c: ModelConfig, name: str = "c") -> ModelConfig:
    if not isinstance(c, ModelConfig):
        raise TypeError(f"{name} must be a ModelConfig, got {type(c).__name__}")
    return c.resolved()


def attention_params(c: ModelConfig) -> int:
    """One attention sublayer: q_proj D x H Dh, k_proj and v_proj D x H_kv Dh each, out_proj H Dh x D; biases
    H Dh + 2 H_kv Dh on q, k, v (``qkv_bias``, which defaults to ``bias``) and D on out_proj (``bias``); the
    QK-norm's RMSNorm weights, 2 Dh for ``qk_norm="head"`` (one of width Dh for q, one for k, shared by the heads)
    or (H + H_kv) Dh for ``"all"`` (one over every query head's features, one over every key head's)."""
    c = _check(c)
    if c.mla is not None:
        return _latent_attention_params(c)
    q, kv = c.n_heads * c.d_head, c.n_kv_heads * c.d_head
    weights = c.d_model * q + 2 * c.d_model * kv + q * c.d_model
    qkv_bias = c.bias if c.qkv_bias is None else c.qkv_bias
    biases = (q + 2 * kv if qkv_bias else 0) + (c.d_model if c.bias else 0)
    qk_norm = {"none": 0, "weightless": 0, "head": 2 * c.d_head, "all": q + kv}[c.qk_norm]
    gate = (c.d_model * q + (q if qkv_bias else 0)) if c.attn_output_gate else 0  # Qwen 3.5's output gate
    return weights + biases + qk_norm + gate + (c.n_heads if c.attn_sinks else 0)  # gpt-oss: one sink per head


def delta_net_params(c: ModelConfig) -> int:
    """One Gated DeltaNet layer: projections D x (2 H_k Dk + 2 H Dv + 2 H) (q, k, v, the gate z, b and a), the
    depthwise convolution (2 H_k Dk + H Dv) K, dt_bias and A_log H each, the gated norm Dv, out H Dv x D."""
    n, d = c.delta_net, c.d_model
    conv = 2 * n.n_key_heads * n.d_key_head + n.n_heads * n.d_value_head
    return d * (conv + n.n_heads * n.d_value_head + 2 * n.n_heads) + conv * n.conv_kernel + 2 * n.n_heads + \
        n.d_value_head + n.n_heads * n.d_value_head * d


def _latent_attention_params(c: ModelConfig) -> int:
    """Latent attention: queries D x H (Dn + Dr), or D x R_q (+ bias), an RMSNorm R_q and R_q x H (Dn + Dr); keys and
    values D x (R + Dr) (+ bias), an RMSNorm R and R x H (Dn + Dv); out H Dv x D (+ bias D)."""
    m, d, h = c.mla, c.d_model, c.n_heads
    qk = h * (m.qk_nope_head_dim + m.qk_rope_head_dim)
    r_q = m.q_lora_rank
    queries = d * qk if r_q is None else d * r_q + (r_q if c.bias else 0) + r_q + r_q * qk
    kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + (m.kv_lora_rank + m.qk_rope_head_dim if c.bias else 0) + \
        m.kv_lora_rank + m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
    return queries + kv + h * m.v_head_dim * d + (d if c.bias else 0)


def mlp_params(c: ModelConfig) -> int:
    """One MLP (the dense FFN, or one expert): up D x F and down F x D (+ biases F + D); the gated kinds (SwiGLU,
    GeGLU, ``geglu_tanh``) add gate D x F (+ bias F)."""
    c = _check(c)
    n_in = 2 if c.ffn in GATED else 1  # input-side matrices: up (and gate)
    weights = (n_in + 1) * c.d_model * c.d_ff
    return weights + (n_in * c.d_ff + c.d_model if c.bias else 0)


def ffn_params(c: ModelConfig, active: bool = False) -> int:
    """One FFN sublayer: the MLP of :func:`mlp_params`; with ``n_experts`` the router D x E (no bias) plus E MLPs,
    or with ``active=True`` the router plus the k MLPs that one token runs."""
    c = _check(c)
    if not isinstance(active, bool):
        raise TypeError(f"active must be a bool, got {type(active).__name__}")
    if c.n_experts is None:
        return mlp_params(c)
    if c.routed is not None:  # a layer of routed_moe.RoutedMoE: (total, active) from its own formula
        r = c.routed
        gated = 3 * c.d_model * r.d_shared + c.d_model if r.d_shared else 0  # Qwen3-Next's gated shared expert
        return moe_params(c.d_model, c.n_experts, c.experts_per_token, r.d_expert, r.n_shared_experts, r.router_bias,
                          r.expert_bias)[active] + gated
    return c.d_model * c.n_experts + (c.experts_per_token if active else c.n_experts) * mlp_params(c)


def norms_per_layer(c: ModelConfig, cross_attention: bool = False) -> int:
    """Norms in one block: 1 per self-attention and FFN sublayer (Pre-LN's input norm, OLMo 2's output norm, or
    Post-LN's), 2 with ``sublayer_norm="both"`` (Gemma 2/3's sandwich); cross-attention always has 1."""
    c = _check(c)
    per_sublayer = 2 if c.sublayer_norm == "both" else 1
    return 2 * per_sublayer + (1 if cross_attention else 0)


def estimate_params(config: ModelConfig, kind: str = "decoder_only") -> dict[str, int]:
    """The closed-form count of :func:`count_params` for a ``"decoder_only"`` or ``"encoder_decoder"`` model.

    embeddings V D (+ T_max D if learned positions); attention and ffn: one sublayer's
    :func:`attention_params` and :func:`ffn_params` times the sublayers; norms: :func:`norms_per_layer` per block
    plus one final norm per stack (Pre-LN), each D (RMSNorm, or LayerNorm with ``norm_bias=False``) or 2 D (LayerNorm:
    weight and bias); head V D
    (0 if tied).
    """
    c = _check(config, "config")
    if kind not in MODEL_KINDS:
        raise ValueError(f"kind must be one of {MODEL_KINDS}, got {kind!r}")
    if c.gemma4 is not None:  # Gemma 4: layers of two widths, per-layer inputs (counted as embeddings), shared K/V
        return gemma4_params(c)
    norm = 2 * c.d_model if c.norm == "layer" and c.norm_bias else c.d_model  # LayerNorm: weight and bias
    if kind == "decoder_only":
        n_attn, n_ffn = c.n_layers, c.n_layers
        n_norms = c.n_layers * norms_per_layer(c) + c.norm_first
    else:
        enc, dec = c.n_encoder_layers, c.n_decoder_layers
        # encoder: self-attn + FFN; decoder: self + cross + FFN; a final norm after each stack if Pre-LN
        n_attn, n_ffn = enc + 2 * dec, enc + dec
        n_norms = enc * norms_per_layer(c) + dec * norms_per_layer(c, cross_attention=True) + 2 * c.norm_first
    counts = {
        "embeddings": c.vocab_size * c.d_model + (c.max_seq_len * c.d_model if c.pos == "learned" else 0),
        "attention": n_attn * attention_params(c) - (len(c.linear_layers) * (attention_params(c) - delta_net_params(c))
                                                      if c.linear_layers else 0),
        "ffn": n_ffn * ffn_params(c) - _dense_saving(c, n_ffn),
        "norms": n_norms * norm,
        "head": 0 if c.tie_embeddings else c.d_model * c.vocab_size,
    }
    counts["total"] = sum(counts.values())
    return counts


def active_params(config: ModelConfig, kind: str = "decoder_only", *, embedding: bool = True) -> int:
    """The parameters one token's forward pass uses: :func:`estimate_params`'s total less, in every FFN sublayer,
    the E - k experts the router did not pick (equal to the total for a dense model).

    Counted as most mixture-of-experts papers count it: the whole embedding table and head (a token reads one row
    of the table but the head multiplies all of it) and the router. Mixtral 8x7B (D 4096, 32 layers, 32 heads,
    8 key/value heads, F 14336, V 32000, 8 experts, top-2, untied): 46.7B total, 12.9B active (Mistral AI's
    announcement; Jiang et al., 2024 round them to 47B and 13B). ``embedding=False`` leaves out the lookups (the
    token table, unless it is also the head, and learned positions), as OpenAI counts gpt-oss: 116.8B total,
    5.1B active for gpt-oss-120b (the gpt-oss model card, 2025), where the table counted would make it 5.7B.
    """
    c = _check(config, "config")
    if not isinstance(embedding, bool):
        raise TypeError(f"embedding must be a bool, got {type(embedding).__name__}")
    counts = estimate_params(c, kind)
    if c.gemma4 is not None:  # Gemma 4's own count: the unpicked experts left out; its lookups, both tables
        return gemma4_params(c, active=True)["total"] - (0 if embedding else gemma4_lookups(c))
    n_ffn = c.n_layers if kind == "decoder_only" else c.n_encoder_layers + c.n_decoder_layers
    n_moe = n_ffn - (n_ffn - len(c.moe_layers) if c.moe_layers is not None else 0)
    lookups = 0 if embedding else counts["embeddings"] - (c.vocab_size * c.d_model if c.tie_embeddings else 0)
    return counts["total"] - lookups - n_moe * (ffn_params(c) - ffn_params(c, active=True))


def _dense_saving(c: ModelConfig, n_ffn: int) -> int:
    """What the dense layers outside ``moe_layers`` hold less than a MoE layer (0 without such a list)."""
    if c.moe_layers is None:
        return 0
    return (n_ffn - len(c.moe_layers)) * (ffn_params(c) - mlp_params(c))
