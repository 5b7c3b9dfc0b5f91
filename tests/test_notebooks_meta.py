"""Cheap checks on the committed notebooks (no kernel): the book's rules for every chapter."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IGNORE_MARK = "# NBVAL_IGNORE_OUTPUT"

pytestmark = pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks committed yet")


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_setup_cells_are_current():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed(path):
    cells = code_cells(path)
    unexecuted = [i for i, c in enumerate(cells) if c.source.strip() and c.execution_count is None]
    assert not unexecuted, f"{path.name}: code cells {unexecuted} have no execution count; run tools/notebooks.py execute"
    counts = [c.execution_count for c in cells if c.execution_count is not None]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name} was not executed top to bottom in one kernel"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_at_most_one_code_cell_in_five_ignores_its_output(path):
    cells = code_cells(path)
    ignored = sum(c.source.lstrip().startswith(IGNORE_MARK) for c in cells)
    assert ignored * 5 <= len(cells), f"{path.name}: {ignored} of {len(cells)} code cells ignore their output"
