"""Published checkpoints (chapter 13): GPT-2, Llama 2 and 3, Mistral, Qwen 2 and 3, Gemma 1-3, Phi-3, OLMo 2,
SmolLM3, OLMo 3, Ministral 3, Mixtral, Qwen3-MoE, DeepSeek-V2 and V3, GLM-4.5, gpt-oss, MiniMax-M2, Llama 4, Qwen3-Next, Qwen 3.5 and Gemma 4 load into
:class:`~minitfm.models.DecoderOnlyLM`, and back.

==========================  ==============================================================================
``conventions``             what differs between a published model and the book's; ``config.json`` both ways
``families``                the Llama-like families' ``config.json``: what each ``model_type`` fixes
``family_json``             a config written back as a family's ``config.json``
``deepseek``                DeepSeek-V2/V3, GLM-4.5: latent attention, routed experts, ``config.json``, key map
``gpt_oss``                 gpt-oss: sink logits and biased, clamped experts, ``config.json`` and key map
``minimax``                 MiniMax-M2: QK-norm over all heads, partial RoPE, experts in every layer
``llama4``                  Llama 4: chunked and NoPE layers, weightless QK-norm, experts on the input
``qwen3_5``                 Qwen 3.5, Qwen3-Next: Gated DeltaNet layers, gated attention (and experts)
``gemma4``                  Gemma 4: global heads of their own, per-layer inputs, keys and values shared
``transforms``              one tensor's way in and back: split/fuse q|k|v, rotate-half pairs, stacked rows
``weights``                 the key map: one rule per published tensor; ``to_minitfm`` and ``to_hf`` apply them
``files``                   reading a checkpoint folder's files, and every way one can be damaged
``hub``                     ``load``, ``from_pretrained``, ``from_transformers``, ``save_pretrained``, tokenizers
``published``               nine published models' ``config.json`` and the parameter counts their authors state
==========================  ==============================================================================

``minitfm.pretrained`` re-exports the public names of these modules (``from minitfm import pretrained as P;
P.load(folder)``). ``transformers`` is never needed; ``safetensors`` and ``huggingface_hub`` load on first use.
"""
from minitfm import _lazy
from minitfm.pretrained.conventions import (CONVENTIONS, FAMILIES, LATER_CONVENTIONS, LLAMA_TYPES, check_family,
                                            config_from_hf, config_to_hf, conventions_table, family_of, model_family)
from minitfm.pretrained.families import DECODER_FAMILIES, Family
from minitfm.pretrained.files import read_config, read_state_dict
from minitfm.pretrained.hub import download, from_pretrained, from_transformers, load, load_tokenizer, save_pretrained
from minitfm.pretrained.transforms import (Rule, from_rotate_half, fuse_qkv, rotate_half_permutation, split_fused_qkv,
                                           split_rows, to_rotate_half)
from minitfm.pretrained.weights import key_map, to_hf, to_minitfm, unfuse_experts


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
