"""The library's layout (version 0.2): packages a reader can find their way in, contracts that a linter enforces,
and old paths that fail with their new one.

- ``lint-imports`` (import-linter, configured in ``pyproject.toml``) keeps every architecture contract, and a
  deliberately wrong import in a copy of the package breaks the contract it should;
- every module that moved fails to import with a message naming its new path, and nothing in the repository
  imports an old path;
- no private name crosses a package boundary, no package attribute hides a submodule of the same name;
- modules stay small and folders short, and the tests mirror the packages.
"""
from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import minitfm
from minitfm._moved import MOVED, moved_message

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minitfm"
MAX_LINES = 330  # "about 300": the longest modules (the decoding loop, data-parallel training) sit just above
MAX_MODULES = 15  # public modules in one folder


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    executable = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if executable is None:
        pytest.fail("lint-imports is missing: pip install -r requirements.txt (import-linter)")
    return subprocess.run([executable, "--config", "pyproject.toml", "--no-cache"], cwd=cwd, capture_output=True,
                          text=True, env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(cwd)})


def contract_names() -> dict[str, str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["id"]: c["name"] for c in config["contracts"]}


def broken(output: str) -> set[str]:
    """The ids of the contracts that the output of lint-imports reports BROKEN."""
    flat = " ".join(output.split())
    return {cid for cid, name in contract_names().items() if f"{' '.join(name.split())} BROKEN" in flat}


def test_lint_imports_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contract_names())} kept, 0 broken." in result.stdout


# (file to edit, line appended, the contract it breaks)
VIOLATIONS = [
    ("minitfm/layers/attention.py", "import minitfm.viz.plotting", "model-code-never-plots"),
    ("minitfm/generation/sampling.py", "import matplotlib.pyplot", "model-code-never-plots"),
    ("minitfm/models.py", "import minitfm.training.loop", "layers"),
    ("minitfm/text/pretokenize.py", "import minitfm.text.bpe_trainer", "no-cycles"),
    ("minitfm/lm/corpus.py", "from minitfm.evaluation._validate import check_count", "private-modules"),
    ("minitfm/training/loop.py", "import minitfm.finetuning.lora", "layers"),
    ("minitfm/layers/attention.py", "import minitfm.text.pretokenize", "layers"),  # text and layers: independent
    ("minitfm/pretrained/families.py", "import minitfm.training.loop", "layers"),
    ("minitfm/generation/sampling.py", "import minitfm.evaluation.intervals", "layers"),
    ("minitfm/vision/vit.py", "import minitfm.generation.sampling", "layers"),
]


@pytest.mark.parametrize("path,line,contract", VIOLATIONS, ids=[v[2] + ":" + v[0] for v in VIOLATIONS])
def test_a_wrong_import_breaks_its_contract(tmp_path, path, line, contract):
    shutil.copytree(PACKAGE, tmp_path / "minitfm", ignore=shutil.ignore_patterns("__pycache__", "assets"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert lint_imports(tmp_path).returncode == 0  # the copy itself is clean
    with open(tmp_path / path, "a", encoding="utf-8") as f:
        f.write(f"\n{line}\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert contract in broken(result.stdout), result.stdout


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_names_its_new_path(old):
    new = MOVED[old]
    assert importlib.import_module(f"minitfm.{new}").__name__ == f"minitfm.{new}"
    message = f"minitfm.{old} moved to minitfm.{new}"
    assert message in moved_message(old)
    sys.modules.pop(f"minitfm.{old}", None)
    with pytest.raises(ImportError, match=re.escape(message)):
        importlib.import_module(f"minitfm.{old}")
    if old in minitfm.__all__:  # `minitfm.tiled_attention` is the function, as it always was
        assert callable(getattr(minitfm, old))
        return
    with pytest.raises(ImportError, match=re.escape(message)):
        exec(f"from minitfm import {old}", {})
    with pytest.raises(AttributeError, match=re.escape(message)):
        getattr(minitfm, old)


def test_a_moved_module_fails_in_a_fresh_interpreter():
    code = "import minitfm.bpe"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1
    assert "ImportError: minitfm.bpe moved to minitfm.text.bpe_trainer" in result.stderr


def repository_texts():
    """(path, text) of every file that could name a module: code, notebooks' cells, pages, translations."""
    skip = {PACKAGE / "_moved.py", PACKAGE / "__init__.py", Path(__file__).resolve()}
    folders = ["minitfm", "tests", "notebooks", "book", "benchmarks", "tools", "locale", "zh_CN"]
    paths = [p for folder in folders for p in (ROOT / folder).rglob("*")
             if p.suffix in {".py", ".ipynb", ".md", ".yml", ".sh", ".cfg", ".toml", ".txt"}
             and "node_modules" not in p.parts and ".ipynb_checkpoints" not in p.parts]
    paths += [ROOT / name for name in ("README.md", "README.zh-CN.md", "pyproject.toml", "conftest.py", ".ci/run")]
    for path in sorted(set(paths) - skip):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        yield path, text


def test_nothing_in_the_repository_uses_an_old_path():
    old = "|".join(sorted(MOVED, key=len, reverse=True))
    dotted = re.compile(rf"(?<![\w.])minitfm\.({old})(?!\w)")
    slashed = re.compile(rf"(?<![\w.])minitfm/({old})\.py\b")
    from_import = re.compile(rf"^\s*from minitfm import [^\n]*\b({old})\b", re.M)
    attribute = re.compile(rf"(?<![\w.])m\.({old})\.")  # `import minitfm as m; m.bpe.train_bpe`
    found = []
    for path, text in repository_texts():
        for pattern in (dotted, slashed, from_import) + ((attribute,) if "import minitfm as m" in text else ()):
            found += [f"{path.relative_to(ROOT)}: {m.group(0).strip()}" for m in pattern.finditer(text)
                      if "moved to" not in text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]]
    assert not found, "old module paths:\n" + "\n".join(found[:30])


def library_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        yield path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path.name == "__init__.py"


def test_no_private_name_is_imported_across_packages():
    """``from minitfm.a.b import _x`` only inside ``minitfm.a`` (a private name belongs to its package)."""
    crossing = []
    for path, module, is_package in library_modules():
        own_package = module if is_package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("minitfm."):
                source_package = node.module.rpartition(".")[0]
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private and not (own_package + ".").startswith(source_package + "."):
                    crossing.append(f"{module} imports {private} from {node.module}")
    assert not crossing, crossing


def test_no_package_attribute_hides_a_submodule():
    """``minitfm.pretrained.weights`` is the module, never a function re-exported under the module's name."""
    hidden = []
    for _, package, is_package in library_modules():
        if not is_package:
            continue
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            submodule = importlib.import_module(f"{package}.{info.name}")
            if getattr(pkg, info.name) is not submodule:
                hidden.append(f"{package}.{info.name}")
    assert not hidden, hidden


def test_modules_stay_small_and_folders_short():
    long = {str(p.relative_to(ROOT)): n for p, _, _ in library_modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"
    folders = {p.parent for p, _, _ in library_modules()}
    crowded = {str(f.relative_to(ROOT)): n for f in folders
               if (n := sum(1 for m in f.glob("*.py") if not m.name.startswith("_"))) > MAX_MODULES}
    assert not crowded, f"folders with over {MAX_MODULES} public modules: {crowded}"


def test_the_tests_mirror_the_packages():
    packages = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    missing = [name for name in packages if not any((ROOT / "tests" / name).glob("test_*.py"))]
    assert not missing, f"packages without a tests/<package>/ folder: {missing}"
    flat = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    top = {p.stem.lstrip("_") for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}  # _checks.py: test_checks.py
    # the suites that cut across every package: bad input, a model on another device, the benchmarks' smoke runs
    across = {"bad_input", "any_device", "benchmarks_smoke", "package", "layout"}
    strays = [name for name in flat if name[5:-3] not in top | across]
    assert not strays, f"tests at the top of tests/ that belong in a package's folder: {strays}"


def test_every_package_docstring_lists_its_modules():
    for _, package, is_package in library_modules():
        if not is_package or package in ("minitfm", "minitfm.exercises", "minitfm.evaluation"):
            continue
        pkg = importlib.import_module(package)
        listed = set(re.findall(r"^``(\w+)``", pkg.__doc__ or "", re.M))
        modules = {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
        assert modules <= listed, f"{package}'s docstring does not list {sorted(modules - listed)}"
