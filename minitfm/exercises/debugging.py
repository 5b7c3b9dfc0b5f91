"""Checkers for two debugging tools: find the first non-finite module, and find positions that see the future."""
from __future__ import annotations

import torch
from torch import nn

from minitfm.exercises._core import Case, CheckResult, Mistake, randn, run_cases


class _Log(nn.Module):
    def forward(self, x):
        return torch.log(x)  # NaN for negative inputs


class _Exp(nn.Module):
    def forward(self, x):
        return torch.exp(x)  # inf for inputs above ~89


class _Scale(nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


class _Registered(nn.Module):
    """``late`` is registered first but runs second."""

    def __init__(self):
        super().__init__()
        self.late = _Exp()
        self.early = _Log()

    def forward(self, x):
        return self.late(self.early(x))  # NaN born in `early`, carried through `late`


def _bad(t, nan_only):
    return bool(t.isnan().any()) if nan_only else not bool(torch.isfinite(t).all())


def _find(model, x, *, nan_only=False, last=False, registration_order=False):
    hits, handles = [], []
    names = {m: n for n, m in model.named_modules()}
    for name, module in model.named_modules():
        if name and not isinstance(module, (nn.Sequential, nn.ModuleList)):
            hook = lambda m, a, out, n=name: hits.append(n) if _bad(out, nan_only) else None  # noqa: E731
            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    if registration_order:
        order = list(names.values())
        hits = sorted(set(hits), key=order.index)
    return (hits[-1] if last else hits[0]) if hits else None


def _hooks_left(model):
    if any(m._forward_hooks for m in model.modules()):
        return "you left forward hooks on the model: keep the handles and call handle.remove() before returning"
    return None


def check_first_nonfinite(first_nonfinite, verbose: bool = True) -> CheckResult:
    """Check ``first_nonfinite(model, x) -> str | None``.

    Run ``model(x)`` once and return the name (as in ``model.named_modules()``) of the first submodule, in
    the order the modules ran, whose output holds NaN or Inf; ``None`` when every output is finite.
    Containers (``nn.Sequential``) and the model itself are not reported. Remove your hooks before returning.
    """
    mistakes = [
        Mistake("you look for NaN only; Inf is not finite either: test with torch.isfinite",
                lambda i: _find(*i.values(), nan_only=True)),
        Mistake("you report modules in the order they were registered, not the order they ran: record names "
                "inside forward hooks, as they fire", lambda i: _find(*i.values(), registration_order=True)),
        Mistake("you return the last module whose output went bad; the first one is where the problem starts",
                lambda i: _find(*i.values(), last=True)),
        Mistake("when every output is finite, return None", lambda i: ""),
    ]

    def case(what, build, x):
        def make():
            with torch.random.fork_rng(devices=[]):  # the same weights every time, the caller's RNG untouched
                torch.manual_seed(0)
                return {"model": build(), "x": x.clone()}
        return Case(what, make, _find(*make().values()), mistakes, after_call=lambda i, got: _hooks_left(i["model"]))

    x = randn(2, 4, seed=1)
    cases = [
        case("a log of negative numbers makes NaN in module '1'", lambda: nn.Sequential(
            nn.Linear(4, 4), _Log(), nn.Linear(4, 4)), x),
        case("every output finite", lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), x),
        case("Inf (not NaN) from an exp of large values, then NaN later", lambda: nn.Sequential(
            _Scale(1000.0), _Exp(), _Scale(0.0)), x.abs() + 1),
        case("modules registered in another order than they run", _Registered, -x.abs() - 1),
        case("a nested model: the bad module is 'encoder.1'", _nested, x),
    ]
    return run_cases("check_first_nonfinite", first_nonfinite, cases, verbose=verbose)


def _nested():
    model = nn.Module()
    model.encoder = nn.Sequential(nn.Linear(4, 4), _Log())
    model.head = nn.Linear(4, 4)
    model.forward = lambda x: model.head(model.encoder(x))
    return model


def _leaks(fn, x, *, last_only=False, include_self=False, atol=1e-6):
    base, leaking = fn(x), []
    for t in range(x.shape[1] - 1):
        start = x.shape[1] - 1 if last_only else (t if include_self else t + 1)
        altered = x.clone()
        altered[:, start:] = altered[:, start:] + 1.0 + randn(*altered[:, start:].shape, seed=t)
        if (fn(altered)[:, t] - base[:, t]).abs().max() > atol:
            leaking.append(t)
    return leaking


def _as_list(got):
    if isinstance(got, torch.Tensor):
        got = got.tolist()
    return sorted(int(t) for t in got) if isinstance(got, (list, tuple, set)) else got


def check_causality_detector(leaking_positions, verbose: bool = True) -> CheckResult:
    """Check ``leaking_positions(fn, x) -> list[int]``.

    ``fn`` maps x (B, T, D) to outputs (B, T, D'). Return the positions t (ascending) whose output changes
    when the inputs *after* t change; ``[]`` for a causal ``fn``. A change of 1e-4 already counts.
    """
    def leak_at(s, src, amount=1.0, row=None):
        def fn(x):
            out = x.cumsum(dim=1)
            rows = slice(None) if row is None else slice(row, row + 1)
            out[rows, s] = out[rows, s] + amount * x[rows, src]
            return out
        return fn

    mistakes = [
        Mistake("you only change the last token; a leak can come from any later position: for each t change every "
                "position after t", lambda i: _leaks(*i.values(), last_only=True)),
        Mistake("you also change the token at t itself, so every position looks leaky; change only positions > t",
                lambda i: _leaks(*i.values(), include_self=True)),
        Mistake("a small leak went unnoticed: compare the outputs with a small tolerance (1e-6), not a loose one",
                lambda i: _leaks(*i.values(), atol=1e-2)),
    ]
    x = randn(2, 6, 3, seed=1)
    specs = [
        ("a causal running sum: no leak", lambda x: x.cumsum(dim=1)),
        ("the mean over all positions: everything but the last leaks", lambda x: x.mean(1, keepdim=True).expand_as(x)),
        ("position 2 reads position 3", leak_at(2, 3)),
        ("position 0 reads position 5 with weight 1e-3", leak_at(0, 5, amount=1e-3)),
        ("only batch row 1 leaks: position 1 reads position 4", leak_at(1, 4, row=1)),
    ]
    cases = [Case(what, lambda fn=fn: {"fn": fn, "x": x.clone()}, _leaks(fn, x), mistakes, normalize=_as_list)
             for what, fn in specs]
    return run_cases("check_causality_detector", leaking_positions, cases, verbose=verbose)
