"""The position-wise feed-forward network: the same small MLP applied to every token on its own.

Glossary: B batch, T length, D d_model, F d_ff (hidden size).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import check_choice, check_module_input, check_positive_int, check_probability

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
GATED = ("swiglu", "geglu", "geglu_tanh")  # gate activation silu, exact GELU, tanh GELU (Gemma)
FFN_KINDS = ACTIVATIONS + GATED


def swiglu_hidden_size(d_model: int, multiple_of: int = 1) -> int:
    """Hidden size F that gives SwiGLU (three D x F matrices) the parameters of a 4x MLP (two D x 4D).

    3 * D * F = 2 * D * 4D  =>  F = 8/3 * D, rounded to the nearest integer (then up to ``multiple_of``).
    """
    check_positive_int(d_model, "d_model")
    check_positive_int(multiple_of, "multiple_of")
    hidden = round(8 * d_model / 3)
    return multiple_of * -(-hidden // multiple_of)


class FeedForward(nn.Module):
    """down_proj(activation(up_proj(x))), the paper's FFN with F = 4 D by default.

    Args:
        activation: ``"relu"`` (the paper), ``"gelu"`` (exact, BERT/GPT) or ``"gelu_tanh"`` (the tanh
            approximation GPT-2 used).
    """

    def __init__(self, d_model: int, d_ff: int | None = None, activation: str = "relu",
                 bias: bool = True, dropout: float = 0.0):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_choice(activation, "activation", ACTIVATIONS)
        check_probability(dropout, "dropout")
        d_ff = 4 * d_model if d_ff is None else d_ff
        check_positive_int(d_ff, "d_ff")
        self.activation, self.d_model = activation, d_model
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def act(self, h: torch.Tensor) -> torch.Tensor:
        if self.activation == "relu":
            return F.relu(h)
        return F.gelu(h, approximate="tanh" if self.activation == "gelu_tanh" else "none")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_module_input(x, "x", self, self.d_model)
        h = self.act(self.up_proj(x))  # (B, T, D) -> (B, T, F)
        return self.down_proj(self.dropout(h) if self.training and self.dropout.p > 0 else h)  # (B, T, F) -> (B, T, D)


class SwiGLU(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)) (Shazeer, 2020), as in Llama and PaLM.

    The gate needs a third matrix, so the default hidden size is 8/3 D instead of 4 D: the parameter
    count then matches the ReLU MLP. Bias is off by default, as in those models.
    """

    def __init__(self, d_model: int, d_ff: int | None = None, bias: bool = False, dropout: float = 0.0):
        super().__init__()
        check_positive_int(d_model, "d_model")
        check_probability(dropout, "dropout")
        d_ff = swiglu_hidden_size(d_model) if d_ff is None else d_ff
        check_positive_int(d_ff, "d_ff")
        self.d_model = d_model
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def gate(self, g: torch.Tensor) -> torch.Tensor:
        """The gate's activation: silu (Swish) for SwiGLU."""
        return F.silu(g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_module_input(x, "x", self, self.d_model)
        h = self.gate(self.gate_proj(x)) * self.up_proj(x)  # (B, T, D) -> (B, T, F)
        return self.down_proj(self.dropout(h) if self.training and self.dropout.p > 0 else h)  # (B, T, F) -> (B, T, D)


class GeGLU(SwiGLU):
    """down_proj(gelu(gate_proj(x)) * up_proj(x)) (Shazeer, 2020), as in Gemma: SwiGLU with a GELU gate.

    ``approximate="tanh"`` is the tanh GELU that Gemma's checkpoints use (``gelu_pytorch_tanh``)."""

    def __init__(self, d_model: int, d_ff: int | None = None, bias: bool = False, dropout: float = 0.0,
                 approximate: str = "none"):
        super().__init__(d_model, d_ff, bias=bias, dropout=dropout)
        check_choice(approximate, "approximate", ("none", "tanh"))
        self.approximate = approximate

    def gate(self, g: torch.Tensor) -> torch.Tensor:
        return F.gelu(g, approximate=self.approximate)


def make_ffn(kind: str, d_model: int, d_ff: int | None = None, bias: bool = True, dropout: float = 0.0) -> nn.Module:
    """One place that turns the config's ``ffn`` choice into a module.

    ``d_ff=None`` picks 4 D for the MLPs and 8/3 D for the gated ones (equal parameter counts without biases).
    """
    check_choice(kind, "ffn", FFN_KINDS)
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, bias=bias, dropout=dropout)
    if kind in ("geglu", "geglu_tanh"):
        return GeGLU(d_model, d_ff, bias=bias, dropout=dropout, approximate="tanh" if kind == "geglu_tanh" else "none")
    return FeedForward(d_model, d_ff, activation=kind, bias=bias, dropout=dropout)
