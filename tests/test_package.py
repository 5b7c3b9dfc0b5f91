"""The package's public face: what ``import minitfm`` offers, what it loads, and which names it promises."""
import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import minitfm

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "tests" / "public_api.txt"
HEAVY = ("matplotlib", "ipywidgets", "transformers", "safetensors", "huggingface_hub", "regex", "tokenizers")


def test_every_public_name_is_importable_and_documented():
    for name in minitfm.__all__:
        obj = getattr(minitfm, name)
        assert obj.__doc__ and obj.__doc__.strip(), f"minitfm.{name} has no docstring"


def test_the_public_names_are_the_checked_in_list():
    """A change of minitfm.__all__ is deliberate: it edits tests/public_api.txt in the same commit."""
    listed = [line for line in API.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert sorted(minitfm.__all__) == listed, (
        f"added: {sorted(set(minitfm.__all__) - set(listed))}, removed: {sorted(set(listed) - set(minitfm.__all__))}")
    assert len(set(minitfm.__all__)) == len(minitfm.__all__), "a name is listed twice in __all__"


def test_star_import_gives_every_public_name():
    code = "from minitfm import *; import minitfm; names = dir(); print(all(n in names for n in minitfm.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_import_minitfm_stays_light():
    """Plots, widgets, the BPE code (regex) and the published-model loader (transformers, safetensors,
    huggingface_hub) load on first use, not with ``import minitfm``."""
    code = ("import sys, json, minitfm; print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] in %r), "
            "sorted(m for m in sys.modules if m.startswith('minitfm.'))]))" % (HEAVY,))
    heavy, loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                              check=True).stdout)
    assert heavy == []
    lazy = {"minitfm." + m for m in ("small_lm", "corpus", "bpe", "bpe_tokenizer", "bpe_files", "pretrained",
                                     "plotting", "explorers", "static_explorers")}
    assert not lazy & set(loaded), sorted(lazy & set(loaded))


def test_lazy_names_are_the_modules_objects():
    from minitfm.lm.small_lm import load_small_lm
    from minitfm.pretrained import from_pretrained
    from minitfm.text.bpe_tokenizer import Tokenizer
    from minitfm.text.bpe_trainer import train_bpe

    assert minitfm.BPETokenizer is Tokenizer and minitfm.train_bpe is train_bpe
    assert minitfm.from_pretrained is from_pretrained and minitfm.load_small_lm is load_small_lm
    from minitfm import BPETokenizer  # noqa: F401  (a from-import goes through __getattr__ too)
    with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
        minitfm.not_a_name


def test_exercise_and_optimisation_internals_stay_in_their_modules():
    assert "buggy_noam_lr" not in minitfm.__all__ and "LeanDecoder" not in minitfm.__all__
    from minitfm.generation.lean_decode import LeanDecoder  # noqa: F401
    from minitfm.training import buggy_noam_lr  # noqa: F401


def test_every_submodule_loads_lazily_and_has_a_place_in_the_chapter_table():
    files = {p.stem for p in (ROOT / "minitfm").glob("*.py") if not p.stem.startswith("_")}
    packages = {p.parent.name for p in (ROOT / "minitfm").glob("*/__init__.py")}
    assert minitfm._LAZY_SUBMODULES == files | packages
    table = minitfm.__doc__.split("Where each chapter's code lives", 1)[1].split("The top-level names", 1)[0]
    missing = sorted(m for m in minitfm._LAZY_SUBMODULES if f"``{m}``" not in table)
    assert not missing, f"modules missing from the chapter table of minitfm/__init__.py's docstring: {missing}"
    for group in ("**Book plumbing**", "**Layers**", "**Generation**"):
        assert group in minitfm.__doc__


def test_the_version_comes_from_the_package_metadata(monkeypatch):
    assert minitfm.__version__ == metadata.version("minitfm")

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)  # a source tree without metadata
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{minitfm._version()}"' in pyproject


def notebook_top_level_names() -> dict[str, set[str]]:
    """name -> the notebooks whose code uses ``minitfm.name`` or ``from minitfm import name``."""
    used: dict[str, set[str]] = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).split("\n")  # shell and magic lines become `pass`
            code = "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%"))
                             else line for line in lines)
            tree = ast.parse(code)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "minitfm" and not node.level:
                    names = [a.name for a in node.names]
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id == "minitfm"):
                    names = [node.attr]
                else:
                    continue
                for name in names:
                    used.setdefault(name, set()).add(path.name)
    return used


def test_every_top_level_name_the_notebooks_use_exists():
    used = notebook_top_level_names()
    assert "set_threads" in used and len(used["set_threads"]) >= 10
    missing = {name: sorted(where) for name, where in used.items() if not hasattr(minitfm, name)}
    assert not missing, f"notebooks use names minitfm no longer has: {missing}"


def test_model_code_does_not_import_plotting_or_widgets():
    code = "import sys, minitfm; print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_plotting_modules_load_on_first_use():
    assert minitfm.viz.plotting.plot_attention.__module__ == "minitfm.viz.plotting"
    assert hasattr(minitfm.viz.static_explorers, "static_attention_explorer")


def test_set_threads_uses_the_default_unless_the_environment_overrides_it(monkeypatch):
    import torch

    from minitfm.device import set_threads

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("MINITFM_NUM_THREADS", raising=False)
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("MINITFM_NUM_THREADS", "2")
        assert set_threads(1) == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("MINITFM_NUM_THREADS", "two")
        with pytest.raises(ValueError, match="MINITFM_NUM_THREADS must be a positive whole number"):
            set_threads(1)
        with pytest.raises(ValueError, match="default must be a positive whole number"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)
