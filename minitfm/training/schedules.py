"""Learning-rate schedules (chapters 7 and 7b): the original Transformer's, and warmup then cosine."""
from __future__ import annotations

import math

from minitfm._checks import check_number, check_positive_int


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

