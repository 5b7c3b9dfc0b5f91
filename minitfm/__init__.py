"""minitfm: a small, readable Transformer library, built one concept per module alongside the book.

Conventions, stated once:
- boolean masks are ``True`` where a query may attend (as in ``torch.nn.functional.scaled_dot_product_attention``);
- causal masks and ALiBi biases are aligned bottom-right, so they stay correct with a KV cache;
- ``nn.Linear`` weights keep PyTorch's (out, in) layout;
- RoPE rotates adjacent pairs of dimensions (x0, x1), (x2, x3), ... as in the RoFormer paper.

Where each chapter's code lives. The library is split into packages by concern; a module is reachable as
``minitfm.<package>.<module>`` (loaded on first use), and each package's docstring lists its modules:

====================================  ==============================================================
Chapter                               Modules
====================================  ==============================================================
1 Attention                           ``layers.attention``, ``layers.attention_maps``
2 Masks                               ``layers.masks``, ``data`` (the training primer's batches)
3 Multi-head attention                ``layers.multihead``
4 Positional information              ``layers.positional``
5 Residuals, norms, feed-forward      ``layers.norms``, ``layers.feedforward``, ``layers.blocks``, ``params``
6 The whole Transformer               ``config``, ``layers.blocks``, ``models``, ``params``
7 Training on the copy task           ``training`` (``loop``, ``schedules``, ``losses``, ``checkpoint``), ``data``,
                                      ``generation.greedy``
7b Training recipes                   ``training.schedules``, ``training.loop``
7c Tokens and a language model        ``text`` (``pretokenize``, ``bpe_trainer``, ``bpe_tokenizer``, ``gpt2_files``,
                                      ``words``), ``lm`` (``corpus``, ``small_lm``)
8 The KV cache                        ``layers.kv_cache``, ``generation`` (``decode_loop``, ``lean_decode``,
                                      ``kv_memory``)
9 Sampling                            ``generation`` (``sampling``, ``decode_loop``, ``beams``, ``text_metrics``)
10 Debugging                          ``training`` (``debugging``, ``precision``, ``activation_memory``,
                                      ``experiment_log``)
11 Beyond the basic block             ``vision`` (``vit``, ``windows``, ``channel_attention``), ``layers.moe``
12 Beyond one machine                 ``layers.tiled_attention``, ``training`` (``distributed``, ``scale``,
                                      ``activation_memory``)
13 Your code runs GPT-2               ``pretrained`` (``conventions``, ``weights``, ``files``, ``hub``),
                                      ``text.bpe_tokenizer``
14 Measuring a language model         ``evaluation`` (bits per byte, multiple choice, pass@k, intervals,
                                      paired tests, sample sizes, contamination)
15 From a base model to an assistant  ``finetuning`` (``chat``, ``packing``, ``sft``, ``tasks``, ``answering``,
                                      ``lora``, ``adapters``, ``new_tokens``, ``classification``),
                                      ``lm.base_lm``, ``viz.finetuning_diagrams``
16 Preferences and rewards           ``preferences`` (``dpo``, ``grpo``, ``rewards``)
every chapter (book plumbing)         ``claims``, ``device``, ``exercises``, ``viz`` (plots, explorers,
                                      diagrams)
====================================  ==============================================================

The packages stand in layers that ``lint-imports`` checks (the contracts are in ``pyproject.toml``):
``layers`` below ``models``, ``models`` below ``generation``, ``generation`` below ``training``, ``finetuning``
above it, ``preferences`` above that, and ``lm`` on top; no model code imports ``viz``, ``claims`` or
``exercises`` (nor matplotlib or ipywidgets), and the library never imports ``trl`` (its tests do). Modules
that moved in version 0.2 fail with their new path: ``import minitfm.bpe`` raises
``ImportError: minitfm.bpe moved to minitfm.text.bpe_trainer``.

The top-level names (``__all__``):

- **Layers** (chapters 1-5): ``scaled_dot_product_attention``, the masks, ``MultiHeadAttention``, the
  positional encodings, ``RMSNorm``, ``FeedForward``, ``SwiGLU``.
- **Models and training** (chapters 6-7): ``ModelConfig``, the blocks and models, ``count_params``, the
  batching helpers, ``train`` and its schedules, ``greedy_decode`` and the copy-task metrics.
- **Generation** (chapters 8-9): the KV caches, the logits processors, ``generate``, ``beam_search``,
  ``kv_cache_bytes``, ``WordTokenizer``, ``load_small_lm``.
- **Tokens and published models** (chapters 7c and 13): ``train_bpe``, ``BPETokenizer``
  (:class:`minitfm.text.bpe_tokenizer.Tokenizer`), ``from_pretrained``.
- **Beyond one machine** (chapter 12): ``tiled_attention``, ``online_softmax``, ``TileStats``.
- **Book plumbing**, which the notebooks call and a model never needs: ``judge`` and ``seed_table`` (a
  claim's verdict over seeds), ``set_threads``, ``pick_device``, ``cpu_summary`` and ``fastest_threads``.

Names that exist for one exercise or one optimisation stay in their modules: the deliberately wrong schedule
``minitfm.training.buggy_noam_lr`` and ``minitfm.generation.lean_decode.LeanDecoder`` (``generate`` uses it by itself).

``import minitfm`` loads torch and the model code only. Plots and explorers (matplotlib, ipywidgets), the BPE
code (regex) and the published-model loader (transformers, safetensors, huggingface_hub, inside
``minitfm.pretrained``) load on first use: ``minitfm.from_pretrained``, ``minitfm.BPETokenizer``,
``minitfm.train_bpe``, ``minitfm.load_small_lm`` and every ``minitfm.<package>`` import their module when
first touched.
"""
import importlib

from minitfm import _lazy, _moved

_moved.install()  # before anything else: `import minitfm.text.bpe_trainer` names the module's new path

# Layers (chapters 1-5)
from minitfm.layers.attention import scaled_dot_product_attention
from minitfm.layers.masks import causal_mask, combine_masks, padding_mask
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    sinusoidal_encoding,
)
from minitfm.layers.norms import RMSNorm, make_norm
from minitfm.layers.feedforward import FeedForward, SwiGLU, make_ffn, swiglu_hidden_size
# Models and training (chapters 6 and 7)
from minitfm.config import ModelConfig
from minitfm.layers.blocks import DecoderBlock, EncoderBlock, LayerCache
from minitfm.models import DecoderOnlyLM, EncoderDecoder, Intermediates
from minitfm.params import count_params, estimate_params
from minitfm.data import (
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
from minitfm.training import (
    History,
    TrainConfig,
    label_smoothed_cross_entropy,
    load_checkpoint,
    noam_lr,
    save_checkpoint,
    set_seed,
    train,
    warmup_cosine_lr,
)
from minitfm.generation.greedy import evaluate, exact_match, greedy_decode, token_accuracy
# Generation (chapters 8 and 9)
from minitfm.layers.kv_cache import ConcatKVCache, KVCache
from minitfm.generation.sampling import LogitsProcessor, RepetitionPenalty, Temperature, TopK, TopP, apply_processors
from minitfm.generation import BeamSearchOutput, GenerationOutput, beam_search, generate
from minitfm.generation.kv_memory import kv_cache_bytes
from minitfm.text.words import WordTokenizer
# Beyond one machine (chapter 12)
from minitfm.layers.tiled_attention import TileStats, online_softmax, tiled_attention
# Book plumbing: verdicts over seeds, threads and devices (every notebook calls set_threads)
from minitfm.claims import judge, seed_table
from minitfm.device import cpu_summary, fastest_threads, pick_device, set_threads

# Every package and module, loaded on first attribute access: ``minitfm.viz.plotting.plot_attention``.
_LAZY_SUBMODULES = _lazy.public_submodules(__path__)

# Top-level names whose module is loaded on first access (it needs regex, or loads a checkpoint, or is big):
# name -> (module, attribute).
_LAZY_NAMES = {
    "load_small_lm": ("lm.small_lm", "load_small_lm"),
    "train_bpe": ("text.bpe_trainer", "train_bpe"),
    "BPETokenizer": ("text.bpe_tokenizer", "Tokenizer"),
    "from_pretrained": ("pretrained.hub", "from_pretrained"),
}


def _version() -> str:
    """The installed distribution's version; a source tree without metadata reads its pyproject.toml."""
    from importlib import metadata

    try:
        return metadata.version("minitfm")
    except metadata.PackageNotFoundError:
        import pathlib
        import re

        pyproject = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
        text = pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        return m.group(1) if m else "0+unknown"


def __getattr__(name):
    if name in _LAZY_NAMES:
        module, attribute = _LAZY_NAMES[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attribute)
        globals()[name] = value
        return value
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _moved.MOVED:
        raise AttributeError(_moved.moved_message(name))
    if name == "__version__":
        globals()["__version__"] = version = _version()
        return version
    raise AttributeError(f"module 'minitfm' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_NAMES) | _LAZY_SUBMODULES | {"__version__"})


__all__ = [
    # layers (chapters 1-5)
    "scaled_dot_product_attention", "padding_mask", "causal_mask", "combine_masks", "MultiHeadAttention",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "RotaryEmbedding",
    "sinusoidal_encoding", "alibi_slopes", "alibi_bias",
    "RMSNorm", "make_norm", "FeedForward", "SwiGLU", "make_ffn", "swiglu_hidden_size",
    # models and training (chapters 6 and 7)
    "ModelConfig", "EncoderBlock", "DecoderBlock", "LayerCache", "EncoderDecoder", "DecoderOnlyLM", "Intermediates",
    "count_params", "estimate_params",
    "Batch", "CopyTask", "pad_sequences", "shift_right", "collate_pairs", "collate_lm", "bucket_batches",
    "random_batches", "padding_fraction",
    "TrainConfig", "History", "train", "noam_lr", "warmup_cosine_lr",
    "label_smoothed_cross_entropy", "set_seed", "save_checkpoint", "load_checkpoint",
    "greedy_decode", "evaluate", "exact_match", "token_accuracy",
    # generation (chapters 8 and 9)
    "KVCache", "ConcatKVCache", "LogitsProcessor", "Temperature", "TopK", "TopP", "RepetitionPenalty",
    "apply_processors", "generate", "beam_search", "GenerationOutput", "BeamSearchOutput",
    "kv_cache_bytes", "WordTokenizer", "load_small_lm",
    # tokens and published models (chapters 7c and 13), loaded on first use
    "train_bpe", "BPETokenizer", "from_pretrained",
    # beyond one machine (chapter 12)
    "tiled_attention", "online_softmax", "TileStats",
    # book plumbing
    "judge", "seed_table", "pick_device", "set_threads", "cpu_summary", "fastest_threads",
]
