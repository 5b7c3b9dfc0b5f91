"""Modules that moved when the library was split into packages (version 0.2): importing an old path fails
with a message that names the new one.

A silent alias would give every function two names, and a reader would meet both in tracebacks; a notebook
saved with an old path gets one clear line instead: ``ImportError: minitfm.bpe moved to
minitfm.text.bpe_trainer``. (The Colab set-up cell installs a pinned version, so an old notebook that still
runs the old version keeps working.)

The finder raises from ``find_spec``, so a probe such as ``importlib.util.find_spec("minitfm.bpe")`` raises the
same ImportError instead of returning None: an old path is reported wherever it is looked up.
"""
from __future__ import annotations

import importlib.abc
import sys

# old module (under minitfm) -> where it lives now
MOVED = {
    "activations": "training.activation_memory",
    "attention": "layers.attention",
    "blocks": "layers.blocks",
    "bpe": "text.bpe_trainer",
    "bpe_files": "text.gpt2_files",
    "bpe_tokenizer": "text.bpe_tokenizer",
    "cache": "layers.kv_cache",
    "channel_attention": "vision.channel_attention",
    "checkpoint_files": "pretrained.files",
    "corpus": "lm.corpus",
    "debugging": "training.debugging",
    "decoding": "generation.greedy",
    "diagrams": "viz.diagrams",
    "distributed": "training.distributed",
    "experiment_log": "training.experiment_log",
    "explorer_data": "viz.explorer_data",
    "explorers": "viz.explorers",
    "feedforward": "layers.feedforward",
    "lean_decode": "generation.lean_decode",
    "masks": "layers.masks",
    "memory": "generation.kv_memory",
    "moe": "layers.moe",
    "multihead": "layers.multihead",
    "norms": "layers.norms",
    "plotting": "viz.plotting",
    "positional": "layers.positional",
    "precision": "training.precision",
    "sampling": "generation.sampling",
    "scale": "training.scale",
    "small_lm": "lm.small_lm",
    "static_explorers": "viz.static_explorers",
    "text_metrics": "generation.text_metrics",
    "tiled_attention": "layers.tiled_attention",
    "tokenizer": "text.words",
    "windows": "vision.windows",
}


def moved_message(old: str) -> str:
    """The message for ``minitfm.<old>``: where it lives now."""
    return f"minitfm.{old} moved to minitfm.{MOVED[old]} (the library's layout of version 0.2; see minitfm's docstring)"


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Refuses ``import minitfm.<old>`` for every old path in :data:`MOVED`, naming the new one."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.partition(".")
        if package == "minitfm" and name in MOVED:
            raise ImportError(moved_message(name), name=fullname)
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
