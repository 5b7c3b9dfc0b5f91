"""A model's attention weights in one shape, and how spread out they are (chapters 1, 3, 10).

Attention weights are accepted as ``{kind: [per-layer tensor]}`` with kinds such as ``"encoder_self"``,
``"decoder_self"``, ``"cross"`` (or ``"self"`` for a decoder-only model), as a plain list (one kind), or as a
model's ``Intermediates``; each layer's tensor is (B, H, T_q, T_k) or (H, T_q, T_k). ``to_layer_list`` exports
one kind in the list-of-(B, H, T_q, T_k)-per-layer form that visualisation tools such as bertviz accept.
The plots and explorers (:mod:`minitfm.viz`) and the debugging checks (:mod:`minitfm.training.debugging`)
read them from here.
"""
from __future__ import annotations

from typing import Mapping

import torch

from minitfm._checks import check_choice, check_tensor

INTERMEDIATE_KINDS = ("encoder_self", "decoder_self", "cross")


def check_weights(w, name: str) -> torch.Tensor:
    """Validate one attention tensor (non-empty, floating, finite) and return it detached on the CPU."""
    check_tensor(w, name, floating=True)
    if w.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(w.shape)}); attention maps need at least one query and key")
    if not torch.isfinite(w).all():
        bad = int((~torch.isfinite(w)).sum())
        raise ValueError(f"{name} contains {bad} NaN/Inf values; plots and explorers need finite numbers")
    return w.detach().float().cpu()


def attention_maps(source) -> dict[str, list[torch.Tensor]]:
    """Normalise attention weights to ``{kind: [(B, H, T_q, T_k) per layer]}`` (detached, CPU, float32).

    ``source`` is a dict of lists, a plain list (one kind, ``"self"``), or a model's ``Intermediates``
    (``minitfm.models``: its non-empty ``encoder_self``, ``decoder_self`` and ``cross`` lists).
    """
    if not isinstance(source, (Mapping, list, tuple)) and any(hasattr(source, k) for k in INTERMEDIATE_KINDS):
        source = {k: getattr(source, k) for k in INTERMEDIATE_KINDS if getattr(source, k, None)}
    if isinstance(source, (list, tuple)):
        source = {"self": source}
    if not isinstance(source, Mapping) or not source:
        raise TypeError(f"attention weights must be a non-empty dict {{kind: [tensor per layer]}} or a list, "
                        f"got {type(source).__name__}")
    maps = {}
    for kind, layers in source.items():
        if not isinstance(layers, (list, tuple)) or not layers:
            raise ValueError(f"weights[{kind!r}] must be a non-empty list of per-layer tensors, got {layers!r:.60}")
        maps[kind] = [_as_bhqk(w, f"weights[{kind!r}][{i}]") for i, w in enumerate(layers)]
        first = maps[kind][0].shape
        for i, w in enumerate(maps[kind]):
            if w.shape != first:
                raise ValueError(f"every layer of {kind!r} must have the same shape; layer 0 is {tuple(first)}, "
                                 f"layer {i} is {tuple(w.shape)}")
    return maps


def _as_bhqk(w, name: str) -> torch.Tensor:
    check_tensor(w, name, ndim=(3, 4), floating=True)
    w = check_weights(w, name)
    return w[None] if w.dim() == 3 else w  # (H, T_q, T_k) -> (1, H, T_q, T_k)


def to_layer_list(source, kind: str | None = None) -> list[torch.Tensor]:
    """One kind of attention as a list with one (B, H, T_q, T_k) tensor per layer (bertviz's format).

    ``kind`` may be omitted when ``source`` holds a single kind.
    """
    maps = attention_maps(source)
    if kind is None:
        if len(maps) != 1:
            raise ValueError(f"source holds several kinds {sorted(maps)}; pass kind=...")
        kind = next(iter(maps))
    check_choice(kind, "kind", list(maps))
    return list(maps[kind])


def entropy(probs: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy in nats along ``dim``; zero probabilities contribute 0."""
    return -(probs * probs.clamp_min(1e-30).log()).sum(dim)
