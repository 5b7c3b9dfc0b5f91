"""Training: learning-rate schedules, the label-smoothed loss, a small training loop and checkpoints.

Glossary: B batch, T target length, V vocab_size, D d_model; ``step`` counts optimizer updates from 1.

Schedules are plain functions of the step, so they can be plotted without building an optimizer;
the loop writes ``lr`` into the optimizer before every update.
"""
from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

import torch
from tqdm.auto import tqdm

from ._checks import check_choice, check_positive_int, check_probability, check_tensor
from .config import ModelConfig
from .data import Batch
from .models import DecoderOnlyLM, EncoderDecoder

SCHEDULES = ("noam", "cosine", "constant")


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Rises linearly for ``warmup`` steps, peaks at step = warmup with factor / sqrt(d_model * warmup),
    then decays like 1 / sqrt(step). Step 0 gives 0 (the limit of the linear warmup).
    """
    if step <= 0:
        return 0.0
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def buggy_noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """A widely copied ``LambdaLR`` Noam with a sign slip: ``step * warmup ** 1.5`` instead of ``** -1.5``.

    The warmup term then always exceeds step^-0.5, ``min`` always picks the decay term, and there is no
    warmup at all: the largest learning rate of the whole run comes at step 1. Kept for plotting only.
    """
    step = max(step, 1)  # LambdaLR calls the lambda with 0 first; copies patch it like this
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** 1.5)


def warmup_cosine_lr(step: int, peak_lr: float, warmup: int, total_steps: int, min_lr: float = 0.0) -> float:
    """Linear warmup from 0 to ``peak_lr`` over ``warmup`` steps, then a half cosine down to ``min_lr``
    at ``total_steps`` (and ``min_lr`` after that)."""
    if step < warmup:
        return peak_lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def label_smoothed_cross_entropy(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.0,
                                 ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy against a smoothed target: 1 - smoothing on the right id, plus smoothing
    spread evenly over all V ids (the same convention as ``F.cross_entropy(label_smoothing=...)``).

    Args:
        logits: (..., V) unnormalised scores.
        target: (...) integer ids; positions equal to ``ignore_index`` (padding) do not count.
    """
    check_tensor(logits, "logits", floating=True)
    check_probability(smoothing, "smoothing")
    if target.shape != logits.shape[:-1]:
        raise ValueError(f"target must have shape logits.shape[:-1] = {tuple(logits.shape[:-1])}, "
                         f"got {tuple(target.shape)}")
    if target.is_floating_point() or target.dtype == torch.bool:
        raise TypeError(f"target must hold integer ids, got dtype {target.dtype}")
    keep = target != ignore_index  # (...)
    if not keep.any():
        raise ValueError("every target position equals ignore_index: there is nothing to learn from")
    low, high = int(target[keep].min()), int(target[keep].max())
    if low < 0 or high >= logits.shape[-1]:  # the clamp below would silently score a -1 as id 0
        raise ValueError(f"target ids must be in [0, V={logits.shape[-1]}) or ignore_index={ignore_index}, "
                         f"got min {low}, max {high}")
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (..., V)
    nll = -log_probs.gather(-1, target.clamp(min=0)[..., None])[..., 0]  # (...) -log p(right id)
    uniform = -log_probs.mean(dim=-1)  # (...) cross-entropy against the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return loss[keep].mean()


@dataclass
class TrainConfig:
    """Optimisation settings (Adam with the paper's betas and eps by default)."""

    steps: int = 1000  # optimizer updates
    batch_size: int = 64  # examples per batch (used by whoever builds the batches)
    lr: float = 1e-3  # peak learning rate, whatever the schedule
    schedule: str = "noam"  # "noam" (scaled to peak at lr), "cosine" (warmup + cosine) or "constant" (warmup + flat)
    warmup: int = 100  # steps of linear warmup
    min_lr: float = 0.0  # end of the cosine
    betas: tuple = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: Optional[float] = 1.0  # max gradient norm; None = no clipping (the norm is still recorded)
    autocast_dtype: Optional[torch.dtype] = None  # e.g. torch.bfloat16 for mixed precision
    seed: int = 0

    def __post_init__(self):
        for name in ("steps", "batch_size", "warmup"):
            check_positive_int(getattr(self, name), name)
        check_choice(self.schedule, "schedule", SCHEDULES)
        check_probability(self.label_smoothing, "label_smoothing")
        if self.lr <= 0 or self.eps <= 0:
            raise ValueError(f"lr and eps must be > 0, got lr={self.lr}, eps={self.eps}")
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError(f"clip_norm must be > 0 or None, got {self.clip_norm}")

    def lr_at(self, step: int) -> float:
        """The learning rate of update ``step`` (1-based)."""
        if self.schedule == "noam":  # the paper's shape, rescaled so that its peak equals lr
            return self.lr * noam_lr(step, 1, self.warmup) / noam_lr(self.warmup, 1, self.warmup)
        if self.schedule == "cosine":
            return warmup_cosine_lr(step, self.lr, self.warmup, self.steps, self.min_lr)
        return self.lr * min(1.0, step / self.warmup)

    @classmethod
    def copy_task(cls, **overrides) -> "TrainConfig":
        """The settings chapter 6 and ``benchmarks/copy_task.py`` use with ``ModelConfig.copy_task()``."""
        base = dict(steps=240, batch_size=128, lr=5e-3, schedule="cosine", warmup=50, label_smoothing=0.0)
        return cls(**{**base, **overrides})


@dataclass
class History:
    """Per-step records of a run; ``seconds`` is the total wall time of the updates."""

    step: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    tokens_per_s: list = field(default_factory=list)
    seconds: float = 0.0


def set_seed(seed: int) -> None:
    """Seed Python's and PyTorch's generators (call before building the model for identical runs)."""
    random.seed(seed)
    torch.manual_seed(seed)


def forward_batch(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """Logits (B, T, V) of either model kind for a :class:`Batch`."""
    if isinstance(model, EncoderDecoder):
        if batch.src is None:
            raise ValueError("an EncoderDecoder needs batch.src; this batch has none (decoder-only data?)")
        return model(batch.src, batch.tgt_in)
    return model(batch.tgt_in)


def _update(model, optimizer, batch: Batch, config: TrainConfig) -> tuple[float, float]:
    device_type = batch.tgt_in.device.type
    autocast = (torch.autocast(device_type, dtype=config.autocast_dtype) if config.autocast_dtype is not None
                else contextlib.nullcontext())
    with autocast:
        logits = forward_batch(model, batch)
    loss = label_smoothed_cross_entropy(logits, batch.tgt_out, config.label_smoothing, ignore_index=batch.pad_id)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    max_norm = config.clip_norm if config.clip_norm is not None else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # the norm before clipping
    optimizer.step()
    return loss.item(), grad_norm.item()


def train(model: torch.nn.Module, batches: Iterable[Batch], config: TrainConfig, *, optimizer=None,
          callbacks: Sequence[Callable[[History], Optional[bool]]] = (), progress: bool = True) -> History:
    """Train for ``config.steps`` updates on ``batches`` (an iterable of :class:`Batch`, at least that long).

    Builds Adam from ``config`` unless an optimizer is given, sets each update's learning rate from
    ``config.lr_at(step)``, clips gradients, shows a tqdm bar and calls every callback with the history
    after each update; a callback that returns ``True`` stops training (live plots, early stopping).
    """
    device = next(model.parameters()).device
    torch.manual_seed(config.seed)  # dropout masks: same seed, same run
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=config.lr, betas=config.betas,
                                              eps=config.eps, weight_decay=config.weight_decay)
    history, stream = History(), iter(batches)
    model.train()
    bar = tqdm(range(1, config.steps + 1), desc="training", disable=not progress, mininterval=0.5)
    for step in bar:
        batch = next(stream, None)
        if batch is None:  # a bare StopIteration would not say what went wrong
            raise ValueError(f"batches ran out after {step - 1} updates; config.steps={config.steps} needs "
                             "an iterable at least that long (e.g. CopyTask.batches, which never ends)")
        batch = batch.to(device)
        lr = config.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        start = time.perf_counter()
        loss, grad_norm = _update(model, optimizer, batch, config)
        elapsed = time.perf_counter() - start
        history.seconds += elapsed
        for name, value in (("step", step), ("loss", loss), ("lr", lr), ("grad_norm", grad_norm),
                            ("tokens_per_s", batch.n_tokens / elapsed)):
            getattr(history, name).append(value)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", refresh=False)
        if any([bool(callback(history)) for callback in callbacks]):
            break
    model.eval()
    return history


MODEL_CLASSES = {"EncoderDecoder": EncoderDecoder, "DecoderOnlyLM": DecoderOnlyLM}


def save_checkpoint(path, model: torch.nn.Module) -> None:
    """Save the model class name, its config (plain values) and its weights."""
    if type(model).__name__ not in MODEL_CLASSES:
        raise TypeError(f"save_checkpoint saves {tuple(MODEL_CLASSES)}, got {type(model).__name__}")
    torch.save({"kind": type(model).__name__, "config": model.config.to_dict(),
                "state_dict": model.state_dict()}, path)


def load_checkpoint(path, map_location="cpu") -> torch.nn.Module:
    """Rebuild a model saved by :func:`save_checkpoint` with safe loading (``weights_only=True``);
    the model comes back in eval mode, on ``map_location`` when that names a device."""
    data = torch.load(path, map_location=map_location, weights_only=True)
    # load_state_dict copies into the model's parameters wherever they are, so build the model on the
    # requested device (building it there also keeps the tied embedding/head one matrix).
    device = map_location if isinstance(map_location, (str, torch.device)) else "cpu"
    with torch.device(device):
        model = MODEL_CLASSES[data["kind"]](ModelConfig.from_dict(data["config"]))
    model.load_state_dict(data["state_dict"])
    return model.eval()
