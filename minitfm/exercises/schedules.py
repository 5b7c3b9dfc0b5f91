"""Checkers for learning-rate schedules: Noam (the paper's) and linear warmup + cosine decay.

A schedule is checked at many steps at once: one case per setting, and the message names the first step
whose rate differs.
"""
from __future__ import annotations

import math

from minitfm.exercises._core import Case, CheckResult, Mistake, run_cases
from minitfm.training.schedules import buggy_noam_lr, noam_lr, warmup_cosine_lr


def _curve(schedule, steps, *args):
    return [float(schedule(step, *args)) for step in steps]


def _compare(got, expected_and_steps):
    expected, steps = expected_and_steps
    for step, g, e in zip(steps, got, expected):
        if math.isnan(g) or abs(g - e) > 1e-12 + 1e-6 * abs(e):
            return f"at step {step} your rate is {g:.6g}, expected {e:.6g}"
    return None


def _case(what, steps, schedule, args, mistakes) -> Case:
    """The runner calls ``curve(steps, *args)``: the student's schedule at every step of the case."""
    expected = (_curve(schedule, steps, *args), steps)
    make = lambda: {"steps": list(steps), **{f"arg{j}": a for j, a in enumerate(args)}}  # noqa: E731
    return Case(what, make, expected,
                [Mistake(m, lambda i, f=f: (_curve(f, *i.values()), i["steps"])) for m, f in mistakes],
                compare=_compare)


def _run(name, fn, cases, verbose):
    curve = (lambda steps, *args: _curve(fn, steps, *args)) if callable(fn) else fn
    return run_cases(name, curve, cases, verbose=verbose)


def check_noam(noam, verbose: bool = True) -> CheckResult:
    """Check ``noam(step, d_model, warmup) -> float``: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    The rate rises linearly for ``warmup`` steps, peaks at ``step = warmup`` and then decays like
    1/sqrt(step). Step 0 must give 0 (the limit of the warmup), not a ZeroDivisionError.
    """
    steps = [1, 2, 10, 99, 100, 101, 400, 4000]
    mistakes = [
        ("there is no warmup: your largest rate comes at step 1. The warmup term is step * warmup ** -1.5 "
         "(a negative exponent); with ** 1.5 min() always picks the decay", buggy_noam_lr),
        ("you use max() where the schedule takes min(): the rate must rise during warmup, then decay",
         lambda s, d, w: d ** -0.5 * max(s ** -0.5, s * w ** -1.5)),
        ("the d_model^-0.5 factor is missing", lambda s, d, w: min(s ** -0.5, s * w ** -1.5)),
    ]
    cases = [_case("d_model=512, warmup=100, steps 1..4000", steps, noam_lr, (512, 100), mistakes),
             _case("d_model=64, warmup=4000 (the paper's), steps 1..4000", steps, noam_lr, (64, 4000), mistakes),
             _case("step 0 gives 0", [0], noam_lr, (512, 100), mistakes)]
    return _run("check_noam", noam, cases, verbose)


def check_warmup_cosine(warmup_cosine, verbose: bool = True) -> CheckResult:
    """Check ``warmup_cosine(step, peak_lr, warmup, total_steps, min_lr) -> float``.

    Linear warmup ``peak_lr * step / warmup`` for ``step < warmup``; then a half cosine from ``peak_lr``
    down to ``min_lr`` over the remaining ``total_steps - warmup`` steps; ``min_lr`` after ``total_steps``.
    """
    def cosine(s, p, w, t, m, *, progress=None, half=0.5, clamp=True, floor=True):
        if s < w:
            return p * s / w
        x = (s - w) / max(1, t - w) if progress is None else progress(s, w, t)
        x = min(1.0, x) if clamp else x
        low = m if floor else 0.0
        return low + (p - low) * half * (1 + math.cos(math.pi * x))

    mistakes = [
        ("the cosine runs over total_steps instead of the total_steps - warmup steps after the warmup, so it "
         "has not reached min_lr at total_steps", lambda *a: cosine(*a, progress=lambda s, w, t: s / t)),
        ("your rate climbs back up after total_steps: hold min_lr once the cosine is done",
         lambda *a: cosine(*a, clamp=False)),
        ("min_lr is ignored: the cosine must end at min_lr, not 0", lambda *a: cosine(*a, floor=False)),
        ("the warmup is off by one: at step s < warmup the rate is peak_lr * s / warmup (0 at step 0)",
         lambda s, p, w, t, m: p * (s + 1) / w if s < w else warmup_cosine_lr(s, p, w, t, m)),
    ]
    steps = [0, 1, 5, 10, 11, 30, 55, 99, 100, 130]
    cases = [_case("peak 1e-3, warmup 10, total 100, min 1e-4", steps, warmup_cosine_lr, (1e-3, 10, 100, 1e-4),
                   mistakes),
             _case("peak 0.5, warmup 1, total 7 (odd), min 0", [0, 1, 2, 4, 7, 9], warmup_cosine_lr,
                   (0.5, 1, 7, 0.0), mistakes),
             _case("peak 2e-3, warmup 25, total 200, min 2e-4, long after the end", [24, 25, 26, 112, 200, 1000],
                   warmup_cosine_lr, (2e-3, 25, 200, 2e-4), mistakes)]
    return _run("check_warmup_cosine", warmup_cosine, cases, verbose)
