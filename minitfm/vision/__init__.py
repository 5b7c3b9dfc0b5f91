"""Attention for images (chapter 11): the Vision Transformer, windowed attention and channel attention.

==========================  ==============================================================================
``vit``                     patches, the patch embedding and the Vision Transformer
``windows``                 attention inside local windows, shifted between layers (Swin)
``channel_attention``       squeeze-and-excitation: attention over channels
==========================  ==============================================================================

``minitfm.vision`` re-exports ``vit``'s names (``minitfm.vision.VisionTransformer``).
"""
from minitfm import _lazy
from minitfm.vision.vit import (PatchEmbedding, VisionTransformer, ViTBlock, class_token_attention, patchify,
                                unpatchify)


def __getattr__(name):  # a submodule, loaded on first attribute access
    return _lazy.submodule(__name__, __path__, name)


def __dir__():
    return _lazy.names(globals(), __path__)
