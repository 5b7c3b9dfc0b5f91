"""The key map: one rule per published tensor, from every family's state dict to the book's, and back.

Glossary: V vocabulary, D d_model, H query heads, H_kv key/value heads, Dh head dimension, F FFN hidden size,
L layers, E experts.

:func:`key_map` lists the rules: the published key, the minitfm key(s) it becomes and the transformation
(``copy``, ``transpose``, ``split q|k|v``, ``rotate-half -> pairs``, ``split rows``), built from the pieces of
:mod:`minitfm.pretrained.transforms`; the Llama-like families differ only in a few names (their norms, Phi-3's
fused projections, the experts). :func:`to_minitfm` and :func:`to_hf` apply
them in either direction after checking that no key is missing or extra and that every shape fits.
"""
from __future__ import annotations

import dataclasses
import re

import torch

from minitfm.config import ModelConfig
from minitfm.pretrained.conventions import _check_config, check_family
from minitfm.pretrained.deepseek import DEEPSEEK_TYPES, deepseek_rules, fuse_experts, routed_ffn_rules
from minitfm.pretrained.families import DECODER_FAMILIES
from minitfm.pretrained.gemma4 import decoder_class, gemma4_rules
from minitfm.pretrained.gpt_oss import gpt_oss_rules
from minitfm.pretrained.llama4 import llama4_rules
from minitfm.pretrained.minimax import minimax_ffn_rules
from minitfm.pretrained.qwen3_5 import qwen3_5_rules
from minitfm.pretrained.transforms import (Rule, _copy, _transposed, from_rotate_half, fuse_qkv,  # noqa: F401
                                           rotate_half_permutation, split_fused_qkv, split_rows, to_rotate_half)
# (rotate_half_permutation is read here by minitfm.exercises.pretrained, whose checks name this module)


# ---- the key map -----------------------------------------------------------------------------------------------

def _gpt2_rules(c: ModelConfig) -> list[Rule]:
    rules = [_copy("transformer.wte.weight", "tok_emb.weight"), _copy("transformer.wpe.weight", "pos_emb.emb.weight")]
    for i in range(c.n_layers):
        h, m = f"transformer.h.{i}.", f"layers.{i}."
        for part in ("weight", "bias"):
            qkv = tuple(f"{m}self_attn.{p}_proj.{part}" for p in "qkv")
            rules.append(Rule(f"{h}attn.c_attn.{part}", qkv, "split q|k|v" + (" + transpose" if part == "weight" else ""),
                              lambda t: split_fused_qkv(t, c.d_model), lambda ts: fuse_qkv(*ts)))
            rules.append(_copy(f"{h}ln_1.{part}", f"{m}attn_norm.{part}"))
            rules.append(_copy(f"{h}ln_2.{part}", f"{m}ffn_norm.{part}"))
        rules += [_transposed(f"{h}attn.c_proj.weight", f"{m}self_attn.out_proj.weight"),
                  _copy(f"{h}attn.c_proj.bias", f"{m}self_attn.out_proj.bias"),
                  _transposed(f"{h}mlp.c_fc.weight", f"{m}ffn.up_proj.weight"),
                  _copy(f"{h}mlp.c_fc.bias", f"{m}ffn.up_proj.bias"),
                  _transposed(f"{h}mlp.c_proj.weight", f"{m}ffn.down_proj.weight"),
                  _copy(f"{h}mlp.c_proj.bias", f"{m}ffn.down_proj.bias")]
    rules += [_copy("transformer.ln_f.weight", "final_norm.weight"), _copy("transformer.ln_f.bias", "final_norm.bias")]
    if not c.tie_embeddings:
        rules.append(_copy("lm_head.weight", "lm_head.weight"))
    return rules


_NORMS = {"input": (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm")),
          "output": (("post_attention_layernorm", "attn_out_norm"), ("post_feedforward_layernorm", "ffn_out_norm")),
          "both": (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "attn_out_norm"),
                   ("pre_feedforward_layernorm", "ffn_norm"), ("post_feedforward_layernorm", "ffn_out_norm"))}
_EXPERTS = {"mixtral": ("block_sparse_moe", {"gate": "w1", "up": "w3", "down": "w2"}),
            "qwen": ("mlp", {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"})}


def _pairs(heads: int, rope_dims: int | None = None) -> tuple:
    """(forward, inverse) of the rotate-half permutation for a tensor of ``heads`` heads (partial: ``rope_dims``)."""
    return lambda t: from_rotate_half(t, heads, rope_dims), lambda t: to_rotate_half(t, heads, rope_dims)


def _rotated(hf_key: str, key: str, heads: int, rope_dims: int | None = None) -> Rule:
    forward, inverse = _pairs(heads, rope_dims)
    return Rule(hf_key, (key,), "rotate-half -> pairs", lambda t: [forward(t)], lambda ts: inverse(ts[0]))


def _stacked(hf_key: str, keys: tuple, sizes: tuple, permute: tuple = ()) -> Rule:
    forward, inverse = split_rows(sizes, permute)
    return Rule(hf_key, keys, "split rows" + (" + rotate-half -> pairs" if permute else ""), forward, inverse)


def _attention_rules(c: ModelConfig, family: str, h: str, m: str) -> list[Rule]:
    """q, k, v, o (fused in Phi-3) and the QK-norms of one layer: ``h`` the published prefix, ``m`` minitfm's."""
    q_rows, kv_rows = c.n_heads * c.d_head, c.n_kv_heads * c.d_head
    qkv_parts = ("weight", "bias") if (c.bias if c.qkv_bias is None else c.qkv_bias) else ("weight",)
    rules = []
    for part in qkv_parts:
        if family == "phi3":
            keys = tuple(f"{m}{p}_proj.{part}" for p in "qkv")
            rules.append(_stacked(f"{h}qkv_proj.{part}", keys, (q_rows, kv_rows, kv_rows),
                                  (_pairs(c.n_heads), _pairs(c.n_kv_heads))))
            continue
        rules += [_rotated(f"{h}q_proj.{part}", f"{m}q_proj.{part}", c.n_heads, c.rope_dims),
                  _rotated(f"{h}k_proj.{part}", f"{m}k_proj.{part}", c.n_kv_heads, c.rope_dims),
                  _copy(f"{h}v_proj.{part}", f"{m}v_proj.{part}")]
    rules += [_copy(f"{h}o_proj.{part}", f"{m}out_proj.{part}") for part in ("weight", "bias")[:1 + c.bias]]
    if c.qk_norm not in ("none", "weightless"):  # a norm over one head turns like one head; over all, like q and k
        heads = (1, 1) if c.qk_norm == "head" else (c.n_heads, c.n_kv_heads)
        rules += [_rotated(f"{h}{p}_norm.weight", f"{m}{p}_norm.weight", n, c.rope_dims) for p, n in zip("qk", heads)]
    return rules


def _ffn_rules(c: ModelConfig, family: str, h: str, m: str) -> list[Rule]:
    parts = ("weight", "bias") if c.bias else ("weight",)
    if family in ("gpt_oss", "minimax_m2"):  # gpt-oss's sinks, router and experts; MiniMax-M2's router and experts
        return (gpt_oss_rules if family == "gpt_oss" else minimax_ffn_rules)(c, int(m.split(".")[1]))
    experts = DECODER_FAMILIES[family].experts
    if experts is not None:
        module, names = _EXPERTS[experts]
        rules = [_copy(f"{h}{module}.gate.weight", f"{m}ffn.router.weight")]
        for e in range(c.n_experts):
            rules += [_copy(f"{h}{module}.experts.{e}.{theirs}.weight", f"{m}ffn.experts.{e}.{ours}_proj.weight")
                      for ours, theirs in names.items()]
        return rules
    if family == "phi3":
        return [_stacked(f"{h}mlp.gate_up_proj.weight", (f"{m}ffn.gate_proj.weight", f"{m}ffn.up_proj.weight"),
                         (c.d_ff, c.d_ff)), _copy(f"{h}mlp.down_proj.weight", f"{m}ffn.down_proj.weight")]
    return [_copy(f"{h}mlp.{p}_proj.{part}", f"{m}ffn.{p}_proj.{part}") for part in parts
            for p in ("gate", "up", "down")]


def unfuse_experts(state: dict, family: str) -> dict:
    """A ``transformers`` 5 MoE state dict in memory -> the per-expert keys of the family's files: the model fuses
    every layer's experts into ``mlp.experts.gate_up_proj`` (E, 2F, D), gate rows first, and
    ``mlp.experts.down_proj`` (E, D, F), and names Mixtral's router ``mlp.gate``. Other state dicts pass unchanged."""
    experts = DECODER_FAMILIES[family].experts if family in DECODER_FAMILIES else \
        {"minimax_m2": "mixtral", "qwen3_next": "qwen"}.get(family, "qwen" if family in DEEPSEEK_TYPES else None)
    if experts is None:
        return state
    module, names = _EXPERTS[experts]
    out = {}
    for key, tensor in state.items():
        prefix, fused = key.rsplit("mlp.", 1) if ".mlp." in key else (key, None)
        if fused in ("gate.weight", "e_score_correction_bias"):  # the router; MiniMax-M2's block-level bias
            out[f"{prefix}{module}.{fused}"] = tensor
        elif fused in ("experts.gate_up_proj", "experts.down_proj"):
            for e, matrix in enumerate(tensor):  # (2F, D) or (D, F) per expert
                parts = matrix.chunk(2) if fused.endswith("gate_up_proj") else (matrix,)
                for part, ours in zip(parts, ("gate", "up") if len(parts) == 2 else ("down",)):
                    out[f"{prefix}{module}.experts.{e}.{names[ours]}.weight"] = part.contiguous()
        else:
            out[key] = tensor
    return out


def _decoder_rules(c: ModelConfig, family: str) -> list[Rule]:
    """The key map of the Llama-like families (:data:`~minitfm.pretrained.families.DECODER_FAMILIES`)."""
    rules = [_copy("model.embed_tokens.weight", "tok_emb.weight")]
    for i in range(c.n_layers):
        h, m = f"model.layers.{i}.", f"layers.{i}."
        if family == "llama4_text":  # q and k copied; feed_forward's dense or routed FFN
            rules += llama4_rules(c, i)
        elif family in ("qwen3_5_text", "qwen3_next"):  # Gated DeltaNet or gated attention, then a SwiGLU or experts
            rules += qwen3_5_rules(c, i)
        elif family == "glm4_moe":  # Llama's attention, DeepSeek-V3's experts
            rules += _attention_rules(c, family, h + "self_attn.", m + "self_attn.") + routed_ffn_rules(c, i)
        elif family in DEEPSEEK_TYPES:  # latent attention; routed experts after the dense layers
            rules += deepseek_rules(c, i)
        else:
            rules += _attention_rules(c, family, h + "self_attn.", m + "self_attn.")
            rules += _ffn_rules(c, family, h, m)
        rules += [_copy(f"{h}{theirs}.weight", f"{m}{ours}.weight") for theirs, ours in _NORMS[c.sublayer_norm]]
    rules.append(_copy("model.norm.weight", "final_norm.weight"))
    if not c.tie_embeddings:
        rules.append(_copy("lm_head.weight", "lm_head.weight"))
    return rules


def _check_state(state, names: str) -> None:
    """TypeError unless ``state`` is a dict of str -> floating-point tensor (``names``: whose keys)."""
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict of {names} -> tensor, got {type(state).__name__}")
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state's keys must be {names} (str), got {type(key).__name__} {key!r}")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"state[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        if not value.is_floating_point() and not key.endswith(_BUFFERS):  # GPT-2's causal-mask buffer is bool
            raise TypeError(f"state[{key!r}] must be a floating-point tensor (weights), got dtype {value.dtype}")


def _layers(keys, pattern: str) -> list[int]:
    return sorted({int(m.group(1)) for k in keys for m in [re.search(pattern, k)] if m})


def _mismatch(what: str, missing: list, extra: list, config: ModelConfig, pattern: str) -> str:
    """The message for keys that a state dict lacks or has beyond what ``config`` uses, both lists, with the
    layers each side holds when they differ."""
    shown = lambda keys: f"{keys[:6]}{' ...' if len(keys) > 6 else ''} ({len(keys)} keys)"  # noqa: E731
    layers = _layers(extra, pattern) + _layers(missing, pattern)
    note = (f"; the config has n_layers={config.n_layers}, and layers {sorted(set(layers))} differ" if layers else "")
    return f"{what}: missing {shown(missing)}, unexpected {shown(extra)}{note}"


def key_map(config: ModelConfig, family: str | None = None) -> list[Rule]:
    """Every published tensor of a model with this config, as a :class:`Rule` (with its published shape), in the
    layout of ``family`` (a ``model_type``; by default the first family that holds the config)."""
    family = check_family(config, family)
    c = config.resolved()
    rules = _gpt2_rules(c) if family == "gpt2" else gemma4_rules(c) if family == "gemma4_text" else _decoder_rules(c, family)
    expected = _expected_shapes(c)
    with torch.device("meta"):  # the shapes only: each rule's inverse applied to empty tensors
        return [dataclasses.replace(rule, hf_shape=tuple(rule.inverse([torch.empty(expected[k]) for k in
                                                                       rule.minitfm_keys]).shape)) for rule in rules]


# Buffers, not weights: minitfm recomputes them. GPT-2 stores its causal mask as `h.N.attn.bias` (and
# `attn.masked_bias`); the leading dot matters: `h.N.attn.c_attn.bias` ends in "c_attn.bias", not ".attn.bias".
_BUFFERS = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")


def _normalise_keys(state: dict, family: str) -> dict:
    """Accept the prefixes that checkpoints use: ``h.0...`` (the original GPT-2 files) as ``transformer.h.0...``."""
    out = {}
    for key, value in state.items():
        if key.endswith(_BUFFERS):
            continue
        if family == "gpt2" and not key.startswith(("transformer.", "lm_head.")):
            key = "transformer." + key
        out[key] = value
    return out


def to_minitfm(state: dict, config: ModelConfig, family: str | None = None) -> dict:
    """A published state dict (keys of ``family``, by default the first that holds ``config``) -> minitfm's state
    dict for ``DecoderOnlyLM(config)``. The loaders pass the ``model_type`` of the checkpoint's config.json.

    Raises ValueError naming every missing or unexpected key, and the first tensor whose shape does not fit.
    """
    _check_state(state, "published tensor names")
    family = check_family(config, family)
    rules = key_map(config, family)
    state = _normalise_keys(state, family)
    if family in DEEPSEEK_TYPES or family in ("minimax_m2", "qwen3_next"):  # the files' experts one by one -> stacked
        state = fuse_experts(state, "block_sparse_moe" if family == "minimax_m2" else "mlp")
    tied_head = state.pop("lm_head.weight", None) if config.tie_embeddings else None
    wanted = {r.hf_key for r in rules}
    missing, extra = sorted(wanted - set(state)), sorted(set(state) - wanted)
    if missing or extra:
        raise ValueError(_mismatch(f"the checkpoint does not fit this {family} config", missing, extra,
                                   config, r"(?:\.h|layers)\.(\d+)\."))
    expected = _expected_shapes(config)
    out = {}
    for rule in rules:
        published = state[rule.hf_key]
        if tuple(published.shape) != rule.hf_shape:  # checked before transforming, so no reshape fails first
            raise ValueError(f"{rule.hf_key} has shape {tuple(published.shape)}; this config expects "
                             f"{rule.hf_shape} (it gives {', '.join(rule.minitfm_keys)}: {rule.how})")
        tensors = rule.forward(published)
        if len(tensors) != len(rule.minitfm_keys):  # zip would drop the rest silently
            raise ValueError(f"{rule.hf_key} {tuple(published.shape)} gave {len(tensors)} tensors; '{rule.how}' must "
                             f"give {len(rule.minitfm_keys)} ({', '.join(rule.minitfm_keys)})")
        for key, tensor in zip(rule.minitfm_keys, tensors):
            want = expected[key]
            if tuple(tensor.shape) != want:
                raise ValueError(f"{rule.hf_key} has shape {tuple(published.shape)}, which gives {key} the "
                                 f"shape {tuple(tensor.shape)}; this config expects {want}")
            out[key] = tensor
    if config.tie_embeddings:
        if tied_head is not None and not torch.equal(tied_head, out["tok_emb.weight"]):
            raise ValueError("the config ties the output head to the token embedding, but lm_head.weight differs "
                             "from the embedding in this checkpoint")
        out["lm_head.weight"] = out["tok_emb.weight"]
    return out


def _expected_shapes(config: ModelConfig) -> dict[str, tuple]:
    """minitfm's parameter shapes for ``config``, without building the model (meta tensors)."""
    with torch.device("meta"):
        model = decoder_class(config)(config)  # Gemma 4's own model for config.gemma4
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def to_hf(state: dict, config: ModelConfig, family: str | None = None) -> dict:
    """minitfm's state dict -> the published keys and layouts (tied heads written once, as transformers does).

    Raises ValueError naming every missing and every unused key (a layer beyond the config's included), or
    the first tensor whose shape does not fit ``config``."""
    _check_state(state, "minitfm parameter names")
    rules = key_map(config, family)
    expected = _expected_shapes(config)
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        raise ValueError(_mismatch("the minitfm state dict does not fit this config", missing, extra, config,
                                   r"^layers\.(\d+)\."))
    for key, shape in expected.items():
        if tuple(state[key].shape) != shape:
            raise ValueError(f"{key} has shape {tuple(state[key].shape)}; this config expects {shape}")
    if config.tie_embeddings and not torch.equal(state["lm_head.weight"], state["tok_emb.weight"]):
        raise ValueError("the config ties the output head to the token embedding, but lm_head.weight differs from "
                         "tok_emb.weight in this state dict: the published file would keep only the embedding")
    out = {}
    for rule in rules:
        tensor = rule.inverse([state[k] for k in rule.minitfm_keys]).contiguous()
        if tuple(tensor.shape) != rule.hf_shape:
            raise ValueError(f"'{rule.how}' made {rule.hf_key} of shape {tuple(tensor.shape)}; the published "
                             f"layout is {rule.hf_shape}")
        out[rule.hf_key] = tensor
    return unfuse_experts(out, family) if family in DEEPSEEK_TYPES or family in ("minimax_m2", "qwen3_next") else out


