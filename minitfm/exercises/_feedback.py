"""The words of the feedback: what differs between an answer and the expected one, and what an error means.

Messages describe outputs (shapes, dtypes, values at an index), never the reference code.
"""
from __future__ import annotations

import torch


def shape_str(shape) -> str:
    return str(tuple(shape)).replace(",)", ")")


def _index_str(index) -> str:
    return shape_str(index) if len(index) != 1 else f"[{index[0]}]"


def describe_difference(got, expected, name: str = "your output", atol: float = 1e-5, rtol: float = 1e-4):
    """None if ``got`` matches ``expected``; otherwise one sentence naming the first difference."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            n = len(got) if isinstance(got, (tuple, list)) else 1
            return f"your function should return {len(expected)} values (a tuple), got {n} ({type(got).__name__})"
        for i, (g, e) in enumerate(zip(got, expected)):
            diff = describe_difference(g, e, f"element {i} of your answer", atol, rtol)
            if diff:
                return diff
        return None
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(got, expected, name, atol, rtol)
    if isinstance(expected, float):
        if not isinstance(got, (int, float)) and not (isinstance(got, torch.Tensor) and got.numel() == 1):
            return f"{name} should be a number, got {type(got).__name__}"
        got = float(got)
        if abs(got - expected) > atol + rtol * abs(expected):
            return f"{name} is {got:.6g}, expected {expected:.6g}"
        return None
    if got != expected:
        return f"{name} is {got!r}, expected {expected!r}"
    return None


def _tensor_difference(got, expected, name, atol, rtol):
    if not isinstance(got, torch.Tensor):
        return f"{name} should be a torch.Tensor, got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"wrong shape: expected {shape_str(expected.shape)}, got {shape_str(got.shape)}"
    if got.dtype != expected.dtype:
        return f"wrong dtype: expected {expected.dtype}, got {got.dtype}"
    if expected.dtype == torch.bool or not expected.is_floating_point():
        wrong = (got != expected).nonzero()
        if len(wrong):
            i = tuple(wrong[0].tolist())
            return (f"{name} differs at index {_index_str(i)}: expected {expected[i].item()}, got {got[i].item()} "
                    f"({len(wrong)} of {expected.numel()} entries differ)")
        return None
    g, e = got.detach().double(), expected.detach().double()
    bad_nan = g.isnan() & ~e.isnan()
    if bad_nan.any():
        i = tuple(bad_nan.nonzero()[0].tolist())
        return f"{name} holds NaN at index {_index_str(i)} where a number ({e[i].item():.4g}) was expected"
    both_inf = g.isinf() & e.isinf() & (g.sign() == e.sign())
    close = (g - e).abs() <= atol + rtol * e.abs()
    far = ~both_inf & ~(g.isnan() & e.isnan()) & (~close | ((g.isinf() | e.isinf()) & ~both_inf))
    if far.any():
        i = tuple(far.nonzero()[0].tolist())
        return (f"{name} differs at index {_index_str(i)}: expected {e[i].item():.4g}, got {g[i].item():.4g} "
                f"({int(far.sum())} of {e.numel()} entries differ)")
    return None


_HINTS = (
    ("view size is not compatible", "after a transpose the tensor is not contiguous: use .reshape(...) "
                                    "or .contiguous().view(...)"),
    ("cannot be multiplied", "nn.Linear weights are stored (out, in): multiply by W.T, or use F.linear(x, W)"),
    ("selected index k out of range", "k may exceed the vocabulary size V: use min(k, V)"),
    ("cannot be raised to a negative power", "0 ** -0.5 is undefined: handle step 0 on its own"),
    ("must match the size of tensor", "two shapes do not broadcast; print the shapes just before that line"),
)


def explain_exception(err: Exception) -> str:
    text = f"your function raised {type(err).__name__}: {err}".strip()
    for needle, hint in _HINTS:
        if needle in str(err):
            return f"{text}\n  hint: {hint}"
    return text
