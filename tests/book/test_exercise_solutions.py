"""Every chapter's checked "build" exercises: a stub, a check cell, and a hidden solution that passes.

The committed notebooks show each checker's answer to the empty stub (nbval compares it). This test takes
the solution code out of each exercise's hidden <details> block, runs it the way a student would paste it
(with the section's imports) and asks the same checker: every published solution must pass.
"""
import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minitfm.exercises as exercises

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
CHECK_CALL = re.compile(r"^(check_\w+)\((\w+)\);?\s*$", re.M)
SOLUTION = re.compile(r'<details class="solution">.*?```python\n(.*?)```.*?</details>', re.S)


def checked_exercises(path):
    """[(checker name, function name, solution source)] of one notebook."""
    nb = nbformat.read(path, as_version=4)
    solutions = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for source in SOLUTION.findall(cell.source):
                for name in re.findall(r"^def (\w+)\(", source, re.M):
                    solutions[name] = source
    found = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            for checker, fname in CHECK_CALL.findall(cell.source):
                found.append((checker, fname, solutions.get(fname)))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_has_two_checked_build_exercises_with_passing_solutions(path):
    found = checked_exercises(path)
    assert len(found) >= 2, f"{path.name}: {len(found)} checked exercises (stub + check cell), expected at least 2"
    for checker, fname, source in found:
        assert source is not None, f"{path.name}: {checker}({fname}) has no hidden solution defining {fname}"
        namespace = {"torch": torch, "math": math, "F": F, "nn": nn}
        exec(compile(source, f"{path.name}:{fname}", "exec"), namespace)
        result = getattr(exercises, checker)(namespace[fname], verbose=False)
        assert result.passed, f"{path.name}: the published solution of {fname} fails {checker}: {result.message}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_the_committed_page_shows_each_checker_answering_its_stub(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and CHECK_CALL.search(cell.source):
            text = "".join(o.get("text", "") for o in cell.get("outputs", []))
            assert "not implemented yet" in text, f"{path.name}: {cell.source!r} should show the stub's answer"
