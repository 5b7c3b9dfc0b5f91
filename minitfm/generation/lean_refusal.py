"""When the lean decoding step steps aside (chapter 8): :func:`refusal` says why a model must use its modules.

The lean step (:mod:`minitfm.generation.lean_decode`) computes exactly what the modules compute, but only for
the module types it knows (:data:`LEAN_MODULE_TYPES`), in float32 or float64, in eval mode, without hooks,
replaced ``forward`` methods, tensor subclasses or mixed dtypes and devices. It knows today's options (QK-norm,
Gemma's norms and GeGLU, sandwich and output norms, sliding windows, NoPE layers, soft-caps, Llama 3 and YaRN
RoPE, Gemma 3's local RoPE), not a mixture of experts (its router picks each token's experts). Anything else is
refused, with a reason, and ``generate`` runs the model's own modules instead. :func:`check_step_inputs` refuses
what a caller hands a decoder it holds that is not one step of that model (``generate`` checks its own inputs once).
"""
from __future__ import annotations

import dataclasses

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from minitfm._checks import check_tensor
from minitfm.layers.blocks import DecoderBlock
from minitfm.layers.feedforward import FeedForward, GeGLU, SwiGLU
from minitfm.layers.multihead import MultiHeadAttention
from minitfm.layers.norms import OffsetRMSNorm, RMSNorm
from minitfm.layers.positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding
from minitfm.models import DecoderOnlyLM


# Every module type the lean step knows, exactly (a subclass may compute something else, so it is refused).
LEAN_MODULE_TYPES = frozenset({
    DecoderOnlyLM, nn.ModuleList, DecoderBlock, MultiHeadAttention, FeedForward, SwiGLU, GeGLU, nn.Linear,
    nn.Embedding, nn.LayerNorm, RMSNorm, OffsetRMSNorm, nn.Identity, nn.Dropout, RotaryEmbedding,
    LearnedPositionalEmbedding, SinusoidalPositionalEncoding,
})
_FLOAT_TYPES = (torch.float32, torch.float64)
# Every ModelConfig field whose values the lean step computes as the modules do (review 2026-12b L2): a field added
# to ModelConfig later is refused unless it keeps its default, until someone teaches the lean step and lists it here
# (tests/generation/test_lean_owned.py checks that this list names today's fields).
LEAN_CONFIG_FIELDS = frozenset({
    "vocab_size", "d_model", "n_heads", "n_kv_heads", "d_ff", "n_layers", "n_encoder_layers", "n_decoder_layers",
    "max_seq_len", "norm", "norm_first", "pos", "ffn", "bias", "dropout", "tie_embeddings", "scale_embeddings",
    "attn_impl", "rope_base", "rope_scale", "norm_eps", "norm_bias", "head_dim", "qkv_bias", "qk_norm", "sublayer_norm",
    "attn_scale", "attn_softcap", "final_softcap", "sliding_window", "sliding_layers", "nope_layers", "fused_qkv",
    "rope_local_base", "rope_scaling", "n_experts", "experts_per_token", "renormalize_experts", "pad_id", "bos_id",
    "eos_id", "attn_temperature", "attn_temperature_beta", "attn_temperature_length", "mla", "routed", "moe_layers",
    "attn_sinks", "rope_dims", "attention_chunk", "chunked_layers", "linear_layers", "delta_net", "attn_output_gate",
    "gemma4",
})  # n_experts: a mixture of experts is refused below by its module type, MoEFeedForward
# The fields of LEAN_CONFIG_FIELDS the lean step does not compute: refused, by name, unless at their default (issue 48)
LEAN_REFUSED_FIELDS = frozenset({"attn_temperature", "mla", "routed", "moe_layers", "attn_sinks", "rope_dims",
                                 "attention_chunk", "linear_layers", "attn_output_gate", "gemma4"})  # the modules only


def _hooks_of(obj, names) -> bool | None:
    """True if any of the hook dictionaries ``names`` of ``obj`` is non-empty, ``None`` if one is missing (a
    PyTorch release that stores hooks elsewhere: then nobody can tell, and the caller takes the module path)."""
    for name in names:
        hooks = getattr(obj, name, None)
        if hooks is None:
            return None
        if hooks:
            return True
    return False


def refusal(model) -> str | None:
    """Why ``model`` must run its decode steps through its modules, or ``None`` if the lean step computes
    exactly what they compute. Checked over every submodule and parameter; costs well under a millisecond."""
    if type(model) is not DecoderOnlyLM:
        return f"the lean step serves a DecoderOnlyLM, got {type(model).__name__}"
    if model.training:
        return "the model is in training mode (dropout)"
    global_hooks = _hooks_of(_torch_module, ("_global_forward_hooks", "_global_forward_pre_hooks"))
    if global_hooks is not False:
        return "global forward hooks are registered" if global_hooks else "this PyTorch hides its global hooks"
    for name, module in model.named_modules():
        if type(module) not in LEAN_MODULE_TYPES:  # also catches parametrizations: they change the class
            return f"module {name or 'model'} is a {type(module).__name__}, not a type the lean step knows"
        if "forward" in vars(module):  # model.forward = something: the modules no longer compute what we do
            return f"module {name or 'model'} has its forward replaced on the instance"
        hooks = _hooks_of(module, ("_forward_hooks", "_forward_pre_hooks"))
        if hooks is not False:
            return f"module {name or 'model'} has forward hooks" if hooks else "this PyTorch hides module hooks"
    c = model.config
    if dataclasses.is_dataclass(c):
        for f in dataclasses.fields(c):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if (f.name not in LEAN_CONFIG_FIELDS or f.name in LEAN_REFUSED_FIELDS) and getattr(c, f.name) != default:
                return f"the config's {f.name}={getattr(c, f.name)!r} is an option the lean step does not implement"
    if c.attn_softcap is not None and c.pos == "alibi":
        return "the attention soft-cap with ALiBi's bias is computed by the modules only"
    for i, block in enumerate(model.layers):
        attn = block.self_attn
        if getattr(attn, "qk_norm", None) == "weightless":
            return f"layer {i}'s attention has Llama 4's weightless QK-norm, which the modules compute only"
        if getattr(attn, "gate_proj", None) is not None:
            return f"layer {i}'s attention has an output gate, which the modules compute only"
        if getattr(attn, "sinks", None) is not None:
            return f"layer {i}'s attention has sink logits, which the modules compute only"
        if getattr(attn, "temperature", None) is not None:
            return f"layer {i}'s attention has a query temperature {attn.temperature}, which the modules compute only"
        if block.cross_attn is not None or (attn.d_model, attn.n_heads, attn.n_kv_heads, attn.d_head) != \
                (c.d_model, c.n_heads, c.n_kv_heads, c.d_head):
            return f"layer {i}'s attention does not have the config's heads, or has cross-attention"
    params = list(model.parameters())
    if any(type(p) is not nn.Parameter for p in params):
        return "a parameter is a tensor subclass"
    if {p.dtype for p in params} - set(_FLOAT_TYPES) or len({(p.dtype, p.device) for p in params}) != 1:
        return f"the parameters must all be float32 or all float64 on one device, got " \
               f"{sorted({f'{p.dtype} on {p.device}' for p in params})}"
    return None


def check_step_inputs(decoder, tokens, caches, key_mask) -> None:
    """TypeError/ValueError unless ``decoder(tokens, caches, key_mask)`` is one step a LeanDecoder computes: (B, 1)
    integer ids in the vocabulary, the model still alive, its caches (one per layer, equally long, not empty, not
    full, batch B) and a bool (B, P + 1) ``key_mask``. ``generate`` checked its inputs once and skips this."""
    if not torch.is_tensor(tokens) or tokens.dim() != 2 or tokens.is_floating_point() or tokens.is_complex() \
            or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be a (B, 1) tensor of integer token ids, got "
                        f"{tokens.dtype if torch.is_tensor(tokens) else type(tokens).__name__}"
                        f"{' ' + str(tuple(tokens.shape)) if torch.is_tensor(tokens) else ''}")
    if tokens.shape[1] != 1 or tokens.shape[0] == 0:
        raise ValueError(f"a LeanDecoder takes one new token per row, tokens (B, 1), got {tuple(tokens.shape)}; run a "
                         f"prompt of several tokens through the model (model(tokens, caches=caches)) first")
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= decoder.vocab_size:
        raise ValueError(f"token ids must be in [0, {decoder.vocab_size}) (vocab_size), got min {low}, max {high}")
    model = decoder.model
    if model is None:
        raise ValueError("the model this decoder was built from no longer exists")
    if not isinstance(caches, (list, tuple)) or len(caches) != len(decoder.layers) or \
            not all(hasattr(c, "self_attn") and hasattr(c.self_attn, "update") for c in caches):
        raise TypeError(f"caches must be the list of {len(decoder.layers)} layer caches of model.new_caches(B, "
                        f"max_len), got {type(caches).__name__}"
                        f"{f' of {len(caches)}' if isinstance(caches, (list, tuple)) else ''}")
    lengths = {c.length for c in caches}
    if len(lengths) != 1:
        raise ValueError(f"every layer's cache must hold the same number of tokens, got {sorted(lengths)}")
    past = lengths.pop()
    if past == 0:
        raise ValueError("the caches are empty: a LeanDecoder continues a sequence, so run the prompt through the "
                         "model first, model(prompt, caches=caches), then step one token at a time")
    if past >= decoder.max_seq_len:
        raise ValueError(f"position {past} is past the model's max_seq_len={decoder.max_seq_len}: the caches already "
                         f"hold {past} tokens, and the model takes at most {decoder.max_seq_len}")
    for c in caches:
        if c.self_attn.k.shape[0] != tokens.shape[0]:
            raise ValueError(f"the caches hold batch {c.self_attn.k.shape[0]}, tokens has {tokens.shape[0]} rows")
    if key_mask is not None:
        check_tensor(key_mask, "key_mask", ndim=2)
        if key_mask.dtype != torch.bool or key_mask.shape != (tokens.shape[0], past + 1):
            raise ValueError(f"key_mask must be bool (B, P + 1) = ({tokens.shape[0]}, {past + 1}), True = real "
                             f"token, got {key_mask.dtype} {tuple(key_mask.shape)}")
