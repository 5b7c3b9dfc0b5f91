"""From text to token ids and back (chapters 7c and 13).

==========================  ==============================================================================
``words``                   a word-level tokenizer: the grammar language's vocabulary (chapters 7-9)
``pretokenize``             GPT-2's pre-tokenizer regex, special tokens, and one merge step
``bpe_trainer``             learning BPE merges from a text (chapter 7c)
``bpe_vocab``               a vocabulary and its merges, checked to fit together
``bpe_tokenizer``           encoding and decoding with learned merges: ``Tokenizer`` (``minitfm.BPETokenizer``)
``gpt2_files``              GPT-2's byte-to-unicode table and its ``vocab.json``/``merges.txt`` files
``tokenizer_json``          a Hugging Face ``tokenizer.json`` (Llama 2/3, Qwen, Mistral, Gemma) read into these
``tokenizer_steps``         ``tokenizer.json``'s normalizers, pre-tokenizers and decoders as functions
``sentencepiece_bpe``       BPE over characters with byte fallback and the ``▁`` space: ``SentencePieceBPE``
``sentencepiece_model``     a SentencePiece ``.model`` file (Llama 2's ``tokenizer.model``) read into it
==========================  ==============================================================================

The package is ``text``, not ``tokenizers``, so that an import line never reads like Hugging Face's library.
"""
from minitfm import _lazy


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
