"""One typed configuration for every model in the library, validated once, with named presets.

Glossary: V vocab_size, D d_model, H n_heads, H_kv n_kv_heads, Dh = D / H d_head, F d_ff,
L layers, T_max max_seq_len.

One choice per axis, each a plain value: ``norm``, ``norm_first``, ``pos``, ``ffn``, ``bias``, ``dropout``,
``tie_embeddings``, ``attn_impl``. Three fields may be left ``None`` and mean "the usual default":
``n_kv_heads`` (= H, ordinary multi-head attention), ``d_ff`` (4 D, or 8/3 D for SwiGLU) and the two
encoder-decoder depths (= ``n_layers``). :meth:`ModelConfig.resolved` fills them in; models store the
resolved copy, so ``model.config.d_ff`` is always a number. Leaving them ``None`` in your own config
means ``dataclasses.replace(cfg, d_model=...)`` keeps the defaults in step with the new width.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from minitfm._checks import check_choice, check_number, check_positive_int, check_probability
from minitfm.layers.attention import IMPLEMENTATIONS
from minitfm.layers.feedforward import FFN_KINDS, swiglu_hidden_size
from minitfm.layers.norms import NORMS

POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none")


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
    norm: str = "layer"  # "layer" (LayerNorm) or "rms" (RMSNorm)
    norm_first: bool = True  # True: Pre-LN (modern); False: Post-LN (the original paper)
    pos: str = "sinusoidal"  # "sinusoidal" | "learned" | "rope" | "alibi" | "none"
    ffn: str = "relu"  # "relu" | "gelu" | "gelu_tanh" | "swiglu"
    bias: bool = True  # biases in attention and FFN projections
    dropout: float = 0.0  # on embeddings, attention weights, FFN hidden units and residual branches
    tie_embeddings: bool = True  # lm_head shares the token embedding matrix
    scale_embeddings: bool = True  # token vectors times sqrt(D), as in the paper; GPT-2 and Llama do not scale
    attn_impl: str = "manual"  # "manual" (the book's three steps) or "fused" (PyTorch's kernel)
    rope_base: float = 10000.0  # RoPE's base; larger rotates more slowly
    rope_scale: float = 1.0  # RoPE position interpolation: positions are divided by this
    norm_eps: float = 1e-5  # epsilon of LayerNorm / RMSNorm
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
        for name in ("norm_first", "bias", "tie_embeddings", "scale_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}")
        for name in ("rope_base", "rope_scale", "norm_eps"):
            check_number(getattr(self, name), name, low=0.0, low_open=True)
        self._check_heads()
        self._check_special_ids()

    def _check_heads(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={self.d_model}, n_heads={self.n_heads} "
                f"(d_model / n_heads = {self.d_model / self.n_heads:.2f})"
            )
        kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if self.n_heads % kv:
            raise ValueError(f"n_heads must be divisible by n_kv_heads, got n_heads={self.n_heads}, n_kv_heads={kv}")
        if self.pos == "rope" and self.d_head % 2:
            raise ValueError(f"pos='rope' rotates pairs, so d_head = d_model / n_heads must be even, got {self.d_head}")
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
        """Dh = D / H, the width of one head."""
        return self.d_model // self.n_heads

    def resolved(self) -> "ModelConfig":
        """A copy with every ``None`` default filled in (idempotent)."""
        d_ff = self.d_ff
        if d_ff is None:
            d_ff = swiglu_hidden_size(self.d_model) if self.ffn == "swiglu" else 4 * self.d_model
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
