"""Small validation helpers shared by the library.

Every public function checks what a user can get wrong and raises a ``ValueError`` or ``TypeError``
that names what was expected and what arrived. These helpers keep those messages uniform.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from typing import Sequence

import torch

# > 0 inside ``trusted_inputs()``; a context variable, so one thread's forward (or one asyncio task's) never
# turns off the checks of a call running at the same time in another thread (each thread starts at 0)
_trusted_depth: contextvars.ContextVar[int] = contextvars.ContextVar("minitfm_trusted_depth", default=0)


@contextlib.contextmanager
def trusted_inputs():
    """Skip the per-call checks of tensors that the library itself built (inside a model's forward).

    A model validates what the user passed (tokens, caches, masks, positions) once, then calls its
    layers with tensors it made itself: checking them again in every layer of every decoding step
    costs more than the arithmetic of a small model's decode step. Inside this context the layer-level
    checks (:func:`check_module_input`, attention's and the KV cache's input checks, RoPE's position
    checks) return at once; outside it, every public function checks everything.
    """
    token = _trusted_depth.set(_trusted_depth.get() + 1)
    try:
        yield
    finally:
        _trusted_depth.reset(token)


def inputs_trusted() -> bool:
    """True inside :func:`trusted_inputs`, in this thread (or asyncio task) only."""
    return _trusted_depth.get() > 0


def check_tensor(x, name: str, *, ndim: int | Sequence[int] | None = None, floating: bool = False) -> None:
    """Raise if ``x`` is not a tensor, has the wrong rank, or (with ``floating``) is not floating point."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            want = " or ".join(str(n) for n in allowed)
            raise ValueError(f"{name} must have {want} dimensions, got {x.dim()} with shape {tuple(x.shape)}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_token_ids(x, name: str, *, ndim: int | Sequence[int] | None = 2) -> None:
    """Raise unless ``x`` is a tensor of integer token ids (not float, not bool) of the given rank."""
    check_tensor(x, name, ndim=ndim)
    if x.dtype not in (torch.long, torch.int32):  # what nn.Embedding accepts; uint8 would fail there
        raise TypeError(f"{name} must hold integer token ids, got dtype {x.dtype} (expected torch.long or torch.int32)")


def check_positive_int(value, name: str) -> None:
    """Raise unless ``value`` is an int >= 1 (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def check_probability(value, name: str, *, allow_one: bool = False) -> None:
    """Raise unless ``0 <= value < 1`` (or ``<= 1`` with ``allow_one``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    upper_ok = value <= 1 if allow_one else value < 1
    if not (0 <= value and upper_ok):
        bound = "[0, 1]" if allow_one else "[0, 1)"
        raise ValueError(f"{name} must be in {bound}, got {value}")


def check_choice(value, name: str, choices: Sequence[str]) -> None:
    """Raise unless ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}; got {value!r}")


def check_number(value, name: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, integer: bool = False) -> None:
    """Raise unless ``value`` is a finite real number (an int with ``integer``) inside the given bounds.

    ``low``/``high`` are inclusive unless ``low_open``/``high_open``. Booleans, strings, ``None``, NaN and
    infinities are rejected: a NaN would pass every ``<= 0`` comparison and poison the run silently.
    """
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        if not integer and isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point():
            value = value.item()  # a one-element float tensor is a number
        else:
            want = "an int" if integer else "a number"
            raise TypeError(f"{name} must be {want}, got {type(value).__name__} ({value!r:.40})")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        if low is not None and high is not None:
            cond = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        elif low is not None:
            cond = f"{'>' if low_open else '>='} {low:g}"
        else:
            cond = f"{'<' if high_open else '<='} {high:g}"
        raise ValueError(f"{name} must be {cond}, got {value}")


def check_same_dtype(*named: tuple[str, torch.Tensor]) -> None:
    """Raise unless every ``(name, tensor)`` pair shares one floating dtype (say which to cast)."""
    dtypes = {name: t.dtype for name, t in named}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} {str(d).removeprefix('torch.')}" for name, d in dtypes.items())
        raise TypeError(f"dtypes must match, got {listed}; cast one with .to(dtype) (or use torch.autocast)")


def check_module_input(x, name: str, module: torch.nn.Module, d_model: int, *, ndim: int | None = None) -> None:
    """Raise unless ``x`` is a floating tensor (..., D), or (B, T, D) with ``ndim=3``, whose dtype matches the
    module's parameters. Skipped inside :func:`trusted_inputs`."""
    if _trusted_depth.get():
        return
    check_tensor(x, name, ndim=ndim, floating=True)
    if x.dim() < 1 or x.shape[-1] != d_model:
        want = f"(B, T, D={d_model})" if ndim == 3 else f"(..., D={d_model})"
        raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")
    param = next(module.parameters(), None)
    if param is not None and param.dtype != x.dtype and not torch.is_autocast_enabled(x.device.type):
        raise TypeError(f"{name} has dtype {str(x.dtype).removeprefix('torch.')} but {type(module).__name__}'s weights are "
                        f"{str(param.dtype).removeprefix('torch.')}; cast the input (x.to(...)), the module "
                        "(module.to(...)), or run under torch.autocast")


def broadcast_or_raise(shape_a, shape_b, message: str) -> torch.Size:
    """``torch.broadcast_shapes(shape_a, shape_b)``, raising ``ValueError(message)`` when they do not broadcast."""
    try:
        return torch.broadcast_shapes(tuple(shape_a), tuple(shape_b))
    except RuntimeError:
        raise ValueError(message) from None


def coerce_dataclass(cls, value, name: str):
    """``value`` as the frozen config dataclass ``cls``: itself, ``None``, or the dict ``dataclasses.asdict`` made of
    one (how a saved config comes back); any other value, or a dict with unknown fields, is refused naming ``name``."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict):
        unknown = set(value) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown {name} fields {sorted(unknown)}")
        return cls(**value)
    raise TypeError(f"{name} must be a {cls.__name__} (or None), got {type(value).__name__}")
