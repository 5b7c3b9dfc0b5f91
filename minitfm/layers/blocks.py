"""Transformer blocks: attention and FFN sublayers wrapped in residual connections and norms.

Glossary: B batch, T length (T_q new queries, T_k keys including cached ones), S source length,
D d_model, H heads.

Each sublayer is used in one of two placements (``config.norm_first``):

    Pre-LN  (modern):   x = x + dropout(sublayer(norm(x)))
    Post-LN (original): x = norm(x + dropout(sublayer(x)))

Pre-LN keeps an un-normalised residual path from input to output (gradients flow through the sum
unchanged), so a Pre-LN model needs one final norm after its last block; Post-LN's output is
already normalised. Today's models move the Pre-LN norm (``config.sublayer_norm``), the residual path
staying un-normalised in all three:

    "input"  (GPT-2, Llama):   x = x + sublayer(norm(x))
    "output" (OLMo 2):         x = x + out_norm(sublayer(x))
    "both"   (Gemma 2/3):      x = x + out_norm(sublayer(norm(x)))     (the "sandwich")

A block's FFN is a mixture of experts when ``config.layer_moe(layer)`` says so (chapter 11's, or a
:class:`~minitfm.layers.routed_moe.RoutedMoE` with ``config.routed``; its routing is not returned here), and its
self-attention is latent attention (:class:`~minitfm.layers.latent_attention.LatentAttention`, DeepSeek-V2/V3)
with ``config.mla``: that layer masks by itself, from the ``key_mask`` of real tokens, and caches latents.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

import torch
from torch import nn

from minitfm.layers.delta_net import DeltaNetCache, GatedDeltaNet
from minitfm.layers.feedforward import make_ffn
from minitfm.layers.kv_cache import KVCache
from minitfm.layers.latent_attention import LatentAttention, LatentKVCache
from minitfm.layers.moe import MoEFeedForward
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import make_norm
from minitfm.layers.positional import RotaryEmbedding
from minitfm.layers._shared_gate_moe import SharedGateMoE
from minitfm.layers.routed_moe import RoutedMoE

if TYPE_CHECKING:  # annotations only: the config imports the layers' option names
    from minitfm.config import ModelConfig


@dataclass
class LayerCache:
    """The caches of one decoder block: self-attention keys/values, and (encoder-decoder only) the
    cross-attention keys/values of the encoder output, filled on the first step and reused."""

    self_attn: KVCache
    cross_attn: Optional[KVCache] = None

    @property
    def length(self) -> int:
        """Tokens already cached by self-attention."""
        return self.self_attn.length

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search)."""
        for cache in (self.self_attn, self.cross_attn):
            if isinstance(cache, LatentKVCache):  # its two buffers, row by row
                cache.latent, cache.k_rope = cache.latent.index_select(0, index), cache.k_rope.index_select(0, index)
            elif isinstance(cache, DeltaNetCache):  # its convolution window and state
                cache.conv, cache.state = cache.conv.index_select(0, index), cache.state.index_select(0, index)
            elif cache is not None:
                cache.reorder(index)

    def reset(self) -> None:
        for cache in (self.self_attn, self.cross_attn):
            if isinstance(cache, (LatentKVCache, DeltaNetCache)):
                cache.length = 0
                for name in ("conv", "state"):
                    if hasattr(cache, name):
                        getattr(cache, name).zero_()
            elif cache is not None:
                cache.reset()


def _attention(config: ModelConfig, layer: int = 0) -> MultiHeadAttention | LatentAttention | GatedDeltaNet:
    if layer in config.linear_layers:  # Gated DeltaNet: a state of fixed size instead of a growing cache
        n = config.delta_net
        return GatedDeltaNet(config.d_model, n.n_heads, n.n_key_heads, n.d_key_head, n.d_value_head, n.conv_kernel,
                             norm_eps=config.norm_eps, layout=n.layout)
    if config.mla is not None:
        m = config.mla
        return LatentAttention(config.d_model, config.n_heads, kv_lora_rank=m.kv_lora_rank,
                               qk_nope_head_dim=m.qk_nope_head_dim, qk_rope_head_dim=m.qk_rope_head_dim,
                               v_head_dim=m.v_head_dim, q_lora_rank=m.q_lora_rank, bias=config.bias,
                               norm_eps=m.norm_eps, rope_base=config.rope_base, rope_scaling=config.rope_scaling,
                               impl=config.attn_impl)
    qk_kind = "rms_offset" if config.norm == "rms_offset" else "rms"  # Gemma 3's QK-norm has Gemma's gain too
    return MultiHeadAttention(config.d_model, config.n_heads, config.n_kv_heads, bias=config.bias,
                              dropout=config.dropout, impl=config.attn_impl, d_head=config.head_dim,
                              qkv_bias=config.qkv_bias, qk_norm=config.qk_norm, qk_norm_kind=qk_kind,
                              norm_eps=config.norm_eps, scale=config.attn_scale, softcap=config.attn_softcap,
                              temperature=None if config.attn_temperature is None else
                              (config.attn_temperature_beta, config.attn_temperature_length) +
                              (("llama4",) if config.attn_temperature == "llama4" else ()), sinks=config.attn_sinks,
                              output_gate=config.attn_output_gate, fused_qkv=config.fused_qkv)


def _norm_pair(config: ModelConfig) -> tuple[nn.Module, nn.Module | None]:
    """(the norm before a sublayer, the norm after it or None), as ``config.sublayer_norm`` places them; an
    ``nn.Identity`` stands before the sublayer when only its output is normalised."""
    def norm():
        return make_norm(config.norm, config.d_model, eps=config.norm_eps, bias=config.norm_bias)

    before = nn.Identity() if config.sublayer_norm == "output" else norm()
    return before, (norm() if config.sublayer_norm != "input" else None)


class _Block(nn.Module):
    """What both blocks share: the residual wrapper and the FFN sublayer."""

    def __init__(self, config: ModelConfig, layer: int = 0):
        super().__init__()
        config = config.resolved()
        if config.gemma4 is not None:
            raise ValueError("config.gemma4 describes Gemma 4's layers: build minitfm.pretrained.gemma4.Gemma4LM(config)")
        self.norm_first = config.norm_first
        r = config.routed
        if not config.layer_moe(layer):
            self.ffn = make_ffn(config.ffn, config.d_model, config.d_ff, bias=config.bias, dropout=config.dropout)
        elif r is not None:
            cls, extra = (RoutedMoE, {}) if r.d_shared is None else (SharedGateMoE, {"d_shared": r.d_shared})
            self.ffn = cls(config.d_model, config.n_experts, config.experts_per_token, r.d_expert, **extra,
                                 n_shared_experts=r.n_shared_experts, score_func=r.score_func, topk_method=r.topk_method,
                                 n_group=r.n_group, topk_group=r.topk_group, norm_topk_prob=config.renormalize_experts,
                                 routed_scaling_factor=r.routed_scaling_factor, router_bias=r.router_bias,
                                 expert_bias=r.expert_bias, activation=r.activation, swiglu_alpha=r.swiglu_alpha,
                                 swiglu_limit=r.swiglu_limit, gate_up_layout=r.gate_up_layout, weights_on=r.weights_on)
        else:
            self.ffn = MoEFeedForward(config.d_model, config.n_experts, config.experts_per_token, config.d_ff,
                                      ffn=config.ffn, bias=config.bias, renormalize=config.renormalize_experts)
        self.ffn_norm, self.ffn_out_norm = _norm_pair(config)
        self.dropout = nn.Dropout(config.dropout)

    def residual(self, x: torch.Tensor, norm: nn.Module, sublayer: Callable, out_norm: nn.Module | None = None):
        """Apply ``sublayer`` (returning ``(out, weights)``) with a residual in the chosen placement."""
        if self.norm_first:
            out, weights = sublayer(norm(x))
            if out_norm is not None:
                out = out_norm(out)
            return x + self.drop(out), weights
        out, weights = sublayer(x)
        return norm(x + self.drop(out)), weights

    def drop(self, out: torch.Tensor) -> torch.Tensor:
        """Residual dropout; in evaluation (or at p = 0) the module call is skipped, not just a no-op (as for the
        FFN's and the embeddings' dropout)."""
        return self.dropout(out) if self.training and self.dropout.p > 0 else out

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        def ffn(h):
            out = self.ffn(h)
            return (out[0] if isinstance(self.ffn, (MoEFeedForward, RoutedMoE)) else out), None  # MoE: (out, Routing)

        return self.residual(x, self.ffn_norm, ffn, self.ffn_out_norm)[0]


class EncoderBlock(_Block):
    """Self-attention (every token sees every non-padding token) then FFN.

    ``forward(x (B, S, D), *, mask, bias, rope, positions, need_weights) -> (x (B, S, D), weights)``,
    weights (B, H, S, S) when ``need_weights`` else ``None``.
    """

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.self_attn = _attention(config.resolved())
        self.attn_norm, self.attn_out_norm = _norm_pair(config)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                rope: RotaryEmbedding | None = None, positions: torch.Tensor | None = None,
                need_weights: bool = False):
        def attend(h):
            return self.self_attn(h, mask=mask, bias=bias, rope=rope, positions=positions, need_weights=need_weights)

        x, weights = self.residual(x, self.attn_norm, attend, self.attn_out_norm)
        return self.feed_forward(x), weights


class DecoderBlock(_Block):
    """Masked self-attention, then (optionally) cross-attention to the encoder output, then FFN.

    A decoder-only model uses ``DecoderBlock(config, cross_attention=False)``.

    ``forward(x (B, T_q, D), memory (B, S, D) | None, *, mask, bias, memory_mask, rope, positions,
    cache, need_weights, causal) -> (x (B, T_q, D), self_weights (B, H, T_q, T_k), cross_weights (B, H, T_q, S))``;
    weights are ``None`` unless ``need_weights``. ``mask``/``bias`` cover the T_k = cached + new keys;
    ``causal=True`` adds the causal mask to self-attention's (see :class:`MultiHeadAttention`);
    ``memory_mask`` (B, 1, 1, S) hides source padding; ``key_mask`` (B, T_k) bool (``True`` = real token) is
    all that latent attention reads of the masks.
    """

    def __init__(self, config: ModelConfig, cross_attention: bool = True, layer: int = 0):
        super().__init__(config, layer)
        config = config.resolved()
        self.self_attn = _attention(config, layer)
        self.attn_norm, self.attn_out_norm = _norm_pair(config)
        self.cross_attn = _attention(config) if cross_attention else None
        self.cross_norm = make_norm(config.norm, config.d_model, eps=config.norm_eps, bias=config.norm_bias) \
            if cross_attention else None

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, *, mask: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                rope: RotaryEmbedding | None = None, positions: torch.Tensor | None = None,
                cache: LayerCache | None = None, need_weights: bool = False, causal: bool = False,
                key_mask: torch.Tensor | None = None):
        if (memory is None) != (self.cross_attn is None):
            want = "an encoder output `memory`" if self.cross_attn is not None else "no memory (no cross-attention)"
            raise ValueError(f"this DecoderBlock expects {want}")

        def attend(h):
            if isinstance(self.self_attn, GatedDeltaNet):  # no weights; key_mask zeroes the padded inputs
                return self.self_attn(h, cache=None if cache is None else cache.self_attn, mask=key_mask), None
            if isinstance(self.self_attn, LatentAttention):  # its own RoPE and causal mask; key_mask: real tokens
                return self.self_attn(h, positions=positions, key_padding_mask=key_mask, need_weights=need_weights,
                                      cache=None if cache is None else cache.self_attn)
            return self.self_attn(h, mask=mask, bias=bias, rope=rope, positions=positions,
                                  cache=None if cache is None else cache.self_attn, need_weights=need_weights,
                                  causal=causal)

        def cross(h):
            return self.cross_attn(h, memory, mask=memory_mask,
                                   cache=None if cache is None else cache.cross_attn, need_weights=need_weights)

        x, self_weights = self.residual(x, self.attn_norm, attend, self.attn_out_norm)
        cross_weights = None
        if self.cross_attn is not None:
            x, cross_weights = self.residual(x, self.cross_norm, cross)
        return self.feed_forward(x), self_weights, cross_weights
