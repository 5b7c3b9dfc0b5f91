"""Activation memory: measure what a forward pass keeps for backward, see which tensors it creates, and
trade memory for recomputation (gradient checkpointing).

Glossary: B batch, T length, D d_model, H heads, L layers.

Training memory = parameters + gradients + optimizer state (fixed by the model) + **activations**, the
tensors autograd saves during the forward pass to compute the backward pass. Activations grow with
B x T (and B x H x T x T for manual attention), so they are what runs out first for long sequences.

- :class:`SavedTensorMeter` counts the bytes autograd saves (``torch.autograd.graph.saved_tensors_hooks``),
  each storage once, parameters excluded: the activation memory held between forward and backward.
- :class:`OpRecorder` logs every ATen operation a forward pass runs, with its output dtypes and sizes
  (a ``TorchDispatchMode``): which ops autocast moved to bf16, the largest tensor ever created.
- :func:`gradient_checkpointing` runs chosen blocks under ``torch.utils.checkpoint``: they keep only
  their inputs and recompute their insides during backward.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint


class SavedTensorMeter:
    """Context manager counting the bytes of tensors saved for backward inside it.

    ``with SavedTensorMeter(exclude=model.parameters()) as meter: loss = f(model, x)`` then
    ``meter.bytes``. A storage saved by several ops (x feeds q_proj, k_proj and v_proj) counts once;
    storages in ``exclude`` (the weights, which exist anyway) do not count.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        if isinstance(exclude, torch.Tensor) or not hasattr(exclude, "__iter__"):
            raise TypeError(f"exclude must be an iterable of tensors (e.g. model.parameters()), got {type(exclude).__name__}")
        exclude = list(exclude)
        if not all(isinstance(p, torch.Tensor) for p in exclude):
            raise TypeError("exclude must hold tensors only (e.g. model.parameters())")
        self._exclude = {p.untyped_storage().data_ptr() for p in exclude}
        self.storages: dict[int, int] = {}  # data pointer -> bytes
        self._hooks = None

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr and ptr not in self._exclude:
            self.storages[ptr] = max(self.storages.get(ptr, 0), storage.nbytes())
        return tensor  # keep the tensor itself: we only measure

    def __enter__(self) -> "SavedTensorMeter":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    @property
    def bytes(self) -> int:
        return sum(self.storages.values())


@dataclass
class OpRecord:
    """One ATen operation: its name, output dtypes, output shapes and the bytes of the outputs' storages."""

    op: str
    dtypes: tuple
    shapes: tuple
    nbytes: int


class OpRecorder(TorchDispatchMode):
    """Context manager logging every ATen op run inside it (after autocast chose the dtypes).

    ``records`` is a list of :class:`OpRecord`; ``largest()`` is the op whose output storage was the
    biggest, ``dtypes_by_op()`` maps op name -> set of output dtype names.
    """

    def __init__(self):
        super().__init__()
        self.records: list[OpRecord] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = [t for t in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(t, torch.Tensor)]
        self.records.append(OpRecord(
            func.overloadpacket.__name__,
            tuple(str(t.dtype).removeprefix("torch.") for t in outs),
            tuple(tuple(t.shape) for t in outs),
            sum(t.untyped_storage().nbytes() for t in outs),
        ))
        return out

    def largest(self) -> OpRecord:
        if not self.records:
            raise ValueError("no operation was recorded: run something inside `with OpRecorder() as rec:`")
        return max(self.records, key=lambda r: r.nbytes)

    def dtypes_by_op(self) -> dict[str, set]:
        table: dict[str, set] = {}
        for record in self.records:
            table.setdefault(record.op, set()).update(record.dtypes)
        return table


@contextlib.contextmanager
def gradient_checkpointing(blocks: Iterable[nn.Module]):
    """Inside the ``with``, each module in ``blocks`` (e.g. ``model.layers``) runs under
    ``torch.utils.checkpoint`` (non-reentrant): its forward saves only its inputs, and its insides are
    recomputed during backward, which may run after the ``with`` has closed.

    Costs about one extra forward pass of those blocks; dropout masks are replayed identically
    (the random state is saved), so results match the plain run.
    """
    blocks = list(blocks)
    for block in blocks:
        if not isinstance(block, nn.Module):
            raise TypeError(f"blocks must be nn.Modules (e.g. model.layers), got {type(block).__name__}")
        if "forward" in vars(block):
            raise ValueError(f"{type(block).__name__} already has a patched forward (nested gradient_checkpointing?)")
    try:
        for block in blocks:
            plain = block.forward  # the class's bound forward, captured for the recomputation

            def run(*args, _plain=plain, **kwargs):
                return checkpoint(_plain, *args, use_reentrant=False, **kwargs)

            block.forward = run  # an instance attribute shadows the class method
        yield blocks
    finally:
        for block in blocks:
            vars(block).pop("forward", None)
