"""The book's own English prose as one plain-text corpus: a frozen snapshot for chapter 7c to train on.

    python tools/prose_corpus.py            # rewrites minitfm/lm/assets/book_prose.txt and book_prose.json

Sources, in this order: the Markdown cells of every notebook in ``notebooks/`` (sorted by file name; not
chapter 7c, which trains on the result), then the pages ``book/intro.md``, ``book/how_to_use.md``,
``book/instructors.md`` and ``book/glossary.md`` (English lines only: a line holding a Chinese character is
dropped; elsewhere a Chinese word quoted in a sentence is dropped). Exercise texts and the prose of their hidden solutions are Markdown, so they are included.

What is stripped: fenced code blocks (a MyST directive's fence goes, its content stays), inline code spans,
math (``$...$`` and ``$$...$$``), HTML tags and comments (the text between tags stays), link and image
targets (a link keeps its text, an image goes), MyST roles (``{term}`` and ``{doc}`` keep their text,
``{cite}`` goes), ``(label)=`` lines and directive options, headings' ``#``, list and quote markers,
emphasis markers, tables' pipes (a table row becomes a line). Whitespace is normalised: one paragraph
per line.

The file: each source is a header line ``<|source|> notebooks/01_attention.ipynb``, its paragraphs, one per
line, then a blank line. ``book_prose.json`` gives each source's character span ``[start, end)`` in the
file's text (Python string offsets, header excluded), so a chapter can hold a whole source out as
validation text: ``text[start:end]``. The output depends only on the sources: running the tool twice
writes the same bytes. The snapshot does not follow later edits of the chapters until it is rewritten.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_TEXT = ROOT / "minitfm" / "lm" / "assets" / "book_prose.txt"
OUT_INDEX = ROOT / "minitfm" / "lm" / "assets" / "book_prose.json"
PAGES = ("book/intro.md", "book/how_to_use.md", "book/instructors.md", "book/glossary.md")
EXCLUDE = ("07c_tokens.ipynb",)
HEADER = "<|source|> "

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
_CJK_RUN = re.compile(_CJK.pattern + "+(?:[/、，] ?" + _CJK.pattern + "+)*")
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<![\s\\])\$(?!\d)")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_ROLE = re.compile(r"\{([a-z:]+)\}(`+)(.+?)\2")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_TAG = re.compile(r"</?[A-Za-z][^<>]*?/?>")
_AUTOLINK = re.compile(r"<(https?://[^>]+)>")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_EMPHASIS = re.compile(r"\*{1,3}(?=\S)|(?<=\S)\*{1,3}|(?<!\w)_{1,2}(?=\S)|(?<=\S)_{1,2}(?!\w)")


def _role_text(match: re.Match) -> str:
    role, content = match.group(1), match.group(3)
    if role.startswith("cite") or role in ("eq", "numref", "download"):
        return ""
    target = re.match(r"(.*?)\s*<[^>]*>$", content, re.S)  # {ref}`text <label>` keeps its text
    return target.group(1) if target else content


def _drop_code_blocks(lines: list[str]) -> list[str]:
    """Lines outside code fences; a MyST directive's fence (```{name}) keeps its content, minus options."""
    kept, fence, directive = [], None, False
    for line in lines:
        match = _FENCE.match(line)
        if fence is None and match:
            fence, directive = match.group(2), match.group(3).strip().startswith("{")
            kept.append("")  # a fence ends the paragraph before it
            continue
        if fence is not None and match and match.group(2).startswith(fence[0] * len(fence)) \
                and not match.group(3).strip():
            fence = None
            kept.append("")
            continue
        if fence is None:
            kept.append(line)
        elif directive and not re.match(r"^\s*:[\w-]+:", line):
            kept.append(line)
    return kept


def _clean_inline(text: str) -> str:
    text = _ROLE.sub(_role_text, text)
    text = _CODE_SPAN.sub("", text)
    text = _INLINE_MATH.sub("", text)
    text = _IMAGE.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub("", text)
    text = _TAG.sub(" ", text)
    text = _EMPHASIS.sub("", text)
    text = text.replace("\\", "")
    text = _CJK_RUN.sub("", text)  # the corpus is English: a Chinese term quoted in a sentence goes
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"\s+([,.;:!?)])", r"\1", text)


def markdown_to_paragraphs(markdown: str, english_only: bool = False) -> list[str]:
    """The prose paragraphs of one Markdown text, code, math and markup stripped, one string each."""
    markdown = _COMMENT.sub("", markdown.replace("\r\n", "\n"))
    lines = _drop_code_blocks(markdown.split("\n"))
    text = _DISPLAY_MATH.sub("\n\n", "\n".join(lines))
    paragraphs, current = [], []

    def flush():
        if current:
            paragraph = _clean_inline(" ".join(current))
            if re.search(r"[A-Za-z]", paragraph):
                paragraphs.append(paragraph)
            current.clear()

    for line in text.split("\n"):
        if english_only and _CJK.search(line):
            flush()
            continue
        stripped = line.strip()
        if not stripped or re.match(r"^\(.+\)=$", stripped) or re.match(r"^[-*_]{3,}$", stripped):
            flush()
            continue
        if stripped.startswith("|"):  # a table row: one line, cells separated by spaces
            flush()
            if not re.match(r"^\|?[\s:|-]+\|?$", stripped):
                current.append(" ".join(cell for cell in stripped.strip("|").split("|")))
                flush()
            continue
        if stripped.startswith("#"):
            flush()
            current.append(stripped.lstrip("#"))
            flush()
            continue
        stripped = re.sub(r"^(?:>\s?)+", "", stripped)
        if _LIST_MARKER.match(stripped):
            flush()
            stripped = _LIST_MARKER.sub("", stripped)
        if re.match(r"^</?(div|details|summary|a)\b", stripped):  # a block tag ends a paragraph
            flush()
            current.append(stripped)
            flush()
            continue
        current.append(stripped)
    flush()
    return paragraphs


def notebook_markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def sources(root: Path = ROOT) -> list[tuple[str, str, bool]]:
    """``(name, markdown, english_only)`` for every source, in corpus order."""
    found = []
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        if path.name not in EXCLUDE:
            found.append((f"notebooks/{path.name}", notebook_markdown(path), False))
    for page in PAGES:
        found.append((page, (root / page).read_text(encoding="utf-8"), page.endswith("glossary.md")))
    return found


def build_corpus(root: Path = ROOT) -> tuple[str, dict]:
    """The corpus text and its index (each source's span, sizes and the text's SHA-256)."""
    parts, spans, offset = [], [], 0
    for name, markdown, english_only in sources(root):
        body = "\n".join(markdown_to_paragraphs(markdown, english_only)) + "\n"
        header = HEADER + name + "\n"
        start = offset + len(header)
        parts += [header, body, "\n"]
        spans.append({"name": name, "start": start, "end": start + len(body)})
        offset = start + len(body) + 1
    text = "".join(parts)
    index = {"format": "one line '<|source|> NAME' per source, then its paragraphs one per line; spans are "
                       "[start, end) offsets into the text as a Python str",
             "chars": len(text), "bytes": len(text.encode("utf-8")),
             "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "sources": spans}
    return text, index


def main(argv: list[str]) -> int:
    text, index = build_corpus()
    OUT_TEXT.write_text(text, encoding="utf-8", newline="\n")
    OUT_INDEX.write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8", newline="\n")
    print(f"wrote {OUT_TEXT.relative_to(ROOT)}: {index['bytes']:,} bytes, {index['chars']:,} characters, "
          f"{len(index['sources'])} sources; index in {OUT_INDEX.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
