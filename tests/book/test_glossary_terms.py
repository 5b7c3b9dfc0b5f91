"""Every term line of the glossary is unique, in both editions (a term written twice, even as an entry's English and
Chinese names, makes Sphinx warn of a duplicate term description, and the -W build fails)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def term_lines(text: str) -> list[str]:
    """The term lines of the ```{glossary} block: the unindented, non-empty lines (definitions are indented)."""
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip() and not line[0].isspace()]


@pytest.mark.parametrize("page", ["book/glossary.md", "zh_CN/book/glossary.md"])
def test_no_glossary_term_is_written_twice(page):
    counts = Counter(term_lines((ROOT / page).read_text(encoding="utf-8")))
    assert len(counts) > 100  # the block was found and read
    assert not [t for t, n in counts.items() if n > 1], f"{page}: terms written twice: " + \
        ", ".join(t for t, n in counts.items() if n > 1)


def test_a_term_written_twice_is_found():
    text = "```{glossary}\nYaRN\nYaRN\n  a RoPE scaling\n\nAdam\nAdam 优化器\n  an optimizer\n```\n"
    assert Counter(term_lines(text))["YaRN"] == 2
