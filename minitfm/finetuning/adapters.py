"""LoRA adapters saved apart from the base model: a few kilobytes instead of the whole model.

A LoRA fine-tune changes only the ``A`` and ``B`` of its :class:`~minitfm.finetuning.lora.LoRALinear` layers. Saving
those alone, with the settings that created them (targets, r, alpha, dropout), is enough: loaded onto the same
base model, they give back the tuned model, and one base can carry several such files, one per task (as
``peft``'s ``adapter_model.safetensors`` beside ``adapter_config.json``). The file holds plain values only, so
``torch.load(weights_only=True)`` reads it.
"""
from __future__ import annotations

import os

import torch
from torch import nn

from minitfm.finetuning.lora import ADAPTER_KEYS, add_lora, check_model, lora_layers, require_lora


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters alone: ``{"layers.0.self_attn.q_proj.lora_A": (r, D_in), ...}``, copies on the CPU."""
    return {f"{name}.{key}": getattr(layer, key).detach().cpu().clone()
            for name, layer in require_lora(model).items() for key in ADAPTER_KEYS}


def adapter_config(model: nn.Module) -> dict:
    """What :func:`load_adapters` needs to wrap a fresh base the same way: targets, r, alpha and dropout."""
    layers = require_lora(model)
    settings = {(layer.r, layer.alpha, getattr(layer.dropout, "p", 0.0)) for layer in layers.values()}
    if len(settings) != 1:
        raise ValueError(f"the LoRA layers differ in (r, alpha, dropout): {sorted(settings)}; save them one by one")
    (r, alpha, dropout), = settings
    return {"targets": sorted({name.rpartition(".")[2] for name in layers}), "r": r, "alpha": alpha,
            "dropout": dropout}


def save_adapters(model: nn.Module, path: str | os.PathLike) -> None:
    """Write the adapters and their config (plain values: ``torch.load(weights_only=True)`` reads them)."""
    if any(layer.merged for layer in require_lora(model).values()):
        raise ValueError("some LoRA layers are merged: unmerge_lora(model) before saving the adapters")
    torch.save({"config": adapter_config(model), "state": lora_state_dict(model)}, path)


def load_adapters(model: nn.Module, adapters: str | os.PathLike | dict) -> nn.Module:
    """Wrap ``model`` (a base without LoRA) as the saved adapters say and load their ``A`` and ``B``.

    ``adapters`` is a file written by :func:`save_adapters` or the dict it holds. Every adapter tensor must find
    its layer, with its shape, and every wrapped layer must get its tensors; otherwise nothing is loaded."""
    if not isinstance(adapters, (dict, str, os.PathLike)):
        raise TypeError(f"adapters must be a file path or the dict save_adapters writes, got {type(adapters).__name__}")
    if not isinstance(adapters, dict):
        adapters = torch.load(adapters, map_location="cpu", weights_only=True)
    if set(adapters) != {"config", "state"}:
        raise ValueError(f"adapters must hold 'config' and 'state' (as save_adapters writes them), got {sorted(adapters)}")
    config, state = adapters["config"], adapters["state"]
    check_model(model)
    if lora_layers(model):
        raise ValueError("model already has LoRA layers; load adapters onto a plain base model")
    targets, r = set(config["targets"]), config["r"]
    own = {}  # what add_lora will create: key -> shape, checked before anything changes
    for name, m in model.named_modules():
        if type(m) is nn.Linear and name.rpartition(".")[2] in targets:
            own[f"{name}.lora_A"], own[f"{name}.lora_B"] = (r, m.in_features), (m.out_features, r)
    missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if tuple(state[k].shape) != own[k])
    if missing or extra or wrong:
        raise ValueError(f"the adapters do not fit this model: missing {missing[:3]}, unused {extra[:3]}, "
                         f"wrong shape {wrong[:3]}")
    cuda = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda):  # A is drawn, then overwritten: the caller's random stream stays put
        add_lora(model, tuple(config["targets"]), r, config["alpha"], config["dropout"])
    with torch.no_grad():
        for name, layer in lora_layers(model).items():
            for key in ADAPTER_KEYS:
                getattr(layer, key).copy_(state[f"{name}.{key}"])
    return model
