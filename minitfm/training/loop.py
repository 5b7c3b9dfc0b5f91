"""Training: learning-rate schedules, the label-smoothed loss, a small training loop and checkpoints.

Glossary: B batch, T target length, V vocab_size, D d_model; ``step`` counts optimizer updates from 1.

Schedules are plain functions of the step, so they can be plotted without building an optimizer;
the loop writes ``lr`` into the optimizer before every update.
"""
from __future__ import annotations

import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

import torch
from tqdm.auto import tqdm

from minitfm._checks import check_choice, check_number, check_positive_int, check_probability
from minitfm.data import Batch
from minitfm.layers.masks import block_diagonal_mask
from minitfm.models import EncoderDecoder
from minitfm.training.losses import label_smoothed_cross_entropy
from minitfm.training.optimizers import OPTIMIZERS, build_optimizer
from minitfm.training.schedules import SCHEDULES, noam_lr, warmup_cosine_lr


@dataclass
class TrainConfig:
    """Optimisation settings: by default the paper's recipe (Adam, betas 0.9 and 0.98, eps 1e-9, no weight decay).

    ``optimizer="adamw"`` is AdamW with decoupled weight decay on the Linear matrices only (not on norms, biases
    or embeddings); ``"adam"`` adds ``weight_decay`` to the gradient (L2). :mod:`minitfm.training.optimizers`
    says which parameters decay and why the two differ; :func:`lm_train_config` is the language models' recipe.
    """

    steps: int = 1000  # optimizer updates
    batch_size: int = 64  # examples per batch (used by whoever builds the batches)
    lr: float = 1e-3  # peak learning rate, whatever the schedule
    schedule: str = "noam"  # "noam" (scaled to peak at lr), "cosine" (warmup + cosine) or "constant" (warmup + flat)
    warmup: int = 100  # steps of linear warmup
    min_lr: float = 0.0  # end of the cosine
    optimizer: str = "adam"  # "adam" (the paper's; weight decay as L2) or "adamw" (decoupled, Linear matrices only)
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
        check_choice(self.optimizer, "optimizer", OPTIMIZERS)
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


def lm_train_config(**overrides) -> TrainConfig:
    """The language models' pretraining recipe: AdamW with decoupled weight decay 0.1 on the Linear matrices (none
    on norms, biases and embeddings), betas (0.9, 0.95), eps 1e-8, gradients clipped at norm 1, warmup then a
    cosine down to a tenth of the peak learning rate, no label smoothing; ``overrides`` are other TrainConfig
    fields (``min_lr`` follows an overridden ``lr`` unless given too).

    The numbers are GPT-3's (Brown et al., 2020, appendix B: Adam with betas 0.9 and 0.95, eps 1e-8, weight decay
    0.1, clipping at 1.0, cosine to 10% of the peak) and Llama 2's (Touvron et al., 2023: AdamW, betas 0.9 and
    0.95, weight decay 0.1, clipping at 1.0, cosine to 10%); nanoGPT's ``train.py`` uses the same weight decay,
    betas and clipping. Chapter 7 keeps the paper's recipe (``TrainConfig()``'s defaults) for the copy task.
    """
    base = dict(optimizer="adamw", weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8, clip_norm=1.0, schedule="cosine",
                label_smoothing=0.0)
    base = {**base, **overrides}
    lr = base.get("lr", TrainConfig.lr)
    if "min_lr" not in base and isinstance(lr, (int, float)) and not isinstance(lr, bool):
        # a tenth, rounded to 12 digits: 3e-4 for lr 3e-3, as one would write it (lr / 10 is 3.0000000000000003e-4)
        base["min_lr"] = float(f"{lr / 10:.12g}")  # a bad lr is left for TrainConfig to reject by name
    return TrainConfig(**base)


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
        if batch.segments is not None or batch.positions is not None:
            raise ValueError("packed batches (segments, positions) are for decoder-only models, not an EncoderDecoder")
        return model(batch.src, batch.tgt_in)
    if batch.segments is None and batch.positions is None:
        return model(batch.tgt_in)
    attn_mask = None if batch.segments is None else block_diagonal_mask(batch.segments)
    return model(batch.tgt_in, positions=batch.positions, attn_mask=attn_mask)


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

    Builds the optimizer ``config.optimizer`` names (Adam or AdamW, see ``build_optimizer``) unless one is
    given, sets each update's learning rate from
    ``config.lr_at(step)``, clips gradients, shows a tqdm bar and calls every callback with the history
    after each update; a callback that returns ``True`` stops training (live plots, early stopping).
    The model comes back in eval mode, whatever mode it came in (a new module starts in training mode, and
    what follows training is evaluation: dropout off); call ``model.train()`` to go on training it by hand.
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
    optimizer = optimizer or build_optimizer(model, config)
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


