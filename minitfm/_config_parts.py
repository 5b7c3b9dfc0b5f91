"""Two groups of :class:`~minitfm.config.ModelConfig` options that travel together (private to ``minitfm``; the
names are re-exported by :mod:`minitfm.config`): the sizes of multi-head latent attention, and how a routed mixture
of experts (DeepSeek-V2/V3 and their successors) picks and weighs its experts. Each is ``None`` in a config that
does not use it, and reads back from the dict ``dataclasses.asdict`` makes of it (a config saved as JSON).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from minitfm._checks import check_choice, check_number, check_positive_int, coerce_dataclass

LAYER_KINDS = ("full", "sliding", "chunked", "latent", "linear")  # ModelConfig.layer_kind's answers


@dataclass(frozen=True)
class LatentDims:
    """Multi-head latent attention's sizes (:class:`~minitfm.layers.latent_attention.LatentAttention`): the cached
    kv latent's width R, a query/key head's part without RoPE (Dn) and with it (Dr), a value head's width (Dv) and
    the query latent's width (``None``: one query projection, as DeepSeek-V2-Lite); ``norm_eps`` is the latents'
    RMSNorm epsilon (1e-6 in DeepSeek's code and transformers', whatever the config's ``rms_norm_eps``)."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: Optional[int] = None
    norm_eps: float = 1e-6

    def __post_init__(self):
        for f in dataclasses.fields(self)[:5]:
            if getattr(self, f.name) is not None or f.name != "q_lora_rank":
                check_positive_int(getattr(self, f.name), f"mla.{f.name}")
        check_number(self.norm_eps, "mla.norm_eps", low=0.0, low_open=True)
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"mla.qk_rope_head_dim must be even (RoPE turns pairs), got {self.qk_rope_head_dim}")

    @classmethod
    def coerce(cls, value) -> "LatentDims | None":
        return coerce_dataclass(cls, value, "mla")


@dataclass(frozen=True)
class RoutedExperts:
    """How a routed mixture of experts (:class:`~minitfm.layers.routed_moe.RoutedMoE`) scores, picks and weighs
    ``n_experts`` experts of width ``d_expert`` (``moe_intermediate_size``); ``n_shared_experts`` run for every
    token. ``ModelConfig.renormalize_experts`` is its ``norm_topk_prob``."""

    d_expert: int
    score_func: str = "softmax"  # "softmax" | "sigmoid" (DeepSeek-V3)
    topk_method: str = "greedy"  # "greedy" | "group_limited_greedy" (DeepSeek-V2) | "noaux_tc" (DeepSeek-V3)
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    n_shared_experts: int = 0
    router_bias: bool = False  # gpt-oss: a bias on the router and on every expert's projections
    expert_bias: bool = False
    activation: str = "silu"  # "silu" | "clamped_swiglu" (gpt-oss, with swiglu_alpha and swiglu_limit)
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    gate_up_layout: str = "halves"  # "halves" | "interleaved" (gpt-oss: gate and up rows alternate)
    weights_on: str = "output"  # "output" | "input" (Llama 4: the router's weight scales the expert's input)
    d_shared: Optional[int] = None  # Qwen3-Next: one shared expert of this width, its output gated per token

    def __post_init__(self):
        from minitfm.layers.routed_moe import ACTIVATIONS, GATE_UP_LAYOUTS, SCORE_FUNCS, TOPK_METHODS, WEIGHTS_ON

        check_choice(self.weights_on, "routed.weights_on", WEIGHTS_ON)
        if self.d_shared is not None:
            check_positive_int(self.d_shared, "routed.d_shared")
            if self.n_shared_experts:
                raise ValueError("give routed.n_shared_experts (ungated, of width d_expert) or d_shared (one gated "
                                 "shared expert), not both")
        check_choice(self.activation, "routed.activation", ACTIVATIONS)
        check_choice(self.gate_up_layout, "routed.gate_up_layout", GATE_UP_LAYOUTS)
        for name in ("router_bias", "expert_bias"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"routed.{name} must be a bool, got {type(getattr(self, name)).__name__}")
        for name in ("swiglu_alpha", "swiglu_limit"):
            check_number(getattr(self, name), f"routed.{name}", low=0.0, low_open=True)

        for name in ("d_expert", "n_group", "topk_group"):
            check_positive_int(getattr(self, name), f"routed.{name}")
        check_choice(self.score_func, "routed.score_func", SCORE_FUNCS)
        check_choice(self.topk_method, "routed.topk_method", TOPK_METHODS)
        check_number(self.routed_scaling_factor, "routed.routed_scaling_factor", low=0.0, low_open=True)
        check_number(self.n_shared_experts, "routed.n_shared_experts", low=0, integer=True)

    @classmethod
    def coerce(cls, value) -> "RoutedExperts | None":
        return coerce_dataclass(cls, value, "routed")


@dataclass(frozen=True)
class DeltaDims:
    """Gated DeltaNet's sizes (:class:`~minitfm.layers.delta_net.GatedDeltaNet`): H value heads, H_k query/key
    heads, their widths Dk and Dv, the convolution's K taps, and the projections' layout ("qwen3_5" or
    "qwen3_next")."""

    n_heads: int
    n_key_heads: int
    d_key_head: int
    d_value_head: int
    conv_kernel: int = 4
    layout: str = "qwen3_5"

    def __post_init__(self):
        for f in dataclasses.fields(self)[:5]:
            check_positive_int(getattr(self, f.name), f"delta_net.{f.name}")
        check_choice(self.layout, "delta_net.layout", ("qwen3_next", "qwen3_5"))
        if self.n_heads % self.n_key_heads:
            raise ValueError(f"delta_net.n_heads must divide by n_key_heads, got {self.n_heads}, {self.n_key_heads}")

    @classmethod
    def coerce(cls, value) -> "DeltaDims | None":
        return coerce_dataclass(cls, value, "delta_net")


@dataclass(frozen=True)
class Gemma4Dims:
    """What Gemma 4 adds to Gemma 3's layers (:mod:`minitfm._gemma4`): the full-attention layers' own head width and
    K/V heads (values = the keys before their norm with ``k_eq_v``), the pairs their proportional RoPE turns
    (``None``: all), the per-layer input embeddings' width P (0: none), the last ``kv_shared_layers`` layers reusing
    the keys and values of the last earlier layer of their kind, whose FFN is twice as wide with ``double_wide_mlp``,
    and ``experts`` GeGLU experts of width ``d_expert`` beside every FFN, ``top_k`` of them per token (0: none)."""

    global_head_dim: int
    global_kv_heads: Optional[int] = None  # None: n_kv_heads
    k_eq_v: bool = False
    global_rope_pairs: Optional[int] = None
    ple_dim: int = 0
    kv_shared_layers: int = 0
    double_wide_mlp: bool = False
    experts: int = 0
    top_k: int = 0
    d_expert: int = 0

    def __post_init__(self):
        check_positive_int(self.global_head_dim, "gemma4.global_head_dim")
        for name in ("global_kv_heads", "global_rope_pairs"):
            if getattr(self, name) is not None:
                check_number(getattr(self, name), f"gemma4.{name}", low=0, integer=True)
        for name in ("ple_dim", "kv_shared_layers", "experts", "top_k", "d_expert"):
            check_number(getattr(self, name), f"gemma4.{name}", low=0, integer=True)
        if self.experts and not (1 <= self.top_k <= self.experts and self.d_expert):
            raise ValueError(f"gemma4: {self.experts} experts need a top_k in [1, {self.experts}] and a d_expert >= 1, "
                             f"got top_k={self.top_k}, d_expert={self.d_expert}")
        for name in ("k_eq_v", "double_wide_mlp"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"gemma4.{name} must be a bool, got {type(getattr(self, name)).__name__}")
        if self.global_head_dim % 2 or 2 * (self.global_rope_pairs or 0) > self.global_head_dim:
            raise ValueError(f"gemma4: RoPE turns pairs of the global head: an even global_head_dim and at most half "
                             f"of it as global_rope_pairs, got {self.global_head_dim}, {self.global_rope_pairs}")

    @classmethod
    def coerce(cls, value) -> "Gemma4Dims | None":
        return coerce_dataclass(cls, value, "gemma4")


def check_options(c) -> None:
    """The checks of a ModelConfig's options of issue 48 (latent attention, routed experts, sinks, partial RoPE,
    Gated DeltaNet layers), which it calls from ``__post_init__``."""
    c.mla, c.routed = LatentDims.coerce(c.mla), RoutedExperts.coerce(c.routed)
    if c.mla is not None:
        lacking = {k: v for k, v in (("pos", c.pos), ("qk_norm", c.qk_norm), ("sliding_window",
                   c.sliding_window), ("attn_softcap", c.attn_softcap), ("attn_scale", c.attn_scale),
                   ("attn_temperature", c.attn_temperature), ("nope_layers", c.nope_layers),
                   ("rope_dims", c.rope_dims), ("attention_chunk", c.attention_chunk))
                   if v != {"pos": "rope", "qk_norm": "none", "nope_layers": ()}.get(k)}
        kv = c.n_kv_heads not in (None, c.n_heads)
        if kv or c.rope_scale != 1.0:
            lacking.update(n_kv_heads=c.n_kv_heads, rope_scale=c.rope_scale)
        if lacking:
            raise ValueError(f"mla (latent attention) rotates with its own RoPE and caches one latent for every "
                             f"head: it needs pos='rope', n_kv_heads = n_heads, rope_scale 1 and none of the "
                             f"other attention options, got {lacking}")
    if c.rope_dims is not None:
        check_positive_int(c.rope_dims, "rope_dims")
        if c.pos != "rope" or c.rope_dims % 2 or c.rope_dims > c.d_head:
            raise ValueError(f"rope_dims turns the first rope_dims of each head: it needs pos='rope' and an even "
                             f"number <= d_head={c.d_head}, got pos={c.pos!r}, rope_dims={c.rope_dims}")
    if not isinstance(c.attn_sinks, bool):
        raise TypeError(f"attn_sinks must be a bool, got {type(c.attn_sinks).__name__}")
    if c.attn_sinks and (c.attn_softcap is not None or c.pos == "alibi" or c.mla is not None):
        raise ValueError("attn_sinks joins a sink logit to softmax attention's scores: it takes no attn_softcap, "
                         "no ALiBi bias (pos='alibi') and no latent attention (mla)")
    if (c.routed is not None or c.moe_layers is not None) and c.n_experts is None:
        raise ValueError("routed and moe_layers describe the experts: they need n_experts")
    if c.moe_layers is not None and c.routed is None:
        raise ValueError("moe_layers leaves some layers dense (width d_ff): give the experts' own width with "
                         "routed=RoutedExperts(d_expert=...)")

    c.delta_net = DeltaDims.coerce(c.delta_net)
    if bool(c.linear_layers) != (c.delta_net is not None):
        raise ValueError(f"linear_layers={c.linear_layers} and delta_net={c.delta_net} go together: the Gated "
                         "DeltaNet layers and their sizes")
    if c.linear_layers and c.mla is not None:
        raise ValueError("linear_layers and mla: give the layers either Gated DeltaNet or latent attention")
    if not isinstance(c.attn_output_gate, bool):
        raise TypeError(f"attn_output_gate must be a bool, got {type(c.attn_output_gate).__name__}")
    c.gemma4 = Gemma4Dims.coerce(c.gemma4)
    g = c.gemma4
    if g is not None:
        lacking = {k: v for k, v in (("pos", c.pos), ("norm", c.norm), ("sublayer_norm", c.sublayer_norm),
                   ("qk_norm", c.qk_norm), ("mla", c.mla), ("n_experts", c.n_experts), ("linear_layers", c.linear_layers),
                   ("attn_sinks", c.attn_sinks), ("rope_dims", c.rope_dims), ("attention_chunk", c.attention_chunk),
                   ("attn_softcap", c.attn_softcap), ("attn_temperature", c.attn_temperature), ("nope_layers",
                   c.nope_layers), ("rope_scaling", c.rope_scaling), ("attn_output_gate", c.attn_output_gate),
                   ("dropout", c.dropout)) if v != {"pos": "rope", "norm": "rms", "sublayer_norm": "both", "qk_norm":
                   "head", "linear_layers": (), "attn_sinks": False, "nope_layers": (), "attn_output_gate": False,
                   "dropout": 0.0}.get(k) and not (k.endswith("layers") and not v)}  # [] from JSON: none
        heads, first = g.global_kv_heads or c.n_kv_heads or c.n_heads, c.n_layers - g.kv_shared_layers
        kinds = [c.layer_window(i) is None for i in range(c.n_layers)]  # the sharing layers' kinds, computed before
        if c.n_heads % heads or first < 1 or set(kinds[first:]) - set(kinds[:first]):
            lacking.update(global_kv_heads=g.global_kv_heads, kv_shared_layers=g.kv_shared_layers)
        if lacking:
            raise ValueError(f"gemma4 (Gemma 4's layers) needs pos='rope', norm='rms', sublayer_norm='both', "
                             f"qk_norm='head', dropout 0, global_kv_heads dividing n_heads, kv_shared_layers < "
                             f"n_layers (each kind they share computed by an earlier layer) and none of the other "
                             f"attention or FFN options, got {lacking}")
