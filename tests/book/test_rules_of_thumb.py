"""The rules-of-thumb page cannot drift from the chapters: each row's verdict is the one its cell prints.

Every row of book/rules_of_thumb.md links to the anchor above the cell that prints its verdict. This test
reads the verdict words that cell printed in the committed notebook (``minitfm.claims``' verdict lines) and
checks that the row's verdict column names each of them, that the column uses no word outside the
vocabulary, and that every row says where the rule is stated (a citation, or "a common claim; no primary
source found").
"""
import re
from pathlib import Path

import nbformat
import pytest

from minitfm.claims import RETIRED, VERDICTS, verdict_words

ROOT = Path(__file__).resolve().parents[2]

PAGE = ROOT / "book" / "rules_of_thumb.md"
WHERE = re.compile(r"\[[^\]]+\]\(\.\./notebooks/([\w.]+\.ipynb)#([\w-]+)\)")


def rows():
    out = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) >= 5 and WHERE.search(cells[-1]):
            out.append(cells)
    return out


def _code_run(cells, start, step):
    """The code cells next to ``start`` in one direction, up to the next Markdown cell."""
    run, i = [], start + step
    while 0 <= i < len(cells) and cells[i].cell_type == "code":
        run.append(cells[i])
        i += step
    return run


def _words(lines: list[str]) -> list[str]:
    return [words[0] for words in map(verdict_words, lines) if words]


def printed_verdicts(notebook: str, anchor: str) -> list[str]:
    """The verdict words printed by the code cells under the anchor (or, where a chapter puts the anchor on
    the paragraph that reads the verdict, by the code cells just above it). A timing's word may differ from
    run to run, so it is returned as "a timing": the page says only that the verdict is a timing."""
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and f'id="{anchor}"' in c.source)
    for step in (1, -1):
        lines = [ln for c in _code_run(nb.cells, start, step) for o in c.get("outputs", [])
                 for ln in "".join(o.get("text", "")).splitlines()]
        timed = _words([ln for ln in lines if "(a timing" in ln])
        plain = _words([ln for ln in lines if "(a timing" not in ln])
        if plain or timed:
            return plain + (["a timing"] if timed else [])
    return []


ROWS = rows()


def test_the_page_has_a_row_per_claim():
    assert len(ROWS) >= 35
    header = PAGE.read_text(encoding="utf-8")
    assert "| Rule of thumb | Stated by | Verdict | The test | Where |" in header


def words_in(text: str) -> set:
    """The vocabulary words a verdict column names, and "a timing" where it calls a verdict one."""
    words = {w for w in VERDICTS if re.search(rf"(?<![\w-]){w}(?![\w-])", text.lower())}
    return words | ({"a timing"} if "a timing" in text.lower() else set())


@pytest.mark.parametrize("row", ROWS, ids=lambda r: WHERE.search(r[-1]).group(2))
def test_each_row_says_where_the_rule_is_stated_and_a_verdict_its_cell_prints(row):
    rule, stated, verdict, where = row[0], row[1], row[2], row[-1]
    assert "no primary source found" in stated or "{cite" in stated, f"{rule}: say where the rule is stated"
    printed = {w for notebook, anchor in WHERE.findall(where) for w in printed_verdicts(notebook, anchor)}
    assert printed, f"{rule}: the cell under {where} prints no verdict line"
    assert words_in(verdict) & printed, f"{rule}: the page says {verdict!r}, the cell prints {sorted(printed)}"
    assert not [r for r in RETIRED if r.rstrip(":") in verdict.lower()], f"{rule}: a retired word in {verdict!r}"


def test_every_verdict_a_cell_prints_is_on_the_page():
    named: dict = {}
    for row in ROWS:
        for link in WHERE.findall(row[-1]):
            named.setdefault(link, set()).update(words_in(row[2]))
    for (notebook, anchor), words in named.items():
        missing = set(printed_verdicts(notebook, anchor)) - words
        assert not missing, f"{notebook}#{anchor} prints {sorted(missing)}, which no row of the page says"


CLAIM_ANCHOR = re.compile(r'<a id="ch(\d+[a-z]?)-claim-[\w-]+"></a>')


def anchor_chapter_problems(notebook: Path) -> list[str]:
    """Claim anchors whose chapter number is not the notebook's: ``ch8-claim-...`` belongs in ``08_*.ipynb``
    (a reader sees the anchor in the address bar, and the rules page links to it)."""
    chapter = notebook.name.split("_")[0].lstrip("0")
    nb = nbformat.read(notebook, as_version=4)
    return [f"{notebook.name}: ch{number}-claim-... in chapter {chapter}" for cell in nb.cells
            if cell.cell_type == "markdown" for number in CLAIM_ANCHOR.findall(cell.source) if number != chapter]


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")), ids=lambda p: p.stem)
def test_claim_anchors_carry_their_chapters_number(notebook):
    assert not anchor_chapter_problems(notebook)


def test_the_anchor_check_fails_on_a_chapter_number_from_another_chapter(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell('<a id="ch7-claim-latency"></a>\nText.')])
    nbformat.write(nb, tmp_path / "08_kv_cache.ipynb")
    assert anchor_chapter_problems(tmp_path / "08_kv_cache.ipynb") == ["08_kv_cache.ipynb: ch7-claim-... in chapter 8"]
    nbformat.write(nb, tmp_path / "07_training.ipynb")
    assert anchor_chapter_problems(tmp_path / "07_training.ipynb") == []
