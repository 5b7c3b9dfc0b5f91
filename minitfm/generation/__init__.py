"""Generating text (chapters 7-9): the decoding loop, its strategies, and what it costs.

==========================  ==============================================================================
``decode_loop``             ``generate``: one loop for greedy decoding and sampling, with a KV cache
``beams``                   beam search: ``beam_search`` keeps the most probable continuations
``greedy``                  chapter 7's ``greedy_decode`` and the copy task's metrics
``sampling``                logits processors: temperature, top-k, top-p, repetition penalty
``lean_decode``             one decoding step without the general code's overhead (chapter 8)
``lean_refusal``            which models the lean step runs, and why it refuses the others
``kv_memory``               how many bytes a KV cache takes, for the book's and published shapes
``text_metrics``            distinct-n and repetition of generated texts (chapter 9)
==========================  ==============================================================================

``minitfm.generation`` re-exports the names chapters use: ``generate``, ``beam_search`` and their outputs.
"""
from minitfm import _lazy
from minitfm.generation.beams import BeamSearchOutput, beam_search
from minitfm.generation.decode_loop import GenerationOutput, generate


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
