"""Published checkpoints (chapter 13): GPT-2 and Llama load into :class:`~minitfm.models.DecoderOnlyLM`, and back.

==========================  ==============================================================================
``conventions``             what differs between a published model and the book's; ``config.json`` both ways
``weights``                 the key map: one rule per published tensor; ``to_minitfm`` and ``to_hf`` apply them
``files``                   reading a checkpoint folder's files, and every way one can be damaged
``hub``                     ``load``, ``from_pretrained``, ``from_transformers``, ``save_pretrained``, tokenizers
==========================  ==============================================================================

``minitfm.pretrained`` re-exports every public name of the four (``from minitfm import pretrained as P;
P.load(folder)``). ``transformers`` is never needed; ``safetensors`` and ``huggingface_hub`` load on first use.
"""
from minitfm import _lazy
from minitfm.pretrained.conventions import (CONVENTIONS, FAMILIES, LLAMA_TYPES, config_from_hf, config_to_hf,
                                            conventions_table, family_of, model_family)
from minitfm.pretrained.files import read_config, read_state_dict
from minitfm.pretrained.hub import download, from_pretrained, from_transformers, load, load_tokenizer, save_pretrained
from minitfm.pretrained.weights import (Rule, from_rotate_half, fuse_qkv, key_map, rotate_half_permutation,
                                        split_fused_qkv, to_hf, to_minitfm, to_rotate_half)


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
