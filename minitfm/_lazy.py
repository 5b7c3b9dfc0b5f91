"""Submodules loaded on first attribute access (``minitfm.viz.plotting`` without importing it first)."""
from __future__ import annotations

import importlib
import pkgutil


def public_submodules(path) -> frozenset[str]:
    """The names of a package's public submodules (not starting with ``_``), from its ``__path__``."""
    return frozenset(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))


def submodule(package: str, path, name: str):
    """``package.name`` imported, if ``name`` is one of the package's public submodules; else AttributeError."""
    if name in public_submodules(path):
        return importlib.import_module(f"{package}.{name}")
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def names(namespace: dict, path) -> list[str]:
    """What ``dir()`` shows: the namespace and the public submodules."""
    return sorted(set(namespace) | public_submodules(path))
