"""minitfm.finetuning's public face: light to import, every name documented, no name hiding a module."""
import importlib
import json
import pkgutil
import subprocess
import sys

import minitfm.finetuning as finetuning


def test_import_loads_neither_transformers_nor_peft():
    code = ("import sys, json, minitfm.finetuning; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('transformers', 'peft', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_every_public_name_is_documented_and_exported():
    for name in finetuning.__all__:
        obj = getattr(finetuning, name)
        if callable(obj):
            assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name
    modules = {m.name for m in pkgutil.iter_modules(finetuning.__path__) if not m.name.startswith("_")}
    assert modules == {"lora", "adapters", "chat", "packing", "classification", "sft", "tasks", "answering",
                       "new_tokens", "skills", "people"}
    for module in modules:
        assert f"``{module}``" in finetuning.__doc__
        assert module not in finetuning.__all__
        assert getattr(finetuning, module) is importlib.import_module(f"minitfm.finetuning.{module}")
        public = getattr(importlib.import_module(f"minitfm.finetuning.{module}"), "__doc__")
        assert public and len(public) > 200, f"{module} needs a docstring that teaches"
