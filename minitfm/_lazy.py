"""Submodules loaded on first attribute access (``minitfm.viz.plotting`` without importing it first)."""
from __future__ import annotations

import importlib
import pkgutil


def submodule(package: str, path, name: str):
    """``package.name`` imported, if ``name`` is one of the package's public submodules; else AttributeError."""
    if not name.startswith("_") and name in {m.name for m in pkgutil.iter_modules(path)}:
        return importlib.import_module(f"{package}.{name}")
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def names(namespace: dict, path) -> list[str]:
    """What ``dir()`` shows: the namespace and the public submodules."""
    return sorted(set(namespace) | {m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_")})
