"""Input checks shared by the evaluation modules: each raises a ValueError/TypeError naming what was expected
and what arrived, so a wrong call fails at the line that made it instead of returning a plausible wrong number."""
from __future__ import annotations

import math
import numbers

import numpy as np


def check_count(value, name: str, *, minimum: int = 0) -> int:
    """An integer count >= ``minimum``; bools are refused (``True`` is not a count of 1 items)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int count, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_real(value, name: str) -> float:
    """A finite real number (not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def check_probability(value, name: str, *, open_interval: bool = False) -> float:
    """A number in [0, 1], or in (0, 1) with ``open_interval``."""
    p = check_real(value, name)
    if open_interval and not 0.0 < p < 1.0:
        raise ValueError(f"{name} must be strictly between 0 and 1, got {p}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
    return p


def check_scores(values, name: str) -> np.ndarray:
    """A non-empty 1-D sequence of finite real numbers (bools allowed: they are 0/1 correctness)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got a {type(values).__name__}")
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one score per item), got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: need at least one item")
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {array[~np.isfinite(array)][:3].tolist()}...")
    return array


def check_correct(values, name: str) -> np.ndarray:
    """A non-empty 1-D sequence of 0/1 (or bool) outcomes, returned as a bool array."""
    array = check_scores(values, name)
    if not np.all((array == 0) | (array == 1)):
        raise ValueError(f"{name} must hold 0/1 (or bool) outcomes, got values {np.unique(array)[:5].tolist()}")
    return array.astype(bool)


def check_same_length(a, b, name_a: str, name_b: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{name_a} and {name_b} must score the same items: got {len(a)} and {len(b)}")


def check_confidence(value) -> float:
    return check_probability(value, "confidence", open_interval=True)


def as_generator(rng) -> np.random.Generator:
    """A ``numpy.random.Generator`` from a Generator or an int seed; ``None`` is refused (results must repeat)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy Generator or an int seed (so the result repeats), "
                    f"got {type(rng).__name__}")
