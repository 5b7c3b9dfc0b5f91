"""The book's own language and language models (chapters 7c-9, 14, 15, 15b): a recipe built from the other packages.

==========================  ==============================================================================
``corpus``                  the grammar language: its vocabulary, sentences, parser and validity
``small_lm``                the small decoder trained on it, its checkpoint (``assets/``), perplexity, samples
``prose``                   the book's prose for byte-level models: the byte tokenizer, the held-out paragraphs,
                            bits per byte on them
``base_lm``                 chapter 15's base model: bytes, pretrained on the prose, four skills and invented
                            people (``benchmarks/train_base_lm.py``), and what it recalls of each
``assistant_lm``            chapter 15's assistant: base_lm after supervised fine-tuning on its tasks
                            (``benchmarks/train_assistant_lm.py``), its chat template, held-out accuracy, floors
                            and pass@k
``preference_lms``          chapter 16's two models: the assistant after DPO and after GRPO on its sums
                            (``benchmarks/train_preference_lms.py``), their recipes, records and measures
``topics``                  chapter 15b's classification task: which part of the book a paragraph of its prose
                            comes from (four topics, balanced, a held-out set chosen by a hash)
==========================  ==============================================================================
"""
from minitfm import _lazy


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
