"""The two layouts of attention's q, k and v weights (private to ``minitfm.layers``; public as
``minitfm.layers.multihead.fuse_qkv`` and ``split_qkv``).

Glossary: D d_model, H query heads, H_kv key/value heads, Dh head width.

Three matrices ``q_proj`` (H Dh, D), ``k_proj`` and ``v_proj`` (H_kv Dh, D) each, as minitfm stores them by default
and as Llama's checkpoints publish them; or one ``qkv_proj`` (H Dh + 2 H_kv Dh, D), the three stacked in that order,
as nanoGPT's ``c_attn`` (``ModelConfig.fused_qkv``). Both compute the same queries, keys and values: the stacked
product is the three products side by side. The conversion moves the numbers and changes none of them.
"""
from __future__ import annotations

import dataclasses
import re

import torch
from torch import nn

_QKV = re.compile(r"^((?:.*\.)?)(q|k|v|qkv)_proj\.(weight|bias)$")
_ADAPTED = re.compile(r"(^|\.)(q|k|v|qkv)_proj\.(base|lora_A|lora_B)\b")


def _check_state(state, what: str) -> None:
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise TypeError(f"{what} takes a state dict (str -> Tensor) or a model, got {type(state).__name__}")
    adapted = [k for k in state if _ADAPTED.search(k)]
    if adapted:
        raise ValueError(f"{what}: {adapted[0]} belongs to a LoRA layer; merge_and_unload() the model first, then "
                         "convert its plain weights")


def _check_config(config, what: str):
    if not dataclasses.is_dataclass(config) or not hasattr(config, "fused_qkv"):
        raise TypeError(f"{what} needs the model's ModelConfig (the head counts split the rows), got "
                        f"{type(config).__name__}")
    return config.resolved()


def _convert(model: nn.Module, fused: bool, convert) -> nn.Module:
    """A new model of ``model``'s class, its config's ``fused_qkv`` set to ``fused``, holding ``model``'s weights
    converted (on the same device, in the same dtype, in the same train/eval mode)."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "fused_qkv"):
        raise TypeError(f"fuse_qkv/split_qkv convert a minitfm model built from a ModelConfig, or its state dict; "
                        f"got a {type(model).__name__} without a config")
    new = type(model)(dataclasses.replace(config, fused_qkv=fused))
    first = next(model.parameters())
    new.to(device=first.device, dtype=first.dtype).load_state_dict(convert(model.state_dict(), config))
    return new.train(model.training)


def fuse_qkv(source, config=None):
    """The fused layout of ``source``: a state dict with ``...q_proj``, ``...k_proj`` and ``...v_proj`` (weights,
    and biases if present) becomes one with ``...qkv_proj`` (the three stacked: q's rows, k's, v's), every other
    key as it was; or a model (built with ``fused_qkv=False``) becomes a new model with ``fused_qkv=True`` and the
    same weights. Only a prefix that holds all three is fused (latent attention's lone ``q_proj`` stays).
    ``config`` is not needed (accepted for symmetry with :func:`split_qkv`)."""
    if isinstance(source, nn.Module):
        return _convert(source, True, fuse_qkv)
    _check_state(source, "fuse_qkv")
    if config is not None and _check_config(config, "fuse_qkv").fused_qkv:
        raise ValueError("fuse_qkv: this config already has fused_qkv=True; its state dict holds qkv_proj")
    out = {}
    for key, value in source.items():
        match = _QKV.match(key)
        if match is None or match[2] == "qkv":
            out[key] = value
            continue
        prefix, _, part = match.groups()
        names = [f"{prefix}{n}_proj.{part}" for n in "qkv"]
        present = [n in source for n in names]
        if not any(present[1:]) and match[2] == "q":  # a q_proj alone (latent attention): not a q/k/v triple
            out[key] = value
        elif not all(present):
            raise ValueError(f"fuse_qkv: {key} has no complete q/k/v triple (missing "
                             f"{[n for n, p in zip(names, present) if not p]})")
        elif match[2] == "q":
            out[f"{prefix}qkv_proj.{part}"] = torch.cat([source[n] for n in names])
    return out


def split_qkv(source, config=None):
    """The inverse of :func:`fuse_qkv`: every ``...qkv_proj`` of a state dict split into ``q_proj`` (H Dh rows),
    ``k_proj`` and ``v_proj`` (H_kv Dh rows each) by ``config``'s head counts (a :class:`~minitfm.ModelConfig`,
    needed for a state dict); or a model with ``fused_qkv=True`` turned into a new one with ``fused_qkv=False``.
    The tensors are views of the fused ones' storage: ``clone`` them to edit one alone."""
    if isinstance(source, nn.Module):
        return _convert(source, False, split_qkv)
    _check_state(source, "split_qkv")
    c = _check_config(config, "split_qkv")
    sizes = (c.n_heads * c.d_head, c.n_kv_heads * c.d_head, c.n_kv_heads * c.d_head)
    out = {}
    for key, value in source.items():
        match = _QKV.match(key)
        if match is None or match[2] != "qkv":
            out[key] = value
            continue
        if value.shape[0] != sum(sizes):
            raise ValueError(f"split_qkv: {key} has {value.shape[0]} rows; this config's heads need {sum(sizes)} "
                             f"(H Dh = {sizes[0]} for q, H_kv Dh = {sizes[1]} for k and for v)")
        for name, part in zip("qkv", value.split(sizes)):
            out[f"{match[1]}{name}_proj.{match[3]}"] = part
    return out
