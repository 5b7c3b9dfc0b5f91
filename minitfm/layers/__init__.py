"""The Transformer's building blocks (chapters 1-5, 8, 11 and 12), one concept per module.

==========================  ==============================================================================
``attention``               scaled dot-product attention, its fused path (chapter 1)
``attention_maps``          a model's attention weights in one shape, and their entropy (chapters 1, 3, 10)
``masks``                   padding, causal and sliding-window masks (chapters 2, 13)
``multihead``               multi-head, multi-query and grouped-query attention, QK-norm (chapters 3, 13)
``latent_attention``        multi-head latent attention (DeepSeek-V2/V3): a cache of compressed latents
``positional``              sinusoidal, learned, RoPE and ALiBi positions (chapter 4)
``rope_scaling``            RoPE for longer contexts: Llama 3's and YaRN's frequency rescaling (chapters 4, 13)
``norms``                   LayerNorm, RMSNorm, Gemma's (1 + w) RMSNorm (chapters 5, 13)
``feedforward``             the FFN, SwiGLU and GeGLU (chapters 5, 13)
``blocks``                  encoder and decoder blocks: attention, FFN, residuals and norms (chapters 5-6)
``kv_cache``                the key/value cache of decoding, and a bounded one for sliding windows (chapter 8)
``moe``                     a mixture-of-experts feed-forward layer (chapter 11)
``routed_moe``              sigmoid and group-limited routing, correction bias, shared experts (DeepSeek, gpt-oss, ...)
``tiled_attention``         attention one tile at a time with an online softmax (chapter 12)
``delta_net``               Gated DeltaNet: linear attention with a fixed-size state (Qwen3-Next, Qwen 3.5)
``_attention_variants``     (private) sink attention (gpt-oss); chunked masks, temperature, QK-norm (Llama 4)
==========================  ==============================================================================

Layers import nothing above them: not the models, not generation or training, never plots.
"""
from minitfm import _lazy


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
