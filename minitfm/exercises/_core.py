"""The case runner shared by every checker, and the words its feedback uses.

A checker builds a list of :class:`Case` objects (fresh inputs, the expected answer from the library, and
the typical mistakes as transformed references), then calls :func:`run_cases`. The runner calls the
student's function on each case in order and stops at the first failure, which it explains:

1. the function raised ``NotImplementedError``: "not implemented yet" (the stub in the notebook);
2. it raised anything else: the exception's type and message, plus a hint for a few common ones;
3. it changed one of its inputs in place;
4. its answer equals one of the case's known mistakes: that mistake, in words;
5. otherwise the first thing that differs: type, shape, dtype, NaN/Inf, or the first differing value
   (worded in ``_feedback.py``).

Feedback is printed (stdout works in Colab, Jupyter and a terminal) and returned as a
:class:`CheckResult`. Nothing is raised on a student's mistake. With the environment variable
``MINITFM_CHECK_LOG=path`` set, every verdict is also appended to ``path`` as one JSON line, which is what
``tools/grade.py`` collects. The reference code is never printed: messages describe outputs only.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from minitfm.exercises._feedback import describe_difference, explain_exception

PASS, FAIL, TODO = "✓", "✗", "…"
LOG_ENV = "MINITFM_CHECK_LOG"


@dataclass
class Mistake:
    """A typical wrong answer: ``answer(inputs)`` computes what that mistake returns."""

    message: str
    answer: Callable[[dict], Any]
    atol: float | None = None  # looser than the case's when the mistake's own rounding differs


@dataclass
class Case:
    """One call of the student's function.

    ``make_inputs()`` returns fresh keyword arguments every time (so one call cannot spoil the next);
    ``expected`` is the right answer; ``compare(got, expected)`` may replace the default comparison.
    """

    description: str
    make_inputs: Callable[[], dict]
    expected: Any
    mistakes: Sequence[Mistake] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    compare: Callable[[Any, Any], str | None] | None = None
    after_call: Callable[[dict, Any], str | None] | None = None  # extra check, e.g. "buffers written"
    normalize: Callable[[Any], Any] | None = None  # applied to the answer first, e.g. drop a leading 1
    may_change: Sequence[str] = ()  # inputs the function is meant to write into (a cache's buffers)


@dataclass
class CheckResult:
    """What a checker returns: ``passed``, the ``message`` it printed, and where it stopped."""

    checker: str
    passed: bool
    message: str
    n_cases: int
    status: str = "pass"  # "pass", "fail" or "not implemented"
    failed_case: str | None = None
    details: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"CheckResult({self.checker}: {self.status})"

    def _ipython_display_(self) -> None:
        pass  # the message was printed already; a notebook cell ending in check_x(f) shows it once


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num()) \
            and torch.equal(a.isnan(), b.isnan())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return True  # modules, functions, numbers: not checked for mutation


def _matches(got, mistake_answer, case: Case, atol: float | None = None) -> bool:
    try:
        if case.compare is not None:
            return case.compare(got, mistake_answer) is None
        return describe_difference(got, mistake_answer, atol=atol or case.atol, rtol=case.rtol) is None
    except Exception:  # a mistake that cannot be compared is simply not this mistake
        return False


def _call(fn, inputs: dict):
    # Positional, in the order the docstring documents: students name their parameters as they like.
    return fn(*inputs.values())


def _check_one(fn, case: Case) -> str | None:
    inputs = case.make_inputs()
    before = _clone(inputs)
    got = _call(fn, inputs)  # exceptions are handled by the caller
    for key, value in inputs.items():
        if key not in case.may_change and not _same(value, before[key]):
            return (f"your function changed its input `{key}` in place; return a new tensor instead "
                    "(the caller may still need the original)")
    if case.normalize is not None:
        got = case.normalize(got)
    compare = case.compare or (lambda g, e: describe_difference(g, e, atol=case.atol, rtol=case.rtol))
    problem = compare(got, case.expected)
    if problem is None:  # the answer is right; the extra check (e.g. "buffers written") has the last word
        return case.after_call(inputs, got) if case.after_call is not None else None
    for mistake in case.mistakes:
        if _matches(got, mistake.answer(before), case, mistake.atol):
            return mistake.message
    return problem


def run_cases(checker: str, fn, cases: Sequence[Case], *, verbose: bool = True) -> CheckResult:
    """Call ``fn`` on every case, stop at the first failure, print and return the verdict."""
    if not callable(fn):
        result = CheckResult(checker, False, f"{FAIL} {checker}: pass your function itself (without calling it), "
                             f"got a {type(fn).__name__}", len(cases), "fail")
        return _finish(result, verbose)
    for number, case in enumerate(cases, start=1):
        try:
            with torch.random.fork_rng(devices=[]):  # reproducible for a function that draws random numbers,
                torch.manual_seed(number)  # and the caller's random state stays as it was
                problem = _check_one(fn, case)
        except NotImplementedError:
            message = f"{TODO} {checker}: not implemented yet: write your function above, then run this cell again"
            return _finish(CheckResult(checker, False, message, len(cases), "not implemented"), verbose)
        except Exception as err:  # any error is the student's to see, without a traceback
            problem = explain_exception(err)
        if problem is not None:
            message = (f"{FAIL} {checker}: case {number} of {len(cases)} fails ({case.description})\n"
                       f"  {problem}")
            return _finish(CheckResult(checker, False, message, len(cases), "fail", case.description), verbose)
    message = f"{PASS} {checker}: all {len(cases)} cases pass"
    return _finish(CheckResult(checker, True, message, len(cases)), verbose)


def _finish(result: CheckResult, verbose: bool) -> CheckResult:
    if verbose:
        print(result.message)
    path = os.environ.get(LOG_ENV)
    if path:
        record = {"checker": result.checker, "passed": result.passed, "status": result.status,
                  "cases": result.n_cases, "failed_case": result.failed_case, "message": result.message}
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record, ensure_ascii=False) + "\n")
    return result


def randn(*shape, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Seeded normal numbers, so every case is the same on every machine."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
