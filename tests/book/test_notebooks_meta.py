"""Cheap checks on the committed notebooks (no kernel): the book's rules for every chapter."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
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


# Chapters read in Colab and Jupyter (CommonMark) as often as in the book (MyST): their Markdown uses
# neither MyST directives nor roles (book/CONTRIBUTING_CHAPTERS.md, sections 3-5). `python
# tools/notebooks.py commonmark NB` rewrites them. Notebooks exempted while being converted (every
# notebook is converted now; tests/book/test_colab_view.py skips the same ones).
NOT_YET_CONVERTED: set[str] = set()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_has_no_myst_only_syntax(path):
    if path.name in NOT_YET_CONVERTED:
        pytest.skip(f"{path.name} is in NOT_YET_CONVERTED (run `python tools/notebooks.py commonmark` on it)")
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from notebooks import MYST_SYNTAX

    found = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "markdown":
            for match in MYST_SYNTAX.finditer(cell.source):
                line = cell.source[:match.start()].count("\n")
                found.append(f"cell {index}: {cell.source.splitlines()[line].strip()[:80]!r}")
    assert not found, (f"{path.name}: MyST-only syntax, shown raw in Colab and Jupyter (fix: `python "
                       f"tools/notebooks.py commonmark notebooks/{path.name}`):\n  " + "\n  ".join(found))


# Every static figure (a matplotlib PNG in a code cell's output) carries a short alt text saying what it
# shows: cell metadata {"mystnb": {"image": {"alt": "..."}}}, which MyST-NB writes into the page's <img>
# (the axe audit of tests/book/test_site.py checks the pages). Figures inside a live explorer's saved widget
# state cannot take one. Notebooks edited elsewhere when the rule came in; empty once they have them.
FIGURES_WITHOUT_ALT_YET: set[str] = set()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_static_figure_has_alt_text(path):
    if path.name in FIGURES_WITHOUT_ALT_YET:
        pytest.skip(f"{path.name} is in FIGURES_WITHOUT_ALT_YET")
    missing = [i for i, c in enumerate(code_cells(path))
               if any(k.startswith("image/") for o in c.get("outputs", []) for k in o.get("data", {}))
               and not str(c.metadata.get("mystnb", {}).get("image", {}).get("alt", "")).strip()]
    assert not missing, (f"{path.name}: code cells {missing} (counting code cells only) show a figure without "
                         'alt text; add cell metadata {"mystnb": {"image": {"alt": "what the figure shows"}}}')
