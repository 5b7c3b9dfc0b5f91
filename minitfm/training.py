"""Training: learning-rate schedules, the label-smoothed loss, a small training loop and checkpoints.

Glossary: B batch, T target length, V vocab_size, D d_model; ``step`` counts optimizer updates from 1.

Schedules are plain functions of the step, so they can be plotted without building an optimizer;
the loop writes ``lr`` into the optimizer before every update.
"""
from __future__ import annotations

import contextlib
import math
import pickle
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import torch
from tqdm.auto import tqdm

from ._checks import check_choice, check_number, check_positive_int, check_probability, check_tensor
from .config import ModelConfig
from .data import Batch
from .models import DecoderOnlyLM, EncoderDecoder

SCHEDULES = ("noam", "cosine", "constant")


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Rises linearly for ``warmup`` steps, peaks at step = warmup with factor / sqrt(d_model * warmup),
    then decays like 1 / sqrt(step). Step 0 gives 0 (the limit of the linear warmup).
    """
    _check_schedule_args(step, d_model=d_model, warmup=warmup, factor=factor)
    if step <= 0:
        return 0.0
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def buggy_noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """A widely copied ``LambdaLR`` Noam with a sign slip: ``step * warmup ** 1.5`` instead of ``** -1.5``.

    The warmup term then always exceeds step^-0.5, ``min`` always picks the decay term, and there is no
    warmup at all: the largest learning rate of the whole run comes at step 1. Kept for plotting only.
    """
    _check_schedule_args(step, d_model=d_model, warmup=warmup, factor=factor)
    step = max(step, 1)  # LambdaLR calls the lambda with 0 first; copies patch it like this
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** 1.5)


def warmup_cosine_lr(step: int, peak_lr: float, warmup: int, total_steps: int, min_lr: float = 0.0) -> float:
    """Linear warmup from 0 to ``peak_lr`` over ``warmup`` steps, then a half cosine down to ``min_lr``
    at ``total_steps`` (and ``min_lr`` after that)."""
    _check_schedule_args(step, warmup=warmup, total_steps=total_steps)
    check_number(peak_lr, "peak_lr", low=0.0, low_open=True)
    check_number(min_lr, "min_lr", low=0.0, high=peak_lr)
    if step < warmup:
        return peak_lr * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _check_schedule_args(step, **positive) -> None:
    """A schedule's step is an int >= 0; its sizes (d_model, warmup, total_steps) are ints >= 1."""
    check_number(step, "step", low=0, integer=True)
    for name, value in positive.items():
        if name == "factor":
            check_number(value, "factor", low=0.0, low_open=True)
        else:
            check_positive_int(value, name)


def label_smoothed_cross_entropy(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.0,
                                 ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy against a smoothed target: 1 - smoothing on the right id, plus smoothing
    spread evenly over all V ids (the same convention as ``F.cross_entropy(label_smoothing=...)``).

    Args:
        logits: (..., V) unnormalised scores.
        target: (...) integer ids; positions equal to ``ignore_index`` (padding) do not count.
    """
    check_tensor(logits, "logits", floating=True)
    check_tensor(target, "target")
    check_probability(smoothing, "smoothing")
    check_number(ignore_index, "ignore_index", integer=True)
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
    if smoothing == 0.0:  # the same number as the formula below, without computing a term it multiplies by 0
        return nll[keep].mean()
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
        check_number(self.lr, "lr", low=0.0, low_open=True)
        check_number(self.eps, "eps", low=0.0, low_open=True)
        check_number(self.min_lr, "min_lr", low=0.0, high=self.lr)
        check_number(self.weight_decay, "weight_decay", low=0.0)
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {self.betas!r}")
        for i, beta in enumerate(self.betas):
            check_number(beta, f"betas[{i}]", low=0.0, high=1.0, high_open=True)
        if self.clip_norm is not None:
            check_number(self.clip_norm, "clip_norm", low=0.0, low_open=True)
        if self.autocast_dtype is not None and not isinstance(self.autocast_dtype, torch.dtype):
            raise TypeError(f"autocast_dtype must be a torch.dtype such as torch.bfloat16 (or None), "
                            f"got {type(self.autocast_dtype).__name__} {self.autocast_dtype!r}")
        if self.autocast_dtype is not None and not self.autocast_dtype.is_floating_point:
            raise ValueError(f"autocast_dtype must be a floating dtype, got {self.autocast_dtype}")
        check_number(self.seed, "seed", integer=True)

    def lr_at(self, step: int) -> float:
        """The learning rate of update ``step`` (1-based)."""
        if self.schedule == "noam":  # the paper's shape, rescaled so that its peak equals lr
            return self.lr * noam_lr(step, 1, self.warmup) / noam_lr(self.warmup, 1, self.warmup)
        if self.schedule == "cosine":
            return warmup_cosine_lr(step, self.lr, self.warmup, self.steps, self.min_lr)
        return self.lr * min(1.0, step / self.warmup)

    @classmethod
    def copy_task(cls, **overrides) -> "TrainConfig":
        """The settings chapter 7 and ``benchmarks/copy_task.py`` use with ``ModelConfig.copy_task()``."""
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
    check_number(seed, "seed", integer=True)
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
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if next(model.parameters(), None) is None:
        raise ValueError(f"model {type(model).__name__} has no parameters to train")
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if isinstance(batches, (torch.Tensor, str, bytes)) or not hasattr(batches, "__iter__"):
        raise TypeError(f"batches must be an iterable of minitfm.Batch (e.g. CopyTask.batches(...) or "
                        f"random_batches(...)), got {type(batches).__name__}")
    device = next(model.parameters()).device
    torch.manual_seed(config.seed)  # dropout masks: same seed, same run
    # foreach=True updates all tensors with a few multi-tensor operations instead of a loop of small ones per
    # tensor (PyTorch picks it by default on GPUs only); the arithmetic, and every result, is the same.
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=config.lr, betas=config.betas,
                                              eps=config.eps, weight_decay=config.weight_decay, foreach=True)
    history, stream = History(), iter(batches)
    model.train()
    bar = tqdm(range(1, config.steps + 1), desc="training", disable=not progress, mininterval=0.5)
    for step in bar:
        batch = next(stream, None)
        if batch is None:  # a bare StopIteration would not say what went wrong
            raise ValueError(f"batches ran out after {step - 1} updates; config.steps={config.steps} needs "
                             "an iterable at least that long (e.g. CopyTask.batches, which never ends)")
        if not isinstance(batch, Batch):
            raise TypeError(f"batches must yield minitfm.Batch objects (collate_pairs / collate_lm build them), "
                            f"got a {type(batch).__name__} at update {step}")
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
    """Save the model class name, its config (plain values), its dtype and its weights."""
    if type(model).__name__ not in MODEL_CLASSES:
        raise TypeError(f"save_checkpoint saves {tuple(MODEL_CLASSES)}, got {type(model).__name__}")
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    if isinstance(path, (str, Path)) and not Path(path).parent.is_dir():
        raise ValueError(f"cannot save {path}: the folder {Path(path).parent} does not exist")
    torch.save({"kind": type(model).__name__, "config": model.config.to_dict(), "dtype": dtype,
                "state_dict": model.state_dict()}, path)


def _checkpoint_device(map_location) -> torch.device:
    """The device a checkpoint is rebuilt on (checked before anything is read)."""
    if not isinstance(map_location, (str, torch.device)):
        raise TypeError(f"map_location must be a device name such as 'cpu' or 'cuda', got {type(map_location).__name__}")
    try:
        device = torch.device(map_location)
    except RuntimeError as err:
        raise ValueError(f"map_location {map_location!r} is not a device name ({err})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"map_location={map_location!r} but this machine has no CUDA device; use 'cpu'")
    if device.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"map_location={map_location!r} but MPS is not available here; use 'cpu'")
    return device


def _read_checkpoint(path, device: torch.device) -> dict:
    """torch.load with safe unpickling, turning every failure into an error that names the file."""
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory, not a checkpoint file")
    try:
        data = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError:
        raise ValueError(f"refused to load {path}: it holds Python objects other than tensors and plain values, "
                         "which could run code when loaded. minitfm checkpoints (save_checkpoint) never do; "
                         "only load files you made or trust, and re-save them with save_checkpoint") from None
    except (EOFError, RuntimeError, OSError) as err:
        raise ValueError(f"{path} is not a readable checkpoint (empty, truncated or not made by torch.save): "
                         f"{type(err).__name__}: {str(err)[:120] or 'no data'}") from None
    if not isinstance(data, dict) or "kind" not in data or "state_dict" not in data:
        keys = sorted(map(str, data))[:4] if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path} is not a minitfm checkpoint (no 'kind'/'config'/'state_dict'; found {keys}). "
                         "A bare state_dict loads into a model you build yourself: model.load_state_dict(...)")
    if data["kind"] not in MODEL_CLASSES:
        raise ValueError(f"{path} holds an unknown model kind {data['kind']!r}; expected one of {tuple(MODEL_CLASSES)}")
    return data


def load_checkpoint(path, map_location="cpu") -> torch.nn.Module:
    """Rebuild a model saved by :func:`save_checkpoint` with safe loading (``weights_only=True``).

    The model comes back in eval mode, on ``map_location``, in the dtype it was saved in (an fp16 or bf16
    model round-trips bit for bit). Every failure (missing, empty, truncated or unsafe file, a bare
    state_dict, an unknown kind, weights that do not fit the config) raises an error naming the file.
    """
    device = _checkpoint_device(map_location)
    data = _read_checkpoint(path, device)
    try:
        config = ModelConfig.from_dict(data["config"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: its config is not a valid ModelConfig ({err})") from None
    dtype = getattr(torch, data.get("dtype", ""), None) if "dtype" in data else next(
        (t.dtype for t in data["state_dict"].values() if t.is_floating_point()), torch.float32)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{path}: unknown dtype {data['dtype']!r}")
    # load_state_dict copies into the model's parameters wherever they are, so build the model on the
    # requested device and in the saved dtype (building it there also keeps the tied embedding/head one matrix).
    with torch.device(device):
        model = MODEL_CLASSES[data["kind"]](config).to(dtype)
    try:
        model.load_state_dict(data["state_dict"])
    except RuntimeError as err:
        raise ValueError(f"{path}: the weights do not fit its config ({str(err)[:300]})") from None
    return model.eval()
