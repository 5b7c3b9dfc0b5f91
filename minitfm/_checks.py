"""Small validation helpers shared by the library.

Every public function checks what a user can get wrong and raises a ``ValueError`` or ``TypeError``
that names what was expected and what arrived. These helpers keep those messages uniform.
"""
from __future__ import annotations

from typing import Sequence

import torch


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
    if x.is_floating_point() or x.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {x.dtype}")


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
