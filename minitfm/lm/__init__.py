"""The book's own language and language model (chapters 7c-9, 14): a recipe built from the other packages.

==========================  ==============================================================================
``corpus``                  the grammar language: its vocabulary, sentences, parser and validity
``small_lm``                the small decoder trained on it, its checkpoint (``assets/``), perplexity, samples
==========================  ==============================================================================
"""
from minitfm import _lazy


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
