"""One typed configuration for every model in the library, validated once, with named presets.

Glossary: V vocab_size, D d_model, H n_heads, H_kv n_kv_heads, Dh d_head (D / H unless ``head_dim``), F d_ff,
L layers, T_max max_seq_len, W sliding_window, E n_experts.

One choice per axis, each a plain value: ``norm``, ``norm_first``, ``pos``, ``ffn``, ``bias`` (``norm_bias`` for
LayerNorm's own), ``dropout``,
``tie_embeddings``, ``attn_impl``. The axes on which today's open models differ from GPT-2 and Llama 2 are one
field each too: ``head_dim``, ``qkv_bias`` (Qwen 2), ``qk_norm`` (Qwen 3, Gemma 3, OLMo 2), ``sublayer_norm``
(OLMo 2's output norms, Gemma 2/3's sandwich), ``norm="rms_offset"`` and ``scale_embeddings`` (Gemma),
``ffn="geglu_tanh"`` (Gemma), ``attn_scale``, ``attn_softcap``/``final_softcap`` (Gemma 2), ``sliding_window``
with ``sliding_layers`` (Mistral, Gemma 2/3), ``nope_layers`` (SmolLM3), ``rope_local_base`` (Gemma 3),
``rope_scaling`` (Llama 3, YaRN) and the mixture of experts ``n_experts``/``experts_per_token``/
``renormalize_experts`` (Mixtral, Qwen3-MoE) with DeepSeek's ``routed`` experts in the ``moe_layers``, latent
attention ``mla`` (DeepSeek-V2/V3), gpt-oss's ``attn_sinks``, partial RoPE ``rope_dims`` (GLM-4.5), Llama 4's ``attention_chunk`` and ``chunked_layers``, Qwen 3.5's Gated DeltaNet ``linear_layers`` (sizes
``delta_net``) and ``attn_output_gate``, Gemma 4's ``gemma4``, and Ministral 3's query temperature ``attn_temperature`` (with
``attn_temperature_beta`` and ``attn_temperature_length``). Which layer does what is answered in one place,
:meth:`ModelConfig.layer_window`, :meth:`ModelConfig.layer_chunk`, :meth:`ModelConfig.layer_rope` and
:meth:`ModelConfig.layer_moe`. Three fields may be left ``None`` and mean
"the usual default":
``n_kv_heads`` (= H, ordinary multi-head attention), ``d_ff`` (4 D, or 8/3 D for SwiGLU) and the two
encoder-decoder depths (= ``n_layers``). :meth:`ModelConfig.resolved` fills them in; models store the
resolved copy, so ``model.config.d_ff`` is always a number. Leaving them ``None`` in your own config
means ``dataclasses.replace(cfg, d_model=...)`` keeps the defaults in step with the new width.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from minitfm._config_parts import DeltaDims, Gemma4Dims, LatentDims, RoutedExperts, check_options  # noqa: F401
from minitfm._checks import check_choice, check_number, check_positive_int, check_probability
from minitfm.layers.attention import IMPLEMENTATIONS
from minitfm.layers.feedforward import FFN_KINDS, GATED, swiglu_hidden_size
from minitfm.layers.multihead import QK_NORMS
from minitfm.layers.norms import NORMS
from minitfm.layers.rope_scaling import RopeScaling

POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none")
SUBLAYER_NORMS = ("input", "output", "both")
ATTN_TEMPERATURES = ("ministral3", "llama4")  # the query temperatures ModelConfig.attn_temperature names


@dataclass
class ModelConfig:
    """Hyperparameters of a Transformer (decoder-only or encoder-decoder)."""

    # Sizes
    vocab_size: int = 16  # V, shared by source and target (one embedding table, as in the paper)
    d_model: int = 32  # D, width of every token vector
    n_heads: int = 4  # H query heads; D must divide by H
    n_kv_heads: Optional[int] = None  # H_kv key/value heads (grouped-query attention); None = H
    d_ff: Optional[int] = None  # F, hidden size of the FFN; None = 4 D (8/3 D for SwiGLU)
    n_layers: int = 2  # blocks of a decoder-only model; default depth of both encoder-decoder stacks
    n_encoder_layers: Optional[int] = None  # encoder depth of EncoderDecoder; None = n_layers
    n_decoder_layers: Optional[int] = None  # decoder depth of EncoderDecoder; None = n_layers
    max_seq_len: int = 64  # T_max: longest sequence (prompt + cache) any model of this config accepts
    # Architecture choices, one per axis
    norm: str = "layer"  # "layer" (LayerNorm), "rms" (RMSNorm) or "rms_offset" (Gemma's, gain 1 + w)
    norm_first: bool = True  # True: Pre-LN (modern); False: Post-LN (the original paper)
    pos: str = "sinusoidal"  # "sinusoidal" | "learned" | "rope" | "alibi" | "none"
    ffn: str = "relu"  # "relu" | "gelu" | "gelu_tanh" | "swiglu" | "geglu" | "geglu_tanh"
    bias: bool = True  # biases in attention and FFN projections
    dropout: float = 0.0  # on embeddings, attention weights, FFN hidden units and residual branches
    tie_embeddings: bool = True  # lm_head shares the token embedding matrix
    scale_embeddings: bool = True  # token vectors times sqrt(D), as in the paper; GPT-2 and Llama do not scale
    attn_impl: str = "manual"  # "manual" (the book's three steps) or "fused" (PyTorch's kernel)
    rope_base: float = 10000.0  # RoPE's base; larger rotates more slowly
    rope_scale: float = 1.0  # RoPE position interpolation: positions are divided by this
    norm_eps: float = 1e-5  # epsilon of LayerNorm / RMSNorm
    # What today's open decoders changed (each None / off by default: the model above is unchanged)
    head_dim: Optional[int] = None  # Dh chosen on its own (Gemma, Qwen 3); None = D / H
    qkv_bias: Optional[bool] = None  # biases on q, k, v (Qwen 2: only there); None = as `bias`
    fused_qkv: bool = False  # q, k, v as one qkv_proj, one product (nanoGPT's layout; the same function); False: three
    qk_norm: str = "none"  # "none" | "head" (RMSNorm per head: Qwen 3, Gemma 3) | "all" (over all heads: OLMo 2)
    # | "weightless" (Llama 4: an RMSNorm without weights per head, after RoPE, on the RoPE layers only)
    norm_bias: bool = True  # LayerNorm's additive bias; False drops it (nanoGPT's bias=False, OLMo); RMSNorm has none
    sublayer_norm: str = "input"  # Pre-LN norms the sublayer's "input", "output" (OLMo 2) or "both" (Gemma 2/3)
    attn_scale: Optional[float] = None  # the scores' multiplier; None = 1 / sqrt(Dh) (Gemma 2/3: 1/sqrt(256))
    attn_softcap: Optional[float] = None  # scores -> c tanh(scores / c) (Gemma 2: 50); None = no cap
    final_softcap: Optional[float] = None  # logits -> c tanh(logits / c) (Gemma 2: 30); None = no cap
    sliding_window: Optional[int] = None  # W: a query sees itself and the W - 1 keys before it; None = all
    sliding_layers: Optional[tuple] = None  # layers with the window; None = every layer (Mistral)
    nope_layers: tuple = ()  # layers without positions: no RoPE (SmolLM3's every 4th)
    rope_local_base: Optional[float] = None  # RoPE base of the sliding layers (Gemma 3: 10000); None = rope_base
    rope_scaling: Optional[RopeScaling] = None  # Llama 3's or YaRN's frequency rescaling (instead of rope_scale)
    n_experts: Optional[int] = None  # E: a mixture-of-experts FFN in every layer (Mixtral); None = dense
    experts_per_token: int = 2  # k of the top-k routing
    renormalize_experts: bool = True  # the k chosen router probabilities divided by their sum (Mixtral)
    attn_temperature: Optional[str] = None  # queries times 1 + beta log(1 + floor(p / length)) ("ministral3"), or
    # on the NoPE layers only 1 + beta log(1 + floor((p + 1) / length)), p counting padding ("llama4"); None = 1
    attn_temperature_beta: float = 0.1  # beta of attn_temperature (Ministral 3's llama_4_scaling_beta)
    attn_temperature_length: int = 8192  # its step in positions (Ministral 3: the pretraining context of its YaRN)
    mla: Optional[LatentDims] = None  # multi-head latent attention in every layer (DeepSeek-V2/V3); None = MHA/GQA
    routed: Optional[RoutedExperts] = None  # DeepSeek-style routing of the n_experts; None = chapter 11's MoE
    moe_layers: Optional[tuple] = None  # the layers with experts (the others: a dense FFN of d_ff); None = every layer
    attn_sinks: bool = False  # a learned sink logit per head joins every softmax (gpt-oss)
    rope_dims: Optional[int] = None  # RoPE turns only the first rope_dims of each head (GLM-4.5: half); None = all Dh
    attention_chunk: Optional[int] = None  # C: a query sees the keys of its own chunk of C positions (Llama 4)
    chunked_layers: Optional[tuple] = None  # the layers with chunks; None = every layer
    linear_layers: tuple = ()  # the layers with Gated DeltaNet (linear attention, Qwen3-Next/3.5) instead of attention
    delta_net: Optional[DeltaDims] = None  # the sizes of those layers
    gemma4: Optional[Gemma4Dims] = None  # Gemma 4's global heads, per-layer inputs, shared K/V (models: _gemma4)
    attn_output_gate: bool = False  # attention's output times sigmoid(a gate projection of x) (Qwen3-Next/3.5)
    # Special token ids. pad_id=None: the model has no padding token (GPT-2, Llama); bos_id may equal eos_id
    # (GPT-2's one <|endoftext|> both starts and ends a text)
    pad_id: Optional[int] = 0
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "max_seq_len"):
            check_positive_int(getattr(self, name), name)
        for name in ("n_kv_heads", "d_ff", "n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        check_choice(self.norm, "norm", NORMS)
        check_choice(self.pos, "pos", POSITIONS)
        check_choice(self.ffn, "ffn", FFN_KINDS)
        check_choice(self.attn_impl, "attn_impl", IMPLEMENTATIONS)
        check_probability(self.dropout, "dropout")
        for name in ("norm_first", "bias", "norm_bias", "tie_embeddings", "scale_embeddings", "renormalize_experts"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")
        for name in ("rope_base", "rope_scale", "norm_eps"):
            check_number(getattr(self, name), name, low=0.0, low_open=True)
        self._check_heads()
        self._check_special_ids()
        self._check_modern()

    def __repr__(self) -> str:
        """Every field, but the options of today's decoders (from ``head_dim`` on) only when they are set: a
        GPT-2-style config prints as it always did."""
        fields = dataclasses.fields(self)
        first = [f.name for f in fields].index("head_dim")
        last = [f.name for f in fields].index("attn_output_gate")
        shown = [f for i, f in enumerate(fields) if not first <= i <= last or getattr(self, f.name) != f.default]
        return f"ModelConfig({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    def _check_modern(self) -> None:
        """The fields of today's open decoders (see the module docstring)."""
        check_choice(self.qk_norm, "qk_norm", QK_NORMS)
        check_choice(self.sublayer_norm, "sublayer_norm", SUBLAYER_NORMS)
        if not self.norm_bias and self.norm != "layer":
            raise ValueError(f"norm_bias=False drops LayerNorm's bias; norm={self.norm!r} has no bias to drop "
                             "(leave norm_bias at True, or use norm='layer')")
        if self.qkv_bias is not None and not isinstance(self.qkv_bias, bool):
            raise TypeError(f"qkv_bias must be a bool or None, got {type(self.qkv_bias).__name__}")
        if not isinstance(self.fused_qkv, bool):
            raise TypeError(f"fused_qkv must be a bool, got {type(self.fused_qkv).__name__}")
        if self.fused_qkv and (self.mla is not None or self.gemma4 is not None):
            raise ValueError("fused_qkv stacks MultiHeadAttention's q_proj, k_proj and v_proj into one qkv_proj; mla "
                             "(latent attention) and gemma4 build their own projections: leave fused_qkv=False")
        for name in ("attn_scale", "attn_softcap", "final_softcap", "rope_local_base"):
            if getattr(self, name) is not None:
                check_number(getattr(self, name), name, low=0.0, low_open=True)
        for name in ("sliding_window", "n_experts"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name)
        check_positive_int(self.experts_per_token, "experts_per_token")
        if self.n_experts is not None and self.experts_per_token > self.n_experts:
            raise ValueError(f"experts_per_token must be <= n_experts, got {self.experts_per_token} > {self.n_experts}")
        if self.sublayer_norm != "input" and not self.norm_first:
            raise ValueError(f"sublayer_norm={self.sublayer_norm!r} places norms inside a Pre-LN block; Post-LN "
                             "(norm_first=False) has its own placement: use sublayer_norm='input' with it")
        self._check_latent_and_routed()
        for name in ("sliding_layers", "nope_layers", "moe_layers", "chunked_layers", "linear_layers"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, list):
                value = tuple(value)  # a config read back from JSON holds lists
                setattr(self, name, value)
            if not isinstance(value, tuple) or any(isinstance(i, bool) or not isinstance(i, int)
                                                   or not 0 <= i < self.n_layers for i in value):
                raise ValueError(f"{name} must be a tuple of layer indices in [0, n_layers={self.n_layers}), "
                                 f"got {value!r}")
        if self.attn_temperature is not None:
            check_choice(self.attn_temperature, "attn_temperature", ATTN_TEMPERATURES)
        check_number(self.attn_temperature_beta, "attn_temperature_beta", low=0.0)
        check_positive_int(self.attn_temperature_length, "attn_temperature_length")
        if self.attention_chunk is not None:
            check_positive_int(self.attention_chunk, "attention_chunk")
        if self.chunked_layers is not None and self.attention_chunk is None:
            raise ValueError(f"chunked_layers={self.chunked_layers} needs an attention_chunk")
        both = [i for i in range(self.n_layers) if self.layer_window(i) and self.layer_chunk(i)]
        if both:
            raise ValueError(f"layers {both} would have a sliding window and chunks: give each layer one of them")
        if self.sliding_layers is not None and self.sliding_window is None:
            raise ValueError(f"sliding_layers={self.sliding_layers} needs a sliding_window")
        rope_options = self.nope_layers or self.rope_local_base is not None or self.rope_scaling is not None
        if rope_options and self.pos != "rope":
            raise ValueError(f"nope_layers, rope_local_base and rope_scaling change RoPE: they need pos='rope', got "
                             f"pos={self.pos!r}")
        self.rope_scaling = RopeScaling.coerce(self.rope_scaling)
        if self.rope_scaling is not None and self.rope_scale != 1.0:
            raise ValueError(f"give rope_scale (position interpolation) or rope_scaling "
                             f"({self.rope_scaling.kind}), not both: got rope_scale={self.rope_scale}")

    def layer_window(self, i: int) -> int | None:
        """W if layer ``i`` attends within a sliding window, else ``None`` (it sees the whole past)."""
        if self.sliding_window is None or (self.sliding_layers is not None and i not in self.sliding_layers):
            return None
        return self.sliding_window

    def layer_chunk(self, i: int) -> int | None:
        """C if layer ``i`` attends within its chunk of C positions (Llama 4), else ``None``."""
        if self.attention_chunk is None or (self.chunked_layers is not None and i not in self.chunked_layers):
            return None
        return self.attention_chunk

    def layer_kind(self, i: int) -> str:
        """What mixes layer ``i``'s tokens: ``"linear"`` (Gated DeltaNet), ``"latent"`` (mla), ``"chunked"``,
        ``"sliding"`` or ``"full"`` attention."""
        if i in self.linear_layers:
            return "linear"
        if self.mla is not None:
            return "latent"
        return "chunked" if self.layer_chunk(i) else "sliding" if self.layer_window(i) else "full"

    def layer_moe(self, i: int) -> bool:
        """True if layer ``i``'s FFN is a mixture of experts (``n_experts`` set, ``i`` in ``moe_layers`` or no list)."""
        return self.n_experts is not None and (self.moe_layers is None or i in self.moe_layers)

    def _check_latent_and_routed(self) -> None:
        check_options(self)  # latent attention, routed experts, sinks, partial RoPE, DeltaNet layers

    def layer_rope(self, i: int) -> str | None:
        """Which RoPE layer ``i`` rotates with: ``"global"``, ``"local"`` (the sliding layers of a config with
        ``rope_local_base``) or ``None`` (no RoPE: other positions, or a NoPE layer)."""
        if self.pos != "rope" or i in self.nope_layers:
            return None
        return "local" if self.rope_local_base is not None and self.layer_window(i) is not None else "global"
    def _check_heads(self) -> None:
        if self.head_dim is not None:
            check_positive_int(self.head_dim, "head_dim")
        elif self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={self.d_model}, n_heads={self.n_heads} "
                f"(d_model / n_heads = {self.d_model / self.n_heads:.2f})"
            )
        kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if self.n_heads % kv:
            raise ValueError(f"n_heads must be divisible by n_kv_heads, got n_heads={self.n_heads}, n_kv_heads={kv}")
        if self.pos == "rope" and self.d_head % 2:
            raise ValueError(f"pos='rope' rotates pairs, so d_head (head_dim, or d_model / n_heads) must be even, got "
                             f"{self.d_head}")
        if self.pos == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"pos='sinusoidal' needs an even d_model (sin/cos pairs), got {self.d_model}")

    def _check_special_ids(self) -> None:
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in ids.items():
            if name == "pad_id" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ValueError(f"{name} must be an int in [0, vocab_size={self.vocab_size}), got {value!r}")
        if self.pad_id is not None and self.pad_id in (self.bos_id, self.eos_id):
            # generation hides prompt tokens equal to pad_id: a pad that is also <bos> or <eos> would hide them
            raise ValueError(f"pad_id must differ from bos_id and eos_id (three different ids, or pad_id=None), got {ids}")

    @property
    def d_head(self) -> int:
        """Dh, the width of one head: ``head_dim``, or D / H."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    def resolved(self) -> "ModelConfig":
        """A copy with every ``None`` default filled in (idempotent)."""
        d_ff = self.d_ff
        if d_ff is None:
            d_ff = swiglu_hidden_size(self.d_model) if self.ffn in GATED else 4 * self.d_model
        return dataclasses.replace(
            self,
            n_kv_heads=self.n_heads if self.n_kv_heads is None else self.n_kv_heads,
            d_ff=d_ff,
            n_encoder_layers=self.n_layers if self.n_encoder_layers is None else self.n_encoder_layers,
            n_decoder_layers=self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers,
        )

    def to_dict(self) -> dict:
        """Plain Python values only, so a checkpoint loads with ``torch.load(weights_only=True)``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown ModelConfig fields {sorted(unknown)}")
        return cls(**values)

    # ---- presets -------------------------------------------------------------------------------
    @classmethod
    def tiny(cls, **overrides) -> "ModelConfig":
        """A very small model for tests: runs in milliseconds."""
        return cls(**{**dict(vocab_size=16, d_model=16, n_heads=2, d_ff=32, n_layers=2, max_seq_len=32), **overrides})

    @classmethod
    def copy_task(cls, **overrides) -> "ModelConfig":
        """The encoder-decoder of the copy task (chapter 7): ids 0 pad, 1 bos, 2 eos, 3..12 the symbols.

        Tuned for speed on a 2-core CPU: narrow (D = 64) and shallow (one encoder and one decoder block),
        Post-LN as in the paper (it reached 100% in fewer steps than Pre-LN here) (see
        :class:`minitfm.training.TrainConfig.copy_task` for the matching training settings).
        """
        base = dict(vocab_size=13, d_model=64, n_heads=4, d_ff=128, n_layers=1, max_seq_len=32,
                    norm="layer", norm_first=False, pos="sinusoidal", ffn="relu", dropout=0.0)
        return cls(**{**base, **overrides})

    @classmethod
    def small_lm(cls, vocab_size: int = 256, **overrides) -> "ModelConfig":
        """A small modern decoder-only language model (Pre-LN, RMSNorm, RoPE, SwiGLU, no biases)."""
        base = dict(vocab_size=vocab_size, d_model=128, n_heads=4, n_layers=4, max_seq_len=1024,
                    norm="rms", norm_first=True, pos="rope", ffn="swiglu", bias=False, dropout=0.0)
        return cls(**{**base, **overrides})
