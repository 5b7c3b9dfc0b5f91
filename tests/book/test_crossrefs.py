"""Every "chapter N" and "exercise N.M" in the book is a link that resolves to what its text names."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import crossrefs  # noqa: E402


@pytest.fixture(scope="module")
def checker():
    return crossrefs.Checker()


def test_every_cross_reference_in_the_book_resolves(checker):
    problems = checker.problems()
    assert not problems, f"{len(problems)} problem(s) (python tools/crossrefs.py lists them):\n" + "\n".join(problems)


def test_the_book_has_many_checked_links(checker):
    # the test above must have something to check: the chapters link to each other dozens of times
    text = "\n".join(t for d in checker.docs.values() for _, t in d.markdown)
    assert len(crossrefs.LINK.findall(text)) > 200
    assert {"1", "2", "7", "7b", "12"} <= set(checker.chapters)


def _notebook(tmp_path, name, title, markdown):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": f"# {title}\n"}]
    cells += [{"cell_type": "markdown", "metadata": {}, "source": m} for m in markdown]
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


@pytest.fixture
def tiny_book(tmp_path, monkeypatch):
    monkeypatch.setattr(crossrefs, "ROOT", tmp_path)
    a = _notebook(tmp_path, "01_a.ipynb", "1. A", ['<div class="exercise" id="ex-1-1">\n\n**Exercise 1.1 (check).** x\n\n</div>'])
    b = _notebook(tmp_path, "02_b.ipynb", "2. B", ["See [chapter 1](01_a.ipynb) and [exercise 1.1](01_a.ipynb#ex-1-1)."])
    return tmp_path, a, b


def test_a_correct_reference_passes(tiny_book):
    _, a, b = tiny_book
    docs = [crossrefs.load(a), crossrefs.load(b)]
    assert crossrefs.Checker(docs).problems() == []


@pytest.mark.parametrize("markdown, message", [
    ("As [chapter 2](01_a.ipynb) shows.", "names chapter 2 but points at 01_a.ipynb"),
    ("See [exercise 1.2](01_a.ipynb#ex-1-1).", "names exercise 1.2"),
    ("See [exercise 1.1](02_b.ipynb#ex-1-1).", "names exercise 1.1"),
    ("See [this](01_a.ipynb#no-such-anchor).", "has no anchor #no-such-anchor"),
    ("See [chapter 3](03_c.ipynb).", "no file 03_c.ipynb"),
    ("As chapter 1 shows.", "bare reference 'chapter 1'"),
    ("As exercise 1.1 shows.", "bare reference 'exercise 1.1'"),
    ("chapters [1](01_a.ipynb) and [7](01_a.ipynb)", "names chapter 7"),
])
def test_a_deliberately_wrong_reference_fails(tiny_book, markdown, message):
    tmp, a, _ = tiny_book
    c = _notebook(tmp, "02_b.ipynb", "2. B", [markdown])
    problems = crossrefs.Checker([crossrefs.load(a), crossrefs.load(c)]).problems()
    assert any(message in p for p in problems), problems


def test_code_comments_must_name_a_chapter_and_exercise_that_exist(tiny_book):
    tmp, a, b = tiny_book
    nb = json.loads(b.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": "x = 1  # chapter 9's task, see exercise 1.7"})
    b.write_text(json.dumps(nb))
    problems = crossrefs.Checker([crossrefs.load(a), crossrefs.load(b)]).problems()
    assert any("'chapter 9' names no chapter" in p for p in problems)
    assert any("names no exercise" in p for p in problems)


def test_glossary_links_use_the_anchor_sphinx_makes(tiny_book):
    # Sphinx keeps a term's case in its anchor (term-KV-cache): a link in lower case built fine in MyST's preview
    # and failed the book build with -W, which this check now catches before the build
    tmp, a, _ = tiny_book
    book = tmp / "book"
    book.mkdir()
    (book / "glossary.md").write_text("# Glossary\n\n```{glossary}\nKV cache\nKV 缓存\n  The keys and values kept.\n\n"
                                      "pass@k\n  At least one of k samples right.\n```\n", encoding="utf-8")
    ok = _notebook(tmp, "02_b.ipynb", "2. B", ["[the cache](book/glossary.md#term-KV-cache) and "
                                               "[pass@k](book/glossary.md#term-pass-k)"])
    assert crossrefs.Checker([crossrefs.load(a), crossrefs.load(ok)]).problems() == []
    wrong = _notebook(tmp, "02_b.ipynb", "2. B", ["[the cache](book/glossary.md#term-kv-cache)"])
    problems = crossrefs.Checker([crossrefs.load(a), crossrefs.load(wrong)]).problems()
    assert any("glossary.md has no anchor #term-kv-cache" in p for p in problems), problems
