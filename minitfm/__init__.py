"""minitfm: a small, readable Transformer library, built one concept per module alongside the book.

Conventions, stated once:
- boolean masks are ``True`` where a query may attend (as in ``torch.nn.functional.scaled_dot_product_attention``);
- causal masks and ALiBi biases are aligned bottom-right, so they stay correct with a KV cache;
- ``nn.Linear`` weights keep PyTorch's (out, in) layout;
- RoPE rotates adjacent pairs of dimensions (x0, x1), (x2, x3), ... as in the RoFormer paper.

Plots and explorers need matplotlib and ipywidgets and are not imported here (the model code never needs
them): use ``minitfm.plotting``, ``minitfm.explorers`` and ``minitfm.static_explorers``, which load on first use.
"""
import importlib

# Inside one layer (chapters 1-5)
from .attention import scaled_dot_product_attention
from .masks import causal_mask, combine_masks, padding_mask
from .multihead import MultiHeadAttention
from .positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    sinusoidal_encoding,
)
from .norms import RMSNorm, make_norm
from .feedforward import FeedForward, SwiGLU, make_ffn, swiglu_hidden_size
# Whole models and their training (chapters 5, 7 and 10)
from .config import ModelConfig
from .blocks import DecoderBlock, EncoderBlock, LayerCache
from .models import DecoderOnlyLM, EncoderDecoder, Intermediates
from .params import count_params, estimate_params
from .data import (
    Batch,
    CopyTask,
    bucket_batches,
    collate_lm,
    collate_pairs,
    pad_sequences,
    padding_fraction,
    random_batches,
    shift_right,
)
from .training import (
    History,
    TrainConfig,
    buggy_noam_lr,
    label_smoothed_cross_entropy,
    load_checkpoint,
    noam_lr,
    save_checkpoint,
    set_seed,
    train,
    warmup_cosine_lr,
)
from .decoding import evaluate, exact_match, greedy_decode, token_accuracy
# Generation (chapters 8 and 9)
from .cache import ConcatKVCache, KVCache
from .sampling import LogitsProcessor, RepetitionPenalty, Temperature, TopK, TopP, apply_processors
from .generation import BeamSearchOutput, GenerationOutput, beam_search, generate
from .lean_decode import LeanDecoder
from .memory import kv_cache_bytes
from .tokenizer import WordTokenizer
from .small_lm import load_small_lm
from .device import cpu_summary, fastest_threads, pick_device, set_threads
# Beyond one machine (chapter 12)
from .tiled_attention import TileStats, online_softmax, tiled_attention
from .claims import judge, seed_table

__version__ = "0.1.0"

# Submodules loaded on first attribute access, e.g. ``minitfm.plotting.plot_attention``.
_LAZY_SUBMODULES = {
    "plotting", "explorers", "static_explorers", "explorer_data", "debugging", "activations", "precision",
    "experiment_log", "memory", "corpus", "tokenizer", "small_lm", "text_metrics", "vision", "windows",
    "channel_attention", "moe", "exercises", "scale", "distributed", "diagrams", "bpe", "bpe_tokenizer", "bpe_files", "pretrained",
}


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'minitfm' has no attribute {name!r}")


__all__ = [
    "scaled_dot_product_attention", "padding_mask", "causal_mask", "combine_masks", "MultiHeadAttention",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RotaryEmbedding",
    "sinusoidal_encoding", "alibi_slopes", "alibi_bias",
    "RMSNorm", "make_norm", "FeedForward", "SwiGLU", "make_ffn", "swiglu_hidden_size",
    "ModelConfig", "EncoderBlock", "DecoderBlock", "LayerCache", "EncoderDecoder", "DecoderOnlyLM", "Intermediates",
    "count_params", "estimate_params",
    "Batch", "CopyTask", "pad_sequences", "shift_right", "collate_pairs", "collate_lm", "bucket_batches",
    "random_batches", "padding_fraction",
    "TrainConfig", "History", "train", "noam_lr", "buggy_noam_lr", "warmup_cosine_lr",
    "label_smoothed_cross_entropy", "set_seed", "save_checkpoint", "load_checkpoint",
    "greedy_decode", "evaluate", "exact_match", "token_accuracy",
    "KVCache", "ConcatKVCache", "LogitsProcessor", "Temperature", "TopK", "TopP", "RepetitionPenalty",
    "apply_processors", "generate", "beam_search", "GenerationOutput", "BeamSearchOutput", "LeanDecoder",
    "kv_cache_bytes", "WordTokenizer", "load_small_lm", "pick_device", "set_threads", "cpu_summary", "fastest_threads", "judge", "seed_table",
    "tiled_attention", "online_softmax", "TileStats",
]
