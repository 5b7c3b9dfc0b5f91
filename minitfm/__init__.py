"""minitfm: a small, readable Transformer library, built one concept per module alongside the book.

Conventions, stated once:
- boolean masks are ``True`` where a query may attend (as in ``torch.nn.functional.scaled_dot_product_attention``);
- causal masks and ALiBi biases are aligned bottom-right, so they stay correct with a KV cache;
- ``nn.Linear`` weights keep PyTorch's (out, in) layout;
- RoPE rotates adjacent pairs of dimensions (x0, x1), (x2, x3), ... as in the RoFormer paper.
"""
from .attention import scaled_dot_product_attention
from .cache import ConcatKVCache, KVCache
from .device import pick_device
from .feedforward import FeedForward, SwiGLU, make_ffn, swiglu_hidden_size
from .masks import causal_mask, combine_masks, padding_mask
from .multihead import MultiHeadAttention
from .norms import RMSNorm, make_norm
from .positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    sinusoidal_encoding,
)

__version__ = "0.1.0"

__all__ = [
    "scaled_dot_product_attention",
    "padding_mask", "causal_mask", "combine_masks",
    "MultiHeadAttention",
    "KVCache", "ConcatKVCache",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RotaryEmbedding",
    "sinusoidal_encoding", "alibi_slopes", "alibi_bias",
    "RMSNorm", "make_norm",
    "FeedForward", "SwiGLU", "make_ffn", "swiglu_hidden_size",
    "pick_device",
]
