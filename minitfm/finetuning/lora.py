"""LoRA, low-rank adaptation (Hu et al., 2021): train a small update of a frozen linear layer.

Glossary: D_in, D_out a layer's input and output widths, r the rank of the update, alpha its scale.

A frozen ``nn.Linear`` computes ``y = W x + b``. LoRA adds a trainable low-rank path beside it:

    y = W x + b + (alpha / r) * B A x        A (r, D_in), B (D_out, r)

``A`` starts random (Kaiming-uniform, as ``nn.Linear`` and Hugging Face ``peft`` initialise it) and ``B`` at
zero, so at step 0 the model computes exactly what the base model computes. Only ``A`` and ``B`` train:
``r * (D_in + D_out)`` numbers instead of ``D_in * D_out``, and Adam's two state tensors shrink with them.
The scale ``alpha / r`` keeps the size of the update roughly the same when r changes, so a learning rate
tuned at one rank still works at another.

After training, ``merge`` folds the update into the weight, ``W <- W + (alpha / r) B A``: the merged layer
costs nothing extra at inference. ``unmerge`` subtracts it again (equal to the base weights to rounding).
``merge_and_unload`` replaces each LoRA layer by its merged ``nn.Linear``, which the lean decoding step of
chapter 8 runs again (it refuses module types it does not know, such as :class:`LoRALinear`).

The adapters are saved apart from the base (:mod:`minitfm.finetuning.adapters`).

Equal to ``peft``'s ``LoraConfig`` when ``alpha`` is passed: minitfm's default ``alpha=16`` (2r at r = 8, a common
rule of thumb) is not peft's 8. Not here: rsLoRA (scale ``alpha / sqrt(r)``), DoRA, and ``target_modules=
"all-linear"`` (name the layers: :func:`linear_names` lists them).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minitfm._checks import check_number, check_positive_int, check_probability
from minitfm.models import DecoderOnlyLM

ADAPTER_KEYS = ("lora_A", "lora_B")  # the trainable tensors of a LoRALinear


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` (``base``) plus the trainable update ``(alpha / r) * B A``.

    Args:
        base: the layer to adapt; its parameters are frozen (``requires_grad = False``).
        r: the rank of the update, an int in [1, min(D_in, D_out)].
        alpha: the update's scale numerator (scaling = alpha / r), a number > 0.
        dropout: dropout on the LoRA path's input during training (0 = none), in [0, 1).
        generator: a seeded ``torch.Generator`` makes ``A``'s random start repeatable.
    """

    def __init__(self, base: nn.Linear, r: int = 8, alpha: float = 16, dropout: float = 0.0, *,
                 generator: torch.Generator | None = None):
        super().__init__()
        if type(base) is not nn.Linear:
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}")
        check_positive_int(r, "r")
        if r > min(base.in_features, base.out_features):
            raise ValueError(f"r must be <= min(in_features, out_features) = {min(base.in_features, base.out_features)} "
                             f"for this layer ({base.in_features} -> {base.out_features}): a larger rank adds "
                             f"parameters but no expressiveness; got r={r}")
        check_number(alpha, "alpha", low=0.0, low_open=True)
        check_probability(dropout, "dropout")
        base.requires_grad_(False)
        self.base = base
        self.r, self.alpha, self.scaling = r, alpha, alpha / r
        kind = dict(dtype=base.weight.dtype, device=base.weight.device)
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, **kind))  # (r, D_in)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **kind))  # (D_out, r): zero, so no change at step 0
        if generator is not None and generator.device.type != self.lora_A.device.type:
            # a CPU generator for weights on a GPU: draw on the CPU, then copy (the same A on every device)
            start = torch.empty(r, base.in_features, dtype=base.weight.dtype, device=generator.device)
            with torch.no_grad():
                self.lora_A.copy_(nn.init.kaiming_uniform_(start, a=math.sqrt(5), generator=generator))
        else:
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5), generator=generator)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.merged = False

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}, merged={self.merged}"

    @property
    def weight(self) -> torch.Tensor:
        """The base layer's weight (D_out, D_in); it holds the update only while merged."""
        return self.base.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def delta_weight(self) -> torch.Tensor:
        """The update as one (D_out, D_in) matrix: ``(alpha / r) * B @ A``."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)  # (..., D_in) -> (..., D_out)
        if self.merged:  # W already holds the update
            return y
        # the order peft uses: A first (D_in -> r), then B (r -> D_out), then the scale
        return y + F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B) * self.scaling

    @torch.no_grad()
    def merge(self) -> None:
        """``W <- W + (alpha / r) B A``; the layer then computes the same with one matrix product. For inference:
        while merged, the forward pass skips ``A`` and ``B``, so they get no gradient."""
        if self.merged:
            raise ValueError("this LoRA layer is already merged; unmerge() it first")
        self.base.weight += self.delta_weight()
        self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """``W <- W - (alpha / r) B A``: the base weights again, to rounding."""
        if not self.merged:
            raise ValueError("this LoRA layer is not merged; there is nothing to unmerge")
        self.base.weight -= self.delta_weight()
        self.merged = False


def check_model(model) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. a minitfm DecoderOnlyLM), got {type(model).__name__}")


def check_decoder(model) -> None:
    """Refuse anything but a :class:`~minitfm.models.DecoderOnlyLM` (the classifier, packing, new tokens)."""
    if not isinstance(model, DecoderOnlyLM):
        raise TypeError(f"model must be a minitfm DecoderOnlyLM, got {type(model).__name__}")


def lora_layers(model: nn.Module) -> dict[str, LoRALinear]:
    """Every :class:`LoRALinear` of ``model`` by its module name (``layers.0.self_attn.q_proj``)."""
    check_model(model)
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


def linear_names(model: nn.Module) -> list[str]:
    """The distinct last names of ``model``'s ``nn.Linear`` modules: what ``add_lora``'s ``targets`` may name."""
    check_model(model)
    return sorted({name.rpartition(".")[2] for name, m in model.named_modules() if type(m) is nn.Linear})


def add_lora(model: nn.Module, targets: Sequence[str] = ("q_proj", "v_proj"), r: int = 8, alpha: float = 16,
             dropout: float = 0.0, *, seed: int | None = None) -> nn.Module:
    """Freeze every parameter of ``model`` and wrap each ``nn.Linear`` whose last name is in ``targets``.

    ``targets`` are last names as ``peft``'s ``target_modules`` matches them: ``"q_proj"`` wraps
    ``layers.{i}.self_attn.q_proj`` in every layer. The book's models name their layers ``q_proj``, ``k_proj``,
    ``v_proj``, ``out_proj`` (attention), ``up_proj``, ``down_proj`` and, in SwiGLU, ``gate_proj`` (feed-forward)
    and ``lm_head``. A name that matches no linear layer is an error naming those that exist. ``seed`` draws
    every ``A`` from one seeded generator, in module order. Returns ``model``, changed in place.
    """
    check_model(model)
    if isinstance(targets, str) or not isinstance(targets, (list, tuple, set, frozenset)):
        raise TypeError(f"targets must be a list or tuple of layer names such as ('q_proj', 'v_proj'), "
                        f"got {type(targets).__name__} {targets!r:.60}")
    if not targets or not all(isinstance(t, str) for t in targets):
        raise ValueError(f"targets must be a non-empty list of layer names (str), got {list(targets)!r:.80}")
    check_positive_int(r, "r")
    check_number(alpha, "alpha", low=0.0, low_open=True)
    check_probability(dropout, "dropout")
    if seed is not None:
        check_number(seed, "seed", integer=True)
    wrapped = lora_layers(model)
    if wrapped:
        raise ValueError(f"model already has LoRA layers ({sorted(wrapped)[:3]} ...); merge_and_unload() it first")
    available = linear_names(model)
    unknown = sorted(set(targets) - set(available))
    if unknown:
        fused = " (q, k and v are one qkv_proj here, ModelConfig.fused_qkv: target 'qkv_proj', or split_qkv the " \
            "model first)" if "qkv_proj" in available and {"q_proj", "k_proj", "v_proj"} & set(unknown) else ""
        raise ValueError(f"targets {unknown} name no nn.Linear of this {type(model).__name__}; its linear layers "
                         f"are {available}{fused}")
    chosen = [(name, m) for name, m in model.named_modules()
              if type(m) is nn.Linear and name.rpartition(".")[2] in set(targets)]
    shared = _shared_weights(model)
    tied = sorted(name for name, m in chosen if id(m.weight) in shared)
    if tied:
        raise ValueError(f"the weights of {tied} are shared with another module (tied embeddings): merging would change "
                         "both; leave them out of targets (or untie them first)")
    narrow = [(name, min(m.in_features, m.out_features)) for name, m in chosen if r > min(m.in_features, m.out_features)]
    if narrow:  # checked before anything changes: no half-wrapped model
        raise ValueError(f"r must be <= min(in_features, out_features) of every target, got r={r}; too narrow: "
                         f"(layer, limit) {narrow[:3]}")
    model.requires_grad_(False)
    generator = None if seed is None else torch.Generator(device="cpu").manual_seed(seed)
    for name, linear in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(linear, r, alpha, dropout, generator=generator))
    return model


def _shared_weights(model: nn.Module) -> set[int]:
    """The ids of parameters that more than one module holds (``lm_head.weight is tok_emb.weight`` when tied)."""
    seen, shared = set(), set()
    for _, p in model.named_parameters(remove_duplicate=False):
        (shared if id(p) in seen else seen).add(id(p))
    return shared


def merge_lora(model: nn.Module) -> None:
    """Merge every LoRA layer of ``model`` (see :meth:`LoRALinear.merge`)."""
    layers = require_lora(model)
    for layer in layers.values():
        layer.merge()


def unmerge_lora(model: nn.Module) -> None:
    """Unmerge every LoRA layer of ``model`` (see :meth:`LoRALinear.unmerge`)."""
    layers = require_lora(model)
    for layer in layers.values():
        layer.unmerge()


def merge_and_unload(model: nn.Module) -> nn.Module:
    """Merge every LoRA layer and put its ``nn.Linear`` back in its place (as ``peft``'s method of the same
    name): a plain model again, which the lean decoding step runs. The base parameters stay frozen."""
    layers = require_lora(model)
    for name, layer in layers.items():
        if not layer.merged:
            layer.merge()
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, layer.base)
    return model


def require_lora(model) -> dict[str, LoRALinear]:
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"this {type(model).__name__} has no LoRA layers; add_lora(model, ...) wraps some")
    return layers


def trainable_parameters(model: nn.Module) -> int:
    """How many numbers the optimiser updates: parameters with ``requires_grad`` (a tied one counted once), of a
    table opened row by row (:func:`~minitfm.finetuning.train_token_rows`) its open rows only."""
    check_model(model)
    return sum(p.numel() if not hasattr(p, "trainable_rows") else p.trainable_rows * p.shape[1]
               for p in model.parameters() if p.requires_grad)


def adam_state_numbers(model: nn.Module) -> int:
    """How many numbers Adam keeps for ``model``: two per trainable parameter (the running means of the gradient
    and of its square), besides one step counter per tensor. LoRA shrinks this with the trainable count."""
    return 2 * trainable_parameters(model)
