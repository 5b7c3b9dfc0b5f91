"""Maintain the book's notebooks.

    python tools/notebooks.py sync               # write the standard set-up cell into every notebook
    python tools/notebooks.py check              # exit 1 if a notebook's set-up cell is out of date
    python tools/notebooks.py execute [NB ...]   # re-execute notebooks in place (all by default)
    python tools/notebooks.py student OUT/ [NB ...]  # the students' edition: every notebook without solutions

The set-up cell installs minitfm from the repository when it is not importable (Colab) and does nothing
elsewhere. The repository URL comes from one place: ``repository.url`` in ``_config.yml``.

The students' edition keeps exercises, stubs, check cells and outputs, and removes every solution:
- a Markdown block `````{admonition} Solution`` (any fence of 3+ backticks or colons, up to its closing
  fence; ``{dropdown} Solution`` too);
- an HTML block ``<details>`` whose ``<summary>`` contains "Solution", up to its matching ``</details>``;
- a code cell whose first line starts with ``# SOLUTION`` (the convention for solution code that the test
  suite runs), or that is tagged ``solution``.
A Markdown cell left empty is dropped.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SETUP_MARKER = "# minitfm set-up"


def repository_url() -> str:
    """The repository URL from _config.yml (read with a regex to need nothing beyond the stdlib)."""
    text = (ROOT / "_config.yml").read_text(encoding="utf-8")
    match = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", text, flags=re.M)
    if not match:
        raise SystemExit("_config.yml has no repository.url")
    return match.group(1).strip("'\"")


def setup_source() -> str:
    return (
        f"{SETUP_MARKER}: install the library when it is missing (Colab); does nothing elsewhere.\n"
        "import importlib.util, sys\n"
        'if importlib.util.find_spec("minitfm") is None:\n'
        f'    %pip install -q "minitfm @ git+{repository_url()}"\n'
        'if "google.colab" in sys.modules:  # Colab needs this to show ipywidgets 8 sliders\n'
        "    from google.colab import output\n"
        "    output.enable_custom_widget_manager()"
    )


def all_notebooks() -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def first_code_cell(nb):
    return next((c for c in nb.cells if c.cell_type == "code"), None)


def sync(paths: list[Path]) -> int:
    source = setup_source()
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        cell = first_code_cell(nb)
        if cell is not None and cell.source.startswith(SETUP_MARKER):
            if cell.source == source:
                continue
            cell.source = source
        else:
            index = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
            new = nbformat.v4.new_code_cell(source)
            new.pop("id", None)
            nb.cells.insert(index, new)
        nbformat.validator.normalize(nb)
        nbformat.write(nb, path)
        print(f"updated set-up cell: {path.relative_to(ROOT)}")
    return 0


def check(paths: list[Path]) -> int:
    source, bad = setup_source(), []
    for path in paths:
        cell = first_code_cell(nbformat.read(path, as_version=4))
        if cell is None or cell.source != source:
            bad.append(str(path.relative_to(ROOT)))
    if bad:
        print("set-up cell missing or out of date (run `python tools/notebooks.py sync`):", *bad, sep="\n  ")
        return 1
    print(f"{len(paths)} notebooks have the current set-up cell")
    return 0


def _children_cpu() -> float:
    """User + system CPU seconds of finished child processes (the kernel, once it has shut down)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def execute(paths: list[Path], timeout: int = 600) -> int:
    from nbclient import NotebookClient

    # Busy-waiting OpenMP threads make torch ~10x slower when another process shares the cores;
    # passive waiting changes no result. The kernel inherits this environment.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start, cpu_start = time.perf_counter(), _children_cpu()
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu_start
        for cell in nb.cells:  # keep diffs small: execution timestamps change every run
            cell.get("metadata", {}).pop("execution", None)
        nbformat.write(nb, path)
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        # CPU time is what the notebook costs on an idle machine even when other programs share the cores.
        print(f"{name}: executed in {elapsed:.1f} s ({cpu:.1f} s of CPU time)")
    return 0


SOLUTION_CODE_MARKER = "# SOLUTION"
_FENCED_SOLUTION = re.compile(r"^\s*(`{3,}|:{3,})\s*\{(?:admonition|dropdown)\}\s*Solution\b", re.I)
_SUMMARY_SOLUTION = re.compile(r"<summary>[^<]*solution", re.I)


def _block_end(lines: list[str], start: int) -> int:
    """Index of the last line of the block opening at ``start`` (a fence or a ``<details>``)."""
    fence = _FENCED_SOLUTION.match(lines[start])
    if fence:
        char, length = fence.group(1)[0], len(fence.group(1))
        closing = re.compile(rf"^\s*{re.escape(char)}{{{length},}}\s*$")
        return next((j for j in range(start + 1, len(lines)) if closing.match(lines[j])), len(lines) - 1)
    depth = 0
    for j in range(start, len(lines)):
        depth += len(re.findall(r"<details\b", lines[j], re.I)) - len(re.findall(r"</details>", lines[j], re.I))
        if depth <= 0:
            return j
    return len(lines) - 1


def strip_solutions(markdown: str) -> str:
    """Markdown without its solution blocks (fenced ``{admonition} Solution`` or ``<details>`` Solution)."""
    lines, kept, i = markdown.split("\n"), [], 0
    while i < len(lines):
        is_details = re.match(r"^\s*<details\b", lines[i], re.I)
        if _FENCED_SOLUTION.match(lines[i]) or is_details:
            end = _block_end(lines, i)
            if not is_details or _SUMMARY_SOLUTION.search("\n".join(lines[i:end + 1])):
                i = end + 1
                continue
        kept.append(lines[i])
        i += 1
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))
    return text.strip("\n")


def is_solution_cell(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.cell_type == "code" and (cell.source.lstrip().startswith(SOLUTION_CODE_MARKER) or "solution" in tags)


def student_notebook(nb):
    """A copy of ``nb`` for students: solution cells and blocks removed, everything else kept."""
    cells = []
    for cell in nb.cells:
        if is_solution_cell(cell):
            continue
        if cell.cell_type == "markdown":
            source = strip_solutions(cell.source)
            if not source.strip():
                continue
            cell = nbformat.from_dict({**cell, "source": source})
        cells.append(cell)
    new = nbformat.from_dict({**nb, "cells": cells})
    return new


def student(paths: list[Path], out: Path) -> int:
    out = Path(out).resolve()
    if out == NOTEBOOKS.resolve() or any(p.parent == out for p in paths):
        raise SystemExit(f"refusing to write the students' edition over the notebooks themselves: {out}")
    out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        nb = student_notebook(nbformat.read(path, as_version=4))
        nbformat.write(nb, out / path.name)
    print(f"students' edition: {len(paths)} notebooks without solutions in {out}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("sync", "check", "execute", "student"))
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: every notebook in notebooks/ (for student: OUT/ first, then notebooks)")
    args = parser.parse_args(argv)
    if args.command == "student":
        if not args.notebooks:
            parser.error("student needs an output folder: python tools/notebooks.py student OUT/")
        out, rest = args.notebooks[0], args.notebooks[1:]
        return student([p.resolve() for p in rest] or all_notebooks(), out)
    paths = [p.resolve() for p in args.notebooks] or all_notebooks()
    return {"sync": sync, "check": check, "execute": execute}[args.command](paths)


if __name__ == "__main__":
    sys.exit(main())
