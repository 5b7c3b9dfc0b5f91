"""tools/prose_corpus.py: deterministic, strips code, math and markup, and its committed snapshot is consistent."""
import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import prose_corpus  # noqa: E402

MARKDOWN = r"""# 3. A *title*

Attention is `softmax(q @ k.T)` useful, as $\sqrt{d_k}$ shows ([Vaswani et al., 2017](../book/references.md#cite-x)).
A second line of the **same** paragraph, see {term}`attention` and {cite:t}`vaswani2017attention`.

$$
\mathrm{softmax}(x)_i = e^{x_i}
$$

```python
def hidden_code():
    return 42
```

<div class="exercise" id="ex-3-1">

**Exercise 3.1 (check).** Predict the <b>value</b>.

</div>

<details class="solution">
<summary>Solution (click to open)</summary>

The answer is easy.

</details>

- first item
- second item with [a link](https://example.com/page)
1. numbered item

| setting | change |
|---|---|
| base | none |

(my-label)=
<a id="ch3-claim-x"></a>
<!-- a comment that must go -->
```{admonition} Note
:class: tip
Kept directive text.
```
"""


def fake_book(tmp_path, markdown=MARKDOWN):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "book").mkdir()
    cells = [{"cell_type": "markdown", "metadata": {}, "source": markdown.splitlines(True)},
             {"cell_type": "code", "metadata": {}, "source": ["secret_code_cell = 1\n"], "outputs": [],
              "execution_count": None}]
    for name in ("01_a.ipynb", "07c_tokens.ipynb"):
        (tmp_path / "notebooks" / name).write_text(json.dumps({"cells": cells}), encoding="utf-8")
    for page in prose_corpus.PAGES:
        text = "Glossary words\n注意力\n  A definition.\n" if page.endswith("glossary.md") else f"Page {page}.\n"
        (tmp_path / page).write_text(text, encoding="utf-8")
    return tmp_path


def test_strips_code_math_and_markup():
    paragraphs = prose_corpus.markdown_to_paragraphs(MARKDOWN)
    text = "\n".join(paragraphs)
    for gone in ("softmax(q", "sqrt", "hidden_code", "42", "$", "`", "<", ">", "](", "cite", "vaswani2017",
                 "**", "#", "|", "---", "my-label", "comment", ":class:", "example.com", "- first"):
        assert gone not in text, gone
    assert paragraphs[0] == "3. A title"
    assert "Attention is useful, as shows (Vaswani et al., 2017). A second line of the same paragraph, see " \
           "attention and." in paragraphs
    for kept in ("Exercise 3.1 (check). Predict the value.", "The answer is easy.", "first item",
                 "second item with a link", "numbered item", "setting change", "base none", "Kept directive text."):
        assert kept in paragraphs, kept


def test_is_deterministic_skips_chapter_7c_and_keeps_english_lines_only(tmp_path):
    root = fake_book(tmp_path)
    first, index = prose_corpus.build_corpus(root)
    second, _ = prose_corpus.build_corpus(root)
    assert first == second
    names = [s["name"] for s in index["sources"]]
    assert names == ["notebooks/01_a.ipynb", *prose_corpus.PAGES]
    assert "secret_code_cell" not in first and "注意力" not in first and "A definition." in first
    glossary = index["sources"][-1]
    assert first[glossary["start"]:glossary["end"]] == "Glossary words\nA definition.\n"  # the term, then its definition


@pytest.fixture(scope="module")
def snapshot():
    text = prose_corpus.OUT_TEXT.read_text(encoding="utf-8")
    index = json.loads(prose_corpus.OUT_INDEX.read_text(encoding="utf-8"))
    return text, index


def test_the_committed_snapshot_matches_its_index(snapshot):
    text, index = snapshot
    assert index["chars"] == len(text) and index["bytes"] == len(text.encode("utf-8"))
    assert index["sha256"] == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert index["bytes"] >= 300_000
    end = 0
    for source in index["sources"]:
        header = prose_corpus.HEADER + source["name"] + "\n"
        assert text[source["start"] - len(header):source["start"]] == header
        assert source["start"] - len(header) == end  # the sources tile the file, in order
        body = text[source["start"]:source["end"]]
        assert body.endswith("\n") and "\n\n" not in body and prose_corpus.HEADER not in body
        end = source["end"] + 1
    assert end == len(text)
    assert {"notebooks/07_training.ipynb", "book/glossary.md"} <= {s["name"] for s in index["sources"]}
    assert "notebooks/07c_tokens.ipynb" not in {s["name"] for s in index["sources"]}


def test_the_snapshot_holds_prose_only(snapshot):
    text, _ = snapshot
    for marker in ("```", "$$", "](", "<div", "<details", "{term}", "{cite", "import torch"):
        assert marker not in text, marker
    assert not prose_corpus._CJK.search(text)


def test_the_snapshot_ships_as_package_data():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"minitfm.lm" = ["assets/*"]' in pyproject and prose_corpus.OUT_TEXT.parent == ROOT / "minitfm" / "lm" / "assets"
