"""minitfm.evaluation's public face: light to import, every name documented."""
import importlib
import json
import subprocess
import sys

import minitfm.evaluation as evaluation


def test_import_loads_neither_scipy_nor_lm_eval():
    code = ("import sys, json, minitfm.evaluation; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'lm_eval', 'pandas'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_every_public_name_is_documented_and_every_module_cites_a_source():
    for name in evaluation.__all__:
        obj = getattr(evaluation, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name
    modules = ("perplexity", "multiple_choice", "generative", "intervals", "paired", "sample_size", "contamination",
               "prompt_formats", "extraction", "clustered", "two_proportions")
    for module in modules:
        doc = importlib.import_module(f"minitfm.evaluation.{module}").__doc__
        assert doc and any(str(year) in doc for year in range(1927, 2026)), f"{module} names no dated source"


def test_no_public_function_hides_a_module_of_the_same_name():
    """``minitfm.evaluation.X`` must mean one thing: a function named like its module would shadow the module."""
    for module in ("perplexity", "multiple_choice", "generative", "intervals", "paired", "sample_size",
                   "contamination", "prompt_formats", "extraction", "clustered", "two_proportions"):
        assert module not in evaluation.__all__
        assert getattr(evaluation, module) is importlib.import_module(f"minitfm.evaluation.{module}")
