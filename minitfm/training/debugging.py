"""Diagnostics for a Transformer that does not train: the tests to run before changing anything else.

Glossary: B batch, T length (T_q queries, T_k keys), H heads, L layers, V vocab_size.

- :func:`overfit_one_batch` — a healthy model drives the loss on one fixed batch to almost zero
  (dropout and label smoothing off). If it cannot, the bug is in the model or the loss, not the data.
- :class:`NonFiniteFinder` — hooks that name the first module whose output (or output gradient)
  holds NaN/Inf, in the order the computation ran.
- :func:`grad_norms` — the gradient norm of every layer that owns parameters (plotted by
  :func:`minitfm.viz.plotting.plot_grad_norms`).
- :func:`check_causality` — change the future tokens, verify that no past output moves.
- :func:`attention_entropy` — how spread out each head's attention is (0 = one key, log T_k = uniform).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from minitfm._checks import check_positive_int, check_token_ids
from minitfm.layers.attention_maps import attention_maps, entropy


def overfit_one_batch(model: nn.Module, batch, steps: int = 100, lr: float = 3e-3, *,
                      copy_model: bool = True) -> list[float]:
    """Train on one fixed :class:`minitfm.data.Batch` with Adam at a constant ``lr``; return the losses.

    Dropout is off (the model runs in eval mode, which in minitfm only disables dropout), the loss is
    plain cross-entropy (no label smoothing, padding ignored) and there is no warmup or clipping: the
    smallest loop that can memorise. ``copy_model`` trains a deep copy and leaves ``model`` untouched.
    """
    from minitfm.data import Batch
    from minitfm.training.loop import forward_batch  # the loop imports the models: keep this module light
    from minitfm.training.losses import label_smoothed_cross_entropy

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(batch, Batch):
        raise TypeError(f"batch must be a minitfm.Batch (collate_pairs / collate_lm build one), got {type(batch).__name__}")

    check_positive_int(steps, "steps")
    model = copy.deepcopy(model) if copy_model else model
    was_training = model.training
    model.eval()  # dropout off; gradients still flow
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = label_smoothed_cross_entropy(forward_batch(model, batch), batch.tgt_out, 0.0, ignore_index=batch.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.train(was_training)
    return losses


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _finite(tensors) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


@dataclass
class NonFiniteFinder:
    """Context manager: hooks on every submodule that record outputs (and, with ``backward=True``,
    gradients of outputs) containing NaN or Inf, in the order they happened.

    ``forward_hits`` holds ``(name, inputs_were_finite)`` pairs. ``first`` names the first module
    whose output went bad; if its inputs were still finite (``first_inputs_finite``) the NaN/Inf was
    born inside that module, otherwise in code between modules (a functional op in the parent).
    ``first_backward`` names the first module whose output gradient went bad during ``backward()``
    (backward runs from the loss towards the input). Containers (``ModuleList``) and the model itself
    are skipped: a leaf-most name is the useful answer.
    """

    model: nn.Module
    backward: bool = False
    forward_hits: list = field(default_factory=list)
    backward_hits: list = field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(self.model).__name__}")
        self._handles = []

    def _forward_hook(self, name: str):
        def grad_hook(grad):
            if not _finite([grad]):
                self.backward_hits.append(name)

        def hook(module, args, kwargs, output):
            outs = _tensors(output)
            if not _finite(outs):
                self.forward_hits.append((name, _finite(_tensors(list(args) + list(kwargs.values())))))
            if self.backward:
                for t in outs:
                    if t.requires_grad:
                        t.register_hook(grad_hook)
        return hook

    def __enter__(self) -> "NonFiniteFinder":
        for name, module in self.model.named_modules():
            if name and not isinstance(module, (nn.ModuleList, nn.ModuleDict, nn.Sequential)):
                self._handles.append(module.register_forward_hook(self._forward_hook(name), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @property
    def first(self) -> str | None:
        return self.forward_hits[0][0] if self.forward_hits else None

    @property
    def first_inputs_finite(self) -> bool | None:
        return self.forward_hits[0][1] if self.forward_hits else None

    @property
    def first_backward(self) -> str | None:
        return self.backward_hits[0] if self.backward_hits else None


def grad_norms(model: nn.Module) -> dict[str, float]:
    """L2 norm of the gradients of each module's own parameters: ``{module name: norm}``, in model order.

    Every module that directly owns parameters gets an entry (a tied matrix counts once, under the
    first module that owns it, e.g. ``tok_emb``); parameters without a gradient count as 0, so a
    layer cut off from the loss shows up as an exact 0.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    norms, seen = {}, set()
    for name, module in model.named_modules():
        params = [p for p in module.parameters(recurse=False) if id(p) not in seen]
        if not params:
            continue
        seen.update(id(p) for p in params)
        squares = [p.grad.detach().float().pow(2).sum() for p in params if p.grad is not None]
        norms[name or type(model).__name__] = float(torch.stack(squares).sum().sqrt()) if squares else 0.0
    return norms


@dataclass
class CausalityReport:
    """Result of :func:`check_causality`: ``max_change[t]`` is the largest change of output position
    t when every token after t was replaced; ``leaking`` lists positions above the tolerance."""

    max_change: list
    leaking: list

    @property
    def ok(self) -> bool:
        return not self.leaking


def check_causality(fn: Callable[[torch.Tensor], torch.Tensor], tokens: torch.Tensor, vocab_size: int, *,
                    atol: float = 1e-5, seed: int = 0) -> CausalityReport:
    """Check that output position t depends only on tokens 0..t.

    ``fn`` maps (B, T) ids to outputs (B, T, ...) (logits of a decoder-only model, or
    ``lambda tgt: model(src, tgt)`` for an encoder-decoder). For every cut t < T - 1 the tokens after
    t are replaced by random different ids and outputs 0..t are compared with the original run.
    """
    check_token_ids(tokens, "tokens", ndim=2)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        base = fn(tokens)
        if base.shape[:2] != tokens.shape:
            raise ValueError(f"fn must return (B, T, ...) = {tuple(tokens.shape)} + ..., got {tuple(base.shape)}")
        changes = []
        for t in range(tokens.shape[1] - 1):
            shift = torch.randint(1, vocab_size, tokens[:, t + 1:].shape, generator=gen)
            altered = tokens.clone()
            altered[:, t + 1:] = (tokens[:, t + 1:] + shift) % vocab_size  # always a different id
            changes.append(float((fn(altered)[:, : t + 1] - base[:, : t + 1]).abs().max()))
    return CausalityReport(changes, [t for t, c in enumerate(changes) if c > atol])


def attention_entropy(weights) -> dict[str, torch.Tensor]:
    """Mean entropy (nats) of each head's attention rows: ``{kind: (L, H)}``.

    ``weights`` is what :func:`minitfm.layers.attention_maps.attention_maps` accepts (a model's
    ``Intermediates``, a list of (B, H, T_q, T_k) per layer, or a dict of such lists). Averaged over
    batch and queries. Near 0: each query looks at one key (saturated softmax); near log T_k: uniform.
    """
    return {kind: torch.stack([entropy(w).mean(dim=(0, 2)) for w in layers])  # L x (B, H, T_q) -> (L, H)
            for kind, layers in attention_maps(weights).items()}
