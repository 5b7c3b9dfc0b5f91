"""The repository's scripts in tools/ as modules for the tests, each loaded once (``tool("i18n")``).

They are scripts, not a package: ``tools/notebooks.py`` would also clash with the ``notebooks/`` folder as a
module name. Each is registered in ``sys.modules`` (as ``tools_NAME``) so that its dataclasses can look their
module up.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tool(name: str) -> ModuleType:
    key = f"tools_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, TOOLS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]
