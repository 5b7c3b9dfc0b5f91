"""Translations of the book: one source of code and outputs, the English prose as the source of the Chinese.

Every piece of English prose the book ships has one entry in a translation file under ``locale/zh_CN/``:

- a notebook ``notebooks/NAME.ipynb`` -> ``locale/zh_CN/notebooks/NAME.yml``, one entry per markdown cell,
  keyed by the cell id (nbformat 4.5 ids are stable: editing a cell keeps its id);
- a book page ``book/NAME.md`` -> ``locale/zh_CN/book/NAME.yml``, one entry per block (paragraphs, lists,
  tables, directives, split at blank lines outside code fences and math), keyed by the anchor of the
  section it sits in and its number there (``how-to-read/2``);
- ``README.md`` -> ``locale/zh_CN/README.yml`` the same way.

``extract`` gives each translation back to the English it translates wherever that English now is (as
gettext's ``msgmerge`` does): inserting a block renumbers the blocks after it, and their translations stay
current. Only then does a translation stay under its key (stale, the English having changed).

Each entry holds the English it translates (``en``) beside the Chinese (``zh``), so that when the English
changes the tool can say which file, which cell, what the English was and what it is now::

    python tools/i18n.py extract            # add entries for new English, keep every translation
    python tools/i18n.py status             # per file: entries, translated, missing, stale
    python tools/i18n.py check              # every problem, one line each; exit 1 if any
    python tools/i18n.py stale [FILE...]    # the stale entries, with the old and the new English

A translator edits ``zh`` (and, after checking the new English, copies it into ``en``); nothing else in
the file needs touching. Math, code spans, link targets, anchors and the heading levels of a translation
must be those of its English (as sets; the words of math's ``\\text{...}`` and a Python code block's comments
are prose): :func:`invariant_problems` checks them. A space typed beside full-width
punctuation or between two Chinese characters (``）␣和``) is reported too (:func:`typed_spaces`).

A figure's alt text is English prose too, but it lives in its code cell's metadata
(``mystnb.image.alt``), not in Markdown: it has its own entry, keyed ``<cell id>/alt``.

The Chinese edition is written from the English files and the translations, never edited by hand. A line
break inside a paragraph that would render as a space between Chinese text, full-width punctuation, a link or
emphasis is removed on the way (:func:`join_cjk_lines`), so translators may wrap lines freely::

    python tools/i18n.py sync               # extract, then write everything below (the one command)
    python tools/i18n.py notebooks          # zh_CN/notebooks/NAME.ipynb: the English notebook, Markdown
                                            #   (and figure alt texts) in Chinese, code and outputs identical
    python tools/i18n.py pages              # zh_CN/book/NAME.md: the book pages in Chinese
    python tools/i18n.py readme             # README.zh-CN.md
    python tools/i18n.py site [OUT]         # the Chinese Jupyter Book source tree (default _build/zh_src),
                                            #   which tools/build_book.sh builds into _build/html/zh_CN/

Each of these refuses, listing the problems, while a translation is missing, stale or breaks an
invariant; ``--allow-missing`` puts the English in such an entry's place instead (for development only:
never commit an edition written with it). ``check`` (no file arguments) also reports a zh_CN/ file or
README.zh-CN.md that is not what ``sync`` would write.
"""
from __future__ import annotations

import argparse
import copy
import difflib
import functools
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
LANG = "zh_CN"
LOCALE = ROOT / "locale" / LANG


# ---- sources -------------------------------------------------------------------------------------------

def notebook_sources(root: Path = ROOT) -> list[Path]:
    """The notebooks of the book (every ``notebooks/*.ipynb``)."""
    return sorted((root / "notebooks").glob("*.ipynb"))


def page_sources(root: Path = ROOT) -> list[Path]:
    """The book's markdown pages that the site builds, and the README."""
    pages = sorted(p for p in (root / "book").glob("*.md") if p.name != "CONTRIBUTING_CHAPTERS.md")
    return pages + [root / "README.md"]


def translation_path(source: Path, root: Path = ROOT) -> Path:
    """``notebooks/01_attention.ipynb`` -> ``locale/zh_CN/notebooks/01_attention.yml``."""
    rel = source.resolve().relative_to(root.resolve())
    return root / "locale" / LANG / rel.parent / (rel.stem + ".yml")


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_OPTION = re.compile(r"^\s*:[\w-]+:")  # a directive's option line (":class: tip") right after its opening fence


def slug(text: str) -> str:
    """A heading's section key: lower case, punctuation dropped, runs of spaces to one hyphen ('top' if empty).

    Close to MyST's anchors but not the same (MyST keeps each space); the keys are internal to the translation
    files, and the Chinese site takes its anchors from the English site, not from this function.
    """
    text = re.sub(r"[`*_\[\]()]", "", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"\s+", "-", text).strip("-") or "top"


def _is_directive(info: str) -> bool:
    """A fence's info string opens a MyST directive that holds prose (```{note}), not code (```{code-cell})."""
    return info.startswith("{") and not info.startswith(("{code", "{math"))


Directives = tuple  # the directives open at a point of a page, outermost first: ((fence, name), ...)


def _scan(lines: list[str], inside: Directives = ()) -> list[tuple[str, Directives]]:
    """(kind, the directives open before the line) for each line; see :func:`line_kinds`."""
    out, fence, math, directives, options = [], None, False, list(inside), False
    for line in lines:
        stripped, before = line.strip(), tuple(directives)
        kind = "code" if fence else "math" if math else "prose"
        if options and _OPTION.match(line):
            out.append(("directive", before))
            continue
        options = False
        m = _FENCE.match(line)
        if fence is None and m and not math:
            marker, info = m.group(1), stripped[len(m.group(1)):].strip()
            if _is_directive(info):
                directives.append((marker, info[1:].split("}")[0].strip()))
                kind, options = "directive", True
            elif (not info and directives and marker[0] == directives[-1][0][0]
                  and len(marker) >= len(directives[-1][0])):
                directives.pop()
                kind = "directive"
            else:
                fence, kind = marker, "code"
        elif fence is not None and stripped.startswith(fence[0] * len(fence)) and stripped.strip(fence[0]) == "":
            fence = None
        elif fence is None and stripped.count("$$") % 2 == 1:
            math, kind = not math, "math"
        elif kind == "prose" and stripped and directives and directives[-1][1] == "glossary" and not line[0].isspace():
            kind = "term"
        out.append((kind, before))
    return out


def line_kinds(lines: list[str], inside: Directives = ()) -> list[str]:
    """What each line of a Markdown text is: ``"prose"``, ``"code"`` (a code fence, its fences included),
    ``"math"`` (a ``$$`` display), ``"directive"`` (a MyST directive's opening or closing fence, or one of
    its option lines) or ``"term"`` (a term of a ``{glossary}``: its definition is the indented prose below).

    A directive's body is prose. Open directives are kept on a stack, so that a directive's closing fence
    closes it instead of opening a code fence, and directives nest (a ```` ````{note} ```` holding a
    ```` ```{tip} ````); ``inside`` is the stack at the text's first line, for a block taken from inside a
    directive (:func:`page_blocks`). A code fence closes at a fence of its own character at least as long,
    with no info string.
    """
    return [kind for kind, _ in _scan(lines, inside)]


def page_blocks(text: str) -> list[tuple[str, Directives]]:
    """The blocks of a page (split at blank lines, never inside a code fence or a ``$$`` display), each with
    the directives open where it starts. A directive's body (```{note} ... ```) is prose: it is split like
    the rest of the page."""
    blocks, current, start = [], [], ()
    lines = text.split("\n")
    for line, (kind, inside) in zip(lines, _scan(lines)):
        if kind == "prose" and line.strip() == "":
            if current:
                blocks.append(("\n".join(current), start))
                current = []
            continue
        if not current:
            start = inside
        current.append(line)
    if current:
        blocks.append(("\n".join(current), start))
    return blocks


def split_blocks(text: str) -> list[str]:
    """Split markdown into blocks at blank lines, never inside a code fence or a ``$$`` display."""
    return [block for block, _ in page_blocks(text)]


def _keyed_blocks(text: str) -> list[tuple[str, str, Directives]]:
    entries, section, count = [], "top", 0
    seen: dict[str, int] = {}
    for block, inside in page_blocks(text):
        m = _HEADING.match(block.split("\n")[0])
        if m and "\n" not in block:
            base = slug(m.group(2))
            seen[base] = seen.get(base, 0) + 1
            section, count = (base if seen[base] == 1 else f"{base}-{seen[base] - 1}"), 0
        count += 1
        entries.append((f"{section}/{count}", block, inside))
    return entries


def page_entries(text: str) -> list[tuple[str, str]]:
    """(key, English block) for every block of a page; key = section anchor / number in that section."""
    return [(key, block) for key, block, _ in _keyed_blocks(text)]


def page_contexts(text: str) -> dict[str, Directives]:
    """key -> the directives open where the page's block starts (``()`` for most blocks)."""
    return {key: inside for key, _, inside in _keyed_blocks(text) if inside}


ALT = "/alt"  # key suffix of a figure's alt text: "<cell id>/alt"


def figure_alt(cell) -> str:
    """The alt text MyST-NB gives a code cell's figures (``metadata.mystnb.image.alt``), or ''."""
    image = (cell.get("metadata", {}).get("mystnb") or {}).get("image") or {}
    alt = image.get("alt") if isinstance(image, dict) else None
    return alt if isinstance(alt, str) else ""


def translatable_entries(nb) -> list[tuple[str, str]]:
    """Every piece of English prose of a notebook, in cell order: Markdown cells and figure alt texts."""
    entries = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            entries.append((cell.id, cell.source))
        elif cell.cell_type == "code" and figure_alt(cell).strip():
            entries.append((cell.id + ALT, figure_alt(cell)))
    return entries


def source_entries(source: Path) -> list[tuple[str, str]]:
    """(key, English) for every piece of English prose of a notebook or a page, in order."""
    if source.suffix == ".ipynb":
        return translatable_entries(nbformat.read(source, as_version=4))
    return page_entries(source.read_text(encoding="utf-8"))


def source_contexts(source: Path) -> dict[str, Directives]:
    """key -> the directives open where the entry starts (only a page's blocks inside a directive have any)."""
    return {} if source.suffix == ".ipynb" else page_contexts(source.read_text(encoding="utf-8"))


# ---- translation files ---------------------------------------------------------------------------------

class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value: str):
    style = "|" if "\n" in value or len(value) > 80 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


@dataclass
class Entry:
    key: str
    en: str
    zh: str = ""


@dataclass
class Translation:
    source: str  # repository-relative path of the English file
    entries: list[Entry] = field(default_factory=list)

    def by_key(self) -> dict[str, Entry]:
        return {e.key: e for e in self.entries}


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that holds a key twice (PyYAML would keep the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the field {key!r} appears twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


_FIELDS = ("key", "en", "zh")


def read_translation(path: Path) -> Translation:
    """A translation file. Refuses (ValueError naming the file and the entry) what would otherwise lose a
    translation silently: invalid YAML, an entry that is not a mapping of ``key``, ``en`` and ``zh`` (a
    field twice, a misspelt field, a value that is not text), or a key that two entries share."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not a valid translation file: {error}") from error
    if not isinstance(data, dict) or "source" not in data or not isinstance(data.get("entries", []), list):
        raise ValueError(f"{path}: a translation file is a mapping with 'source' and a list 'entries'")
    entries, first = [], {}
    for n, e in enumerate(data.get("entries") or [], 1):
        if not isinstance(e, dict):
            raise ValueError(f"{path}: entry {n} is a {type(e).__name__} ({e!r:.60}); expected a mapping with "
                             f"'key', 'en' and 'zh'")
        if e.get("key") in (None, ""):
            raise ValueError(f"{path}: entry {n} has no 'key' (expected 'key', 'en' and 'zh'; got {sorted(e)})")
        key = str(e["key"])
        unknown = sorted(str(k) for k in e if k not in _FIELDS)
        if unknown:
            raise ValueError(f"{path}: entry {n} ({key}) has unknown field(s) {unknown}; expected 'key', 'en' "
                             f"and 'zh'")
        for name in ("en", "zh"):
            if e.get(name) is not None and not isinstance(e[name], str):
                raise ValueError(f"{path}: entry {n} ({key}): '{name}' must be text, got "
                                 f"{type(e[name]).__name__} {e[name]!r:.60}")
        if key in first:
            raise ValueError(f"{path}: entries {first[key]} and {n} have the same key {key!r}; each cell or "
                             f"block has one entry")
        first[key] = n
        entries.append(Entry(key, e.get("en") or "", e.get("zh") or ""))
    return Translation(data["source"], entries)


def same_english(a: str, b: str) -> bool:
    """Whether two versions of an entry's English are the same (line breaks at the end do not count)."""
    return a.rstrip("\n") == b.rstrip("\n")


def write_translation(path: Path, tr: Translation) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"source": tr.source,
            "entries": [{"key": e.key, "en": e.en, "zh": e.zh} for e in tr.entries]}
    header = (f"# Chinese translation of {tr.source}: one entry per "
              f"{'markdown cell (key = cell id)' if tr.source.endswith('.ipynb') else 'block (key = section/number)'}.\n"
              "# Edit `zh`; `en` is the English it translates (python tools/i18n.py stale shows what changed).\n")
    text = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=10_000)
    path.write_text(header + text, encoding="utf-8")


FUZZY = 0.6  # how similar (difflib's ratio) an orphaned translation's English must be to a new entry's


def match_entries(current: list[tuple[str, str]], old: list[Entry]) -> list[Entry | None]:
    """For each (key, English) of ``current``, the old entry whose translation it gets, or None.

    The way gettext's msgmerge does it, by content first: (1) the entry with the same key and the same
    English; (2) an entry with the same English under another key (a block that moved, or whose number
    changed because a block was inserted above it); (3) the entry with the same key, if no other block
    took it (the English changed: the translation is stale); (4) the most similar translation that no
    block took (difflib ratio at least ``FUZZY``: the English changed and the key too; stale). Each old
    entry is given at most once.
    """
    chosen: list[Entry | None] = [None] * len(current)
    used: set[int] = set()
    index = {e.key: i for i, e in enumerate(old)}
    translated = [i for i, e in enumerate(old) if e.zh.strip()]

    def take(n: int, i: int) -> None:
        chosen[n] = old[i]
        used.add(i)

    for n, (key, en) in enumerate(current):
        i = index.get(key)
        if i is not None and old[i].zh.strip() and same_english(old[i].en, en):
            take(n, i)
    by_english = defaultdict(list)
    for i in translated:
        if i not in used:
            by_english[old[i].en.rstrip("\n")].append(i)
    for n, (key, en) in enumerate(current):
        if chosen[n] is None and by_english.get(en.rstrip("\n")):
            take(n, by_english[en.rstrip("\n")].pop(0))
    for n, (key, en) in enumerate(current):
        i = index.get(key)
        if chosen[n] is None and i is not None and i not in used:
            take(n, i)
    for n, (key, en) in enumerate(current):
        if chosen[n] is None:
            ratios = [(difflib.SequenceMatcher(None, old[i].en, en).ratio(), -i) for i in translated if i not in used]
            best = max(ratios, default=(0.0, 0))
            if best[0] >= FUZZY:
                take(n, -best[1])
    return chosen


def extract(source: Path, root: Path = ROOT) -> Translation:
    """The translation of ``source`` with an entry for every current piece of English, in source order.

    Each translation goes to the entry whose English it translates, wherever its key now is (inserting a
    block renumbers the blocks after it; their translations stay current); else it stays under its key, or
    goes to the most similar new English, as stale (``en`` still holds the English it translates).
    Translations that no entry takes are dropped. See :func:`match_entries`.
    """
    path = translation_path(source, root)
    old = read_translation(path).entries if path.exists() else []
    rel = source.resolve().relative_to(root.resolve()).as_posix()
    current = source_entries(source)
    entries = []
    for (key, en), prev in zip(current, match_entries(current, old)):
        translated = prev is not None and prev.zh.strip()
        entries.append(Entry(key, prev.en if translated and not same_english(prev.en, en) else en,
                             prev.zh if prev else ""))
    return Translation(rel, entries)


# ---- checks --------------------------------------------------------------------------------------------

_CODE = re.compile(r"(`+)(.+?)\1", re.S)
# Math where markdown-it with mdit_py_plugins' dollarmath is not installed (dollarmath is what MyST uses): a
# display is $$...$$; an inline $...$ opens at a $ followed by no space and closes at a $ preceded by no
# space and followed by no digit, so that prices ("cost $4.6M and Llama $2M") are not math (pandoc's rule).
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?![\s$])(.+?)(?<![\s\\$])\$(?![\d$])", re.S)
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_ANCHOR = re.compile(r"""\b(?:id|name)\s*=\s*["']([^"']+)["']""")
_LABEL = re.compile(r"^\((.+?)\)=\s*$", re.M)
_FENCED = re.compile(r"^(\s*)(`{3,}|~{3,})(.*?)$\n(.*?)^\1\2\s*$", re.S | re.M)


@functools.lru_cache(maxsize=1)
def _markdown():
    """CommonMark with GFM tables and, where mdit_py_plugins is installed, dollarmath (MyST's ``$``/``$$``
    math). A ``$`` must touch its math on the inside, so that prices are text ("cost $4.6M and Llama $2M"):
    MyST's default is laxer (``myst_dmath_allow_space``), so the English writes ``\\$`` for a literal dollar
    sign that another ``$`` follows. (dollarmath's ``allow_digits=False`` is not used: at the start of a
    table cell it reads the cell's last character as the one before the ``$``.)"""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    try:
        from mdit_py_plugins.dollarmath import dollarmath_plugin
    except ImportError:  # the regular expressions above stand in
        return md
    return md.use(dollarmath_plugin, allow_space=False, double_inline=True)


def _has_dollarmath() -> bool:
    return "math_inline" in _markdown().get_all_rules()["inline"]


_MATH_TOKENS = ("math_inline", "math_inline_double", "math_block", "math_block_label")


def _walk(tokens):
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


@functools.lru_cache(maxsize=8192)
def math_spans(text: str) -> frozenset[str]:
    """The math of a Markdown text ($...$ and $$...$$, whitespace runs made one space), outside code and
    inside directives' bodies (a directive's fences and options are dropped first)."""
    if "$" not in text:
        return frozenset()
    if not _has_dollarmath():
        rest = _CODE.sub(" ", text)
        display = {" ".join(m.group(1).split()) for m in _DISPLAY.finditer(rest)}
        return frozenset(display | {" ".join(m.group(1).split()) for m in _INLINE.finditer(_DISPLAY.sub(" ", rest))})
    return frozenset(" ".join(t.content.split()) for t in _walk(_markdown().parse(_prose_view(text)))
                     if t.type in _MATH_TOKENS)


def _prose_view(text: str, inside: Directives = ()) -> str:
    """The text with its directives' fence and option lines blanked, so that their bodies parse as Markdown,
    and each glossary term made a paragraph of its own."""
    lines = text.split("\n")
    view = {"directive": lambda line: "", "term": lambda line: line + "\n"}
    return "\n".join(view.get(kind, str)(line) for line, kind in zip(lines, line_kinds(lines, inside)))


def heading_levels(text: str) -> list[int]:
    """The level of every Markdown heading (CommonMark: none inside code fences), in order."""
    return list(_heading_levels(text))


@functools.lru_cache(maxsize=8192)
def _heading_levels(text: str) -> tuple[int, ...]:
    return tuple(int(t.tag[1]) for t in _markdown().parse(text) if t.type == "heading_open")


_MATH_WORDS = re.compile(r"\\text\{[^{}]*\}")  # words inside math (\text{tokens before it}): a translation's own
_PYTHON_FENCES = ("", "python", "py", "python3", "ipython", "ipython3")


def without_comments(code: str) -> str:
    """Python code (a fence in Markdown, such as a solution) without its comments: a translation translates them.
    Each comment goes with the spaces before it, and a line that held only a comment goes; code that Python's
    tokenizer cannot read is kept whole."""
    import io
    import textwrap
    import tokenize

    lines = textwrap.dedent(code).split("\n")
    try:
        comments = [t.start for t in tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return code.strip()
    for row, col in comments:
        lines[row - 1] = lines[row - 1][:col].rstrip() or None
    return "\n".join(line for line in lines if line is not None).strip()


def invariants(text: str) -> dict[str, set]:
    """What a translation must keep exactly: math, code spans, link targets, anchors, code blocks, and the
    levels of its headings in order (the Chinese site gives each heading the anchor of its English one).
    Two things inside them are prose and may be translated: the words of math's ``\\text{...}`` and the comments
    of a Python code block (a solution in Markdown; code cells are never translated)."""
    code_blocks = set()

    def keep_code(m):
        info = m.group(3).strip()
        if _is_directive(info):
            return m.group(0)  # a directive's body is prose
        code = m.group(4)
        code_blocks.add(without_comments(code) if info.split(" ")[0].lower() in _PYTHON_FENCES else code.strip())
        return ""

    rest = _FENCED.sub(keep_code, text)
    code = {m.group(2).strip() for m in _CODE.finditer(rest)}
    math = {_MATH_WORDS.sub(r"\\text{}", m) for m in math_spans(rest)}
    rest = _CODE.sub(" ", rest)
    return {
        "math": math,
        "code spans": code,
        "code blocks": code_blocks,
        "links": set(_LINK.findall(rest)),
        "anchors": set(_ANCHOR.findall(rest)) | set(_LABEL.findall(rest)),
        "heading levels": {" ".join(f"h{n}" for n in levels)} if (levels := heading_levels(text)) else set(),
    }


def invariant_problems(en: str, zh: str) -> list[str]:
    """One line per kind of invariant that the translation does not keep (missing and extra items)."""
    want, got = invariants(en), invariants(zh)
    problems = []
    for kind in want:
        missing, extra = want[kind] - got[kind], got[kind] - want[kind]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {sorted(missing)!r:.300}")
            if extra:
                parts.append(f"extra {sorted(extra)!r:.300}")
            problems.append(f"{kind}: " + "; ".join(parts))
    return problems


@dataclass
class Problem:
    file: str  # the English source
    key: str
    kind: str  # "missing", "stale", "invariant", "space", "orphan", "no translation file"
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.file} [{self.key}] {self.kind}" + (f": {self.detail}" if self.detail else "")


def problems_of(source: Path, root: Path = ROOT) -> list[Problem]:
    """Everything wrong with the translation of one English file."""
    rel = source.resolve().relative_to(root.resolve()).as_posix()
    path = translation_path(source, root)
    if not path.exists():
        return [Problem(rel, "*", "no translation file", f"run: python tools/i18n.py extract ({path.relative_to(root)})")]
    tr = read_translation(path).by_key()
    found = []
    current = source_entries(source)
    inside = source_contexts(source)
    translated = {e.en.rstrip("\n") for e in tr.values() if e.zh.strip()}
    for key, en in current:
        entry = tr.get(key)
        if entry is None or not entry.zh.strip():
            found.append(Problem(rel, key, "missing", f"{en.strip()[:80]!r}"))
        elif not same_english(entry.en, en):
            moved = en.rstrip("\n") in translated  # its translation is under another key: extract moves it
            found.append(Problem(rel, key, "stale", f"the block moved: run python tools/i18n.py extract {rel}"
                                 if moved else f"the English changed since it was translated "
                                               f"(python tools/i18n.py stale {rel})"))
        else:
            found.extend(Problem(rel, key, "invariant", p) for p in invariant_problems(en, entry.zh))
            found.extend(Problem(rel, key, "space", f"a typed space Chinese does not have: {s!r}")
                         for s in typed_spaces(entry.zh, inside.get(key, ())))
    keys = {k for k, _ in current}
    found.extend(Problem(rel, k, "orphan", "no such cell or block in the English any more (run extract)")
                 for k in tr if k not in keys)
    return found


def all_problems(root: Path = ROOT) -> list[Problem]:
    return [p for s in notebook_sources(root) + page_sources(root) for p in problems_of(s, root)]


# ---- the Chinese edition -------------------------------------------------------------------------------
# zh_CN/ mirrors the repository's layout, so that every relative link of the English resolves in the Chinese
# edition to the Chinese page: zh_CN/notebooks/02_masks.ipynb links to 01_attention.ipynb (the Chinese
# chapter next to it) and to ../book/glossary.md (zh_CN/book/glossary.md, the Chinese glossary).
README_ZH = "README.zh-CN.md"
README_BACKLINK = "[English README](README.md) · 简体中文 · 中文版网站：构建后打开 `_build/html/zh_CN/index.html`"
EDITION_DIRS = ("notebooks", "book")  # the folders of zh_CN/ the edition writes (and cleans)

# Strings of the Chinese site that no English page holds (the English are in _config.yml and _toc.yml).
ZH_SITE = {
    "title": "minitfm：亲手搭建 Transformer，实测每一条论断",
    "captions": {"Start here": "从这里开始", "Chapters": "章节", "Reference": "参考资料"},
    "search_bar_text": "搜索本书……",
    "extra_footer": "<p>代码以 MIT 许可证发布。本书的每一页，连同其中的数学公式、小部件和探索器，都由本站自己提供；"
                    "不从任何 CDN 加载内容。</p>\n",
    "nb_code_prompt_show": "显示代码",
    "nb_code_prompt_hide": "隐藏代码",
    "togglebutton_hint": "点击显示",
    "togglebutton_hint_hide": "点击隐藏",
    "author": "minitfm 的作者们",
    # labels of the theme that its catalogues leave in English (book/_ext/minitfm_i18n.py replaces them)
    "ui": {
        "Launch interactive content": "启动交互式环境", "Launch on Binder": "在 Binder 中运行",
        "Launch on Colab": "在 Colab 中运行", "Binder logo": "Binder 标志", "Colab logo": "Colab 标志",
        "Source repositories": "源代码仓库", "Repository": "源代码仓库", "Open issue": "提交问题",
        "Color mode": "颜色模式", "System Settings": "跟随系统", "Link to this heading": "链接到此标题",
        "Toggle primary sidebar": "显示或隐藏主侧边栏", "Toggle secondary sidebar": "显示或隐藏次侧边栏",
        "Toggle hidden content": "显示或隐藏内容", "Main": "主导航", "Page": "本页导航",
        "列印成 PDF": "打印为 PDF",
    },
}
# The language switch of each edition's pages (book/_ext/minitfm_i18n.py): where the other edition's root is,
# relative to this edition's root, and how the link reads. The English one is set in _config.yml.
ZH_OTHER_EDITION = {"root": "../", "lang": "en", "label": "English", "title": "Read this page in English"}


class IncompleteTranslation(ValueError):
    """Raised by the edition writers while a translation is missing, stale or breaks an invariant."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        shown = "\n  ".join(map(str, problems[:40]))
        more = f"\n  ... and {len(problems) - 40} more" if len(problems) > 40 else ""
        super().__init__(f"{len(problems)} translation problem(s); fix them (python tools/i18n.py check), or pass "
                         f"--allow-missing to use the English in their place (development only):\n  {shown}{more}")


def edition_path(source: Path, root: Path = ROOT) -> Path:
    """``notebooks/02_masks.ipynb`` -> ``zh_CN/notebooks/02_masks.ipynb``; ``README.md`` -> ``README.zh-CN.md``."""
    rel = source.resolve().relative_to(root.resolve())
    if rel.as_posix() == "README.md":
        return root / README_ZH
    return root / LANG / rel


def chinese_text(source: Path, root: Path = ROOT, allow_missing: bool = False) -> tuple[dict[str, str], list[Problem]]:
    """key -> the text the Chinese edition uses for each entry of ``source``, and the translation's problems.

    Raises :class:`IncompleteTranslation` if there are problems, unless ``allow_missing``: then an entry that
    is missing, stale or breaks an invariant gets its English.
    """
    problems = problems_of(source, root)
    if problems and not allow_missing:
        raise IncompleteTranslation(problems)
    path = translation_path(source, root)
    tr = read_translation(path).by_key() if path.exists() else {}
    bad = {p.key for p in problems if p.kind in ("missing", "stale", "invariant")}
    inside = source_contexts(source)
    text = {}
    for key, en in source_entries(source):
        entry = tr.get(key)
        text[key] = (en if key in bad or entry is None or not entry.zh.strip()
                     else join_cjk_lines(entry.zh, inside.get(key, ())))
    return text, problems


# Where a soft line break inside a paragraph must go (Markdown draws it as a space, which Chinese does not
# have): the characters on either side of it, as the reader sees them.
_CJK = re.compile("[\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u31c0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                  "\uac00-\ud7af\uff10-\uff19\uff21-\uff3a\uff41-\uff5a\U00020000-\U0003134f]")
# full-width punctuation: 、。〈〉《》「」『』【】〔〕～ and ！（），：；？ (U+3000-303F, U+FE10-FE1F, U+FE30-FE4F,
# the punctuation of U+FF00-FF65)
_FULL_WIDTH = re.compile("[\u3000-\u303f\ufe10-\ufe1f\ufe30-\ufe4f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40"
                         "\uff5b-\uff65]")
# punctuation that Chinese and English share (“” ‘’ … — ·): full width where Chinese text is next to it
_SHARED = "\u201c\u201d\u2018\u2019\u2026\u2014\u2015\u00b7"
_LIST_MARKER = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+")
_LINK_END = re.compile(r"\]\([^()\s]*(?:\s+\"[^\"]*\")?\)$")


def _char_kind(c: str) -> str:
    if _FULL_WIDTH.match(c):
        return "punctuation"
    if _CJK.match(c):
        return "chinese"
    return "shared" if c in _SHARED else "other"


def _inner_kind(chars) -> str:
    """The kind of the first character that is not shared punctuation ('other' if none)."""
    return next((k for k in map(_char_kind, chars) if k != "shared"), "other")


def renders_as_stray_space(before: str, after: str) -> bool:
    """Whether a soft line break between the visible text ``before`` and ``after`` it is drawn as a space that
    Chinese typesetting does not have: after or before full-width punctuation (``配对：⏎$x$``, ``GPT-2⏎（``),
    or between two Chinese characters (``是⏎**置换**``, ``和⏎[第 7 章](..)``). Between Chinese and a Latin word,
    math or code it stays: that is the conventional space (``的⏎GPT-2``)."""
    if not before or not after:
        return False
    a, b = _char_kind(before[-1]), _char_kind(after[0])
    if a == "shared":
        a = "punctuation" if "other" != _inner_kind(reversed(before)) or b in ("chinese", "punctuation") else "other"
    if b == "shared":
        b = "punctuation" if "other" != _inner_kind(after) or a in ("chinese", "punctuation") else "other"
    return "punctuation" in (a, b) or a == b == "chinese"


def _visible_end(line: str) -> str:
    """A line without the Markdown that closes on it (emphasis, a link's target): what the reader sees last."""
    text = line.rstrip()
    while text:
        if text[-1] in "*_":
            text = text[:-1]
        elif m := _LINK_END.search(text):
            text = text[:m.start()]
        else:
            break
    return text


def _visible_start(line: str) -> str:
    """A line without the Markdown that opens on it (emphasis, a link's ``[``)."""
    return line.strip().lstrip("*_[")


def _content_indent(line: str) -> int:
    """Where a line's text starts: after a list marker, else after its leading spaces."""
    m = _LIST_MARKER.match(line)
    return m.end() if m else len(line) - len(line.lstrip(" "))


_NOT_JOINED = ("```", "~~~", "|", "#", ">", ":")  # fences, tables, headings, quotes, definitions, options


def _joinable(prev: str, line: str) -> bool:
    """Whether the line break between two lines of prose should go: ``line`` continues ``prev``'s paragraph
    (it starts at ``prev``'s text column and is no new list item, table row, heading, quote or label; ``prev``
    ends in no hard break) and the break would render as a stray space (:func:`renders_as_stray_space`)."""
    stripped = line.strip()
    if not stripped or not prev.strip() or _LIST_MARKER.match(line):
        return False
    if len(line) - len(line.lstrip(" ")) != _content_indent(prev):
        return False
    if prev.lstrip().startswith(_NOT_JOINED) or stripped.startswith(_NOT_JOINED):
        return False
    if prev.endswith("  ") or prev.rstrip().endswith("\\") or _LABEL.match(prev.strip()) or _LABEL.match(stripped):
        return False
    return renders_as_stray_space(_visible_end(prev), _visible_start(line))


def _join(lines: list[str], at: list[int]) -> list[str]:
    """``lines`` with each line ``i + 1`` (``i`` in ``at``) appended to the line before, without the break."""
    out, after = [], set(at)
    for i, line in enumerate(lines):
        if i - 1 in after:
            out[-1] = out[-1].rstrip() + line.strip()
        else:
            out.append(line)
    return out


def _shape(text: str, inside: Directives = ()) -> tuple:
    """What Markdown makes of a text but for its soft line breaks: every token (type, tag, markup, attributes,
    content, but the text between them), the text itself, and the number of soft breaks."""
    shape, words, soft = [], [], 0
    for token in _walk(_markdown().parse(_prose_view(text, inside))):
        if token.type == "softbreak":
            soft += 1
        elif token.type == "text":
            words.append(token.content)
        else:
            content = "" if token.type in ("inline", "image") else token.content
            shape.append((token.type, token.tag, token.markup, token.info, tuple(sorted(token.attrs.items())), content))
    return shape, "".join(words), soft


@functools.lru_cache(maxsize=None)
def join_cjk_lines(text: str, inside: Directives = ()) -> str:
    """Remove each soft line break inside a paragraph that would render as a stray space in Chinese.

    Markdown turns a line break inside a paragraph into a space, which Chinese does not have; browsers draw it
    as a gap. A break goes where it sits after or before full-width punctuation, or between Chinese text and
    Chinese text, a link or emphasis (:func:`renders_as_stray_space`, which looks through ``**``, ``*`` and
    ``[..](..)``). Only inside a paragraph: never in code fences, ``$$`` displays, tables, at a list item's
    start, across a blank line, or from a glossary term to its indented definition (the next line must start
    at the text column of the line before). Inside a directive's body (```{note}) the same rules hold;
    ``inside`` names the directives open where the text starts (:func:`page_contexts`).

    Each join is checked with markdown-it: the text must parse to the same tokens with one soft break fewer
    (a join that would change emphasis, a code span or a block is not made).
    """
    lines = text.split("\n")
    kinds = line_kinds(lines, inside)
    at = [i for i in range(len(lines) - 1)
          if kinds[i] == kinds[i + 1] == "prose" and _joinable(lines[i], lines[i + 1])]
    if not at:
        return text
    shape, words, soft = _shape(text, inside)

    def same(joined: list[str], n: int) -> bool:
        new_shape, new_words, new_soft = _shape("\n".join(joined), inside)
        return new_shape == shape and new_words == words and new_soft == soft - n

    if same(_join(lines, at), len(at)):
        return "\n".join(_join(lines, at))
    kept = []  # one at a time: keep each join that leaves the parse as it was
    for i in at:
        if same(_join(lines, kept + [i]), len(kept) + 1):
            kept.append(i)
    return "\n".join(_join(lines, kept))


def stray_line_breaks(text: str, inside: Directives = ()) -> list[str]:
    """The soft line breaks of a Markdown text (as markdown-it parses it, directives' bodies included) that
    render as a stray space in Chinese (:func:`renders_as_stray_space`), each as ``'…before⏎after…'``."""
    found = []
    for token in _markdown().parse(_prose_view(text, inside)):
        if token.type != "inline" or not token.children:
            continue
        pieces = []  # what the reader sees, with None for each soft break
        for child in token.children:
            if child.type == "softbreak":
                pieces.append(None)
            elif child.type == "text":
                pieces.append(child.content)
            elif child.type in ("code_inline", "image", "hardbreak") or child.type in _MATH_TOKENS:
                pieces.append("\n" if child.type == "hardbreak" else "x")  # neither Chinese nor punctuation
        for i, piece in enumerate(pieces):
            if piece is None:
                before = "".join(p for p in pieces[:i] if p is not None)
                after = "".join(p for p in pieces[i + 1:] if p is not None)
                if renders_as_stray_space(before, after):
                    found.append(f"{before[-15:]}⏎{after[:15]}")
    return found


_TYPED_SPACE = re.compile(r"[ \t\u00a0]+")


def typed_spaces(text: str, inside: Directives = ()) -> list[str]:
    """The spaces typed into the prose of a Chinese text (as markdown-it parses it, directives' bodies included,
    code and math left out) that Chinese typesetting does not have, each as ``'…before␣after…'``: a space next
    to full-width punctuation, whatever is on its other side (``）␣和``, ``：␣`code```, ``$x$␣，``), or between
    two Chinese characters (``把␣选择方式``). Full-width punctuation carries its own space; the edition writes
    none beside it. Between Chinese and a Latin word, math or code the space stays: that is the edition's
    convention (``的 GPT-2``, ``用 `generate` 生成``), as for a line break (:func:`renders_as_stray_space`).
    Punctuation that Chinese and English share (“” · …) is left alone: a space beside it can be meant
    (``README · 本书中文版``, ``“更差” = 留出集上的损失``)."""
    found = []
    for token in _markdown().parse(_prose_view(text, inside)):
        if token.type != "inline" or not token.children:
            continue
        seen = ""  # what the reader sees, code, math and images as "x" (neither Chinese nor punctuation)
        for child in token.children:
            if child.type == "text":
                seen += child.content
            elif child.type in ("softbreak", "hardbreak"):
                seen += "\n"
            elif child.type in ("code_inline", "image", "html_inline") or child.type in _MATH_TOKENS:
                seen += "x"
        for m in _TYPED_SPACE.finditer(seen):
            before, after = seen[:m.start()].split("\n")[-1], seen[m.end():].split("\n")[0]
            kinds = (_char_kind(before[-1]), _char_kind(after[0])) if before and after else ()
            if "punctuation" in kinds or kinds == ("chinese", "chinese"):
                found.append(f"{before[-15:]}{'␣' * len(m.group())}{after[:15]}")
    return found


def chinese_notebook(source: Path, root: Path = ROOT, allow_missing: bool = False):
    """The English notebook with its Markdown cells and figure alt texts in Chinese; all else identical."""
    nb = nbformat.read(source, as_version=4)
    text, _ = chinese_text(source, root, allow_missing)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = text[cell.id]
        elif cell.cell_type == "code" and cell.id + ALT in text:
            cell.metadata["mystnb"]["image"]["alt"] = text[cell.id + ALT]
    return nb


def notebook_text(nb) -> str:
    """A notebook's file contents exactly as ``nbformat.write`` writes them."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def chinese_page(source: Path, root: Path = ROOT, allow_missing: bool = False) -> str:
    """A book page in Chinese: its blocks' translations, joined by blank lines."""
    text, _ = chinese_text(source, root, allow_missing)
    blocks = [text[key].strip("\n") for key, _ in page_entries(source.read_text(encoding="utf-8"))]
    return "\n\n".join(blocks) + "\n"


def chinese_readme(root: Path = ROOT, allow_missing: bool = False) -> str:
    """README.zh-CN.md: a line linking back to README.md, then the README's blocks in Chinese.

    The README's own line that links to README.zh-CN.md is left out (the back-link stands in its place).
    """
    source = root / "README.md"
    text, _ = chinese_text(source, root, allow_missing)
    blocks = [README_BACKLINK]
    for key, en in page_entries(source.read_text(encoding="utf-8")):
        if invariants(en)["links"] == {README_ZH}:
            continue
        blocks.append(text[key].strip("\n"))
    return "\n\n".join(blocks) + "\n"


def edition_files(root: Path = ROOT, allow_missing: bool = False) -> dict[Path, str]:
    """Every file of the Chinese edition (zh_CN/notebooks, zh_CN/book, README.zh-CN.md) -> its contents.

    Collects the problems of every source first, so that a refusal lists them all.
    """
    sources = notebook_sources(root) + page_sources(root)
    if not allow_missing:
        problems = [p for s in sources for p in problems_of(s, root)]
        if problems:
            raise IncompleteTranslation(problems)
    files = {}
    for source in sources:
        if source.suffix == ".ipynb":
            files[edition_path(source, root)] = notebook_text(chinese_notebook(source, root, allow_missing))
        elif source.name == "README.md" and source.parent.resolve() == root.resolve():
            files[edition_path(source, root)] = chinese_readme(root, allow_missing)
        else:
            files[edition_path(source, root)] = chinese_page(source, root, allow_missing)
    return files


def _write_if_changed(path: Path, text: str | bytes) -> bool:
    data = text.encode("utf-8") if isinstance(text, str) else text
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def _stray_files(root: Path, files: dict[Path, str]) -> list[Path]:
    """Files in zh_CN/notebooks and zh_CN/book that no English source writes any more."""
    wanted = {p.resolve() for p in files}
    found = []
    for folder in EDITION_DIRS:
        for path in sorted((root / LANG / folder).glob("*")):
            if path.is_file() and path.suffix in (".ipynb", ".md") and path.resolve() not in wanted:
                found.append(path)
    return found


def write_edition(root: Path = ROOT, allow_missing: bool = False, only: tuple[str, ...] = ()) -> list[Path]:
    """Write the Chinese edition (or the files under the ``only`` prefixes); returns the files it changed."""
    files = edition_files(root, allow_missing)
    rel = lambda p: p.resolve().relative_to(root.resolve()).as_posix()  # noqa: E731
    if only:
        files = {p: t for p, t in files.items() if rel(p).startswith(only)}
    changed = [p for p, text in files.items() if _write_if_changed(p, text)]
    for path in _stray_files(root, edition_files(root, True) if only else files):
        if not only or rel(path).startswith(only):
            path.unlink()
            changed.append(path)
    return changed


def edition_problems(root: Path = ROOT) -> list[str]:
    """Files of the Chinese edition that are not what ``sync`` writes from the current translations.

    (Compared with the edition written with ``allow_missing``: where every translation is complete and
    current, that is the edition itself.)
    """
    files = edition_files(root, allow_missing=True)
    found = []
    for path, text in files.items():
        name = path.relative_to(root).as_posix()
        if not path.is_file():
            found.append(f"{name}: missing (run: python tools/i18n.py sync)")
        elif path.read_text(encoding="utf-8") != text:
            found.append(f"{name}: not current (run: python tools/i18n.py sync)")
    found.extend(f"{p.relative_to(root).as_posix()}: no English source (run: python tools/i18n.py sync)"
                 for p in _stray_files(root, files))
    return found


def notebook_differences(english, chinese, expected: dict[str, str] | None = None) -> list[str]:
    """How a Chinese notebook differs from its English one, beyond its Markdown and figure alt texts.

    Cell ids, cell types, code, outputs, execution counts and metadata (but a figure's alt text) must be
    identical, and so must the notebook's metadata. With ``expected`` (key -> text, as from
    :func:`chinese_text`), each Markdown cell and alt text must also be that text.
    """
    found = []
    if english.metadata != chinese.metadata:
        found.append("notebook metadata differs")
    en_ids = [(c.get("id"), c.cell_type) for c in english.cells]
    zh_ids = [(c.get("id"), c.cell_type) for c in chinese.cells]
    if en_ids != zh_ids:
        return found + [f"cells differ: English {en_ids!r:.200}, Chinese {zh_ids!r:.200}"]

    def without_alt(metadata):
        metadata = copy.deepcopy(dict(metadata))
        if isinstance((metadata.get("mystnb") or {}).get("image"), dict):
            metadata["mystnb"]["image"].pop("alt", None)
        return metadata

    for en, zh in zip(english.cells, chinese.cells):
        where = f"cell {en.get('id')}"
        if en.cell_type == "code":
            if en.source != zh.source:
                found.append(f"{where}: code differs")
            if en.get("outputs") != zh.get("outputs"):
                found.append(f"{where}: outputs differ")
            if en.get("execution_count") != zh.get("execution_count"):
                found.append(f"{where}: execution count {zh.get('execution_count')} instead of "
                             f"{en.get('execution_count')}")
            if without_alt(en.metadata) != without_alt(zh.metadata):
                found.append(f"{where}: metadata differs")
            if expected is not None and en.id + ALT in expected and figure_alt(zh) != expected[en.id + ALT]:
                found.append(f"{where}: figure alt text is not its translation")
        else:
            if en.metadata != zh.metadata or en.get("attachments") != zh.get("attachments"):
                found.append(f"{where}: metadata or attachments differ")
            if en.cell_type == "markdown" and expected is not None and zh.source != expected.get(en.id):
                found.append(f"{where}: Markdown is not its translation")
            if en.cell_type == "raw" and en.source != zh.source:
                found.append(f"{where}: raw cell differs")
    return found


_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def link_problems(path: Path, text: str, edition_root: Path, exists) -> list[str]:
    """Relative links of a file of the edition that do not resolve inside the edition (``exists(path)``)."""
    found = []
    for target in sorted(invariants(text)["links"]):
        if _URL.match(target) or target.startswith("#"):
            continue
        rel = target.split("#")[0]
        resolved = Path(os.path.normpath(path.parent / rel))
        try:
            resolved.relative_to(edition_root)
        except ValueError:
            found.append(f"{target}: leaves the Chinese edition ({edition_root.name}/)")
            continue
        if not exists(resolved):
            found.append(f"{target}: no such file in the Chinese edition")
    return found


# ---- the Chinese site ----------------------------------------------------------------------------------

def glossary_terms(root: Path = ROOT) -> list[str]:
    """The Chinese names of the glossary's terms (the term base), for the search's word segmentation."""
    text = (root / "book" / "glossary.md").read_text(encoding="utf-8")
    body = text.split("```{glossary}", 1)[-1]
    words: list[str] = []
    for line in body.split("\n"):
        if not line.strip() or line[0].isspace() or line.startswith("```"):
            continue
        line = re.sub(r"\s*[（(][^）)]*[）)]", "", line)
        for part in re.split(r"[/、；;,，]|\s+", line):
            part = part.strip()
            if re.search(r"[\u4e00-\u9fff]", part) and part not in words:
                words.append(part)
    return words


def _translated_toc(root: Path) -> str:
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        caption = part.get("caption")
        if caption is not None:
            if caption not in ZH_SITE["captions"]:
                raise ValueError(f"_toc.yml caption {caption!r} has no Chinese in tools/i18n.py ZH_SITE['captions']")
            part["caption"] = ZH_SITE["captions"][caption]
    return ("# Generated by tools/i18n.py site from _toc.yml: the Chinese edition's table of contents.\n"
            + yaml.dump(toc, allow_unicode=True, sort_keys=False))


def _chinese_config(root: Path, out: Path, english_html: Path) -> str:
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = ZH_SITE["title"]
    config["author"] = ZH_SITE["author"]
    config["repository"]["path_to_book"] = LANG  # launch buttons open zh_CN/notebooks/NAME.ipynb
    config["html"]["extra_footer"] = ZH_SITE["extra_footer"]
    config.setdefault("latex", {}).setdefault("latex_documents", {})["targetname"] = f"minitfm-{LANG}.tex"
    sphinx = config["sphinx"]["config"]
    sphinx["language"] = LANG
    sphinx["html_search_language"] = "zh"  # Sphinx's Chinese search: jieba word segmentation
    sphinx["html_search_options"] = {"dict": str((out / "_search_words.txt").resolve())}
    sphinx["html_theme_options"]["search_bar_text"] = ZH_SITE["search_bar_text"]
    sphinx["html_extra_path"] = [os.path.relpath(root / "_build" / "site_assets", out)]
    for key in ("nb_code_prompt_show", "nb_code_prompt_hide", "togglebutton_hint", "togglebutton_hint_hide"):
        sphinx[key] = ZH_SITE[key]
    sphinx["minitfm_other_edition"] = ZH_OTHER_EDITION
    sphinx["minitfm_ui_strings"] = {**ZH_SITE["ui"], f"© Copyright {config.get('copyright', '')}.":
                                    f"© 版权所有 {config.get('copyright', '')}。"}
    sphinx["minitfm_heading_ids"] = os.path.relpath(english_html, out)
    return ("# Generated by tools/i18n.py site from _config.yml: the Chinese edition (edit _config.yml or\n"
            "# tools/i18n.py, never this file).\n" + yaml.dump(config, allow_unicode=True, sort_keys=False))


def site_files(root: Path = ROOT, out: Path | None = None, allow_missing: bool = False,
               english_html: Path | None = None) -> dict[Path, str | bytes]:
    """The Chinese Jupyter Book source tree: relative path -> contents.

    The Chinese notebooks and pages, a _toc.yml with Chinese captions, a _config.yml for ``language: zh_CN``
    (Chinese title, search with jieba and the glossary's terms, launch buttons on zh_CN/notebooks/, the
    English site's heading anchors), and the same extensions, static files, bibliography and favicon.
    """
    out = (out or root / "_build" / "zh_src").resolve()
    english_html = (english_html or root / "_build" / "html").resolve()
    files: dict[Path, str | bytes] = {}
    for path, text in edition_files(root, allow_missing).items():
        rel = path.resolve().relative_to((root / LANG).resolve()) if path.name != README_ZH else None
        if rel is not None:
            files[rel] = text
    for folder in ("book/_ext", "_static", "notebooks/figures"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.relative_to(root)] = path.read_bytes()
    for name in ("book/references.bib", "book/favicon.svg"):
        files[Path(name)] = (root / name).read_bytes()
    files[Path("_toc.yml")] = _translated_toc(root)
    files[Path("_config.yml")] = _chinese_config(root, out, english_html)
    files[Path("_search_words.txt")] = "".join(f"{w}\n" for w in glossary_terms(root))
    return files


def write_site(root: Path = ROOT, out: Path | None = None, allow_missing: bool = False,
               english_html: Path | None = None) -> list[Path]:
    """Write the Chinese book's source tree to ``out`` (files that did not change keep their time stamps,
    so that Sphinx rebuilds only what changed); returns the files it changed or removed."""
    out = (out or root / "_build" / "zh_src").resolve()
    files = site_files(root, out, allow_missing, english_html)
    changed = [out / rel for rel, data in files.items() if _write_if_changed(out / rel, data)]
    if out.is_dir():
        for path in sorted(out.rglob("*")):
            rel = path.relative_to(out)
            if path.is_file() and rel.parts[0] != "_build" and "__pycache__" not in rel.parts and rel not in files:
                path.unlink()
                changed.append(path)
    return changed


# ---- command line --------------------------------------------------------------------------------------

def _sources(args_files: list[str], root: Path = ROOT) -> list[Path]:
    if not args_files:
        return notebook_sources(root) + page_sources(root)
    return [Path(f).resolve() for f in args_files]


def _rel(path: Path, root: Path) -> str:
    path = path.resolve()
    return path.relative_to(root.resolve()).as_posix() if path.is_relative_to(root.resolve()) else str(path)


def _write_command(args, root: Path) -> int:
    try:
        if args.cmd == "site":
            changed = write_site(root, Path(args.out).resolve() if args.out else None, args.allow_missing,
                                 Path(args.english_html).resolve() if args.english_html else None)
            where = _rel(Path(args.out).resolve() if args.out else root / "_build" / "zh_src", root)
            print(f"Chinese book source tree: {where} ({len(changed)} file(s) changed)")
            return 0
        only = {"notebooks": (f"{LANG}/notebooks/",), "pages": (f"{LANG}/book/",), "readme": (README_ZH,),
                "sync": ()}[args.cmd]
        changed = write_edition(root, args.allow_missing, only)
    except IncompleteTranslation as error:
        print(f"i18n.py {args.cmd}: refused: {error}", file=sys.stderr)
        return 1
    for path in changed:
        print(f"wrote {_rel(path, root)}" if path.exists() else f"removed {_rel(path, root)}")
    print(f"Chinese edition: {len(changed)} file(s) changed"
          + (" (English where a translation is missing or stale: do not commit this)" if args.allow_missing else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)  # a copy of the repository (tests)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("extract", "status", "check", "stale"):
        p = sub.add_parser(name)
        p.add_argument("files", nargs="*", help="English sources (default: all)")
    for name, what in (("sync", "extract, then write the whole Chinese edition"),
                       ("notebooks", f"write {LANG}/notebooks/*.ipynb"), ("pages", f"write {LANG}/book/*.md"),
                       ("readme", f"write {README_ZH}"), ("site", "write the Chinese Jupyter Book source tree")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--allow-missing", action="store_true",
                       help="English where a translation is missing, stale or broken (development only)")
        if name == "site":
            p.add_argument("out", nargs="?", help="folder (default: _build/zh_src)")
            p.add_argument("--english-html", help="the built English site, whose heading anchors the Chinese "
                                                  "pages keep (default: _build/html)")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if args.cmd in ("sync", "notebooks", "pages", "readme", "site"):
        if args.cmd == "sync":
            for source in _sources([], root):
                write_translation(translation_path(source, root), extract(source, root))
            print(f"extract: {len(_sources([], root))} translation files current with the English")
        return _write_command(args, root)
    sources = _sources(args.files, root)
    if args.cmd == "extract":
        for source in sources:
            tr = extract(source, root)
            write_translation(translation_path(source, root), tr)
            print(f"{_rel(translation_path(source, root), root)}: {len(tr.entries)} entries")
        return 0
    if args.cmd == "status":
        for source in sources:
            entries = source_entries(source)
            n, alts = len(entries), sum(k.endswith(ALT) for k, _ in entries)
            probs = problems_of(source, root)
            count = {k: sum(p.kind == k for p in probs) for k in ("missing", "stale", "invariant")}
            print(f"{_rel(source, root)}: {n} entries"
                  + (f" ({alts} figure alt texts)" if alts else "")
                  + f", {n - count['missing'] - count['stale']} translated, "
                  f"{count['missing']} missing, {count['stale']} stale, {count['invariant']} invariant problems")
        return 0
    if args.cmd == "stale":
        for source in sources:
            path = translation_path(source, root)
            if not path.exists():
                continue
            tr = read_translation(path).by_key()
            for key, en in source_entries(source):
                entry = tr.get(key)
                if entry and entry.zh.strip() and not same_english(entry.en, en):
                    print(f"== {_rel(source, root)} [{key}]\n-- was:\n{entry.en}\n-- is now:\n{en}\n")
        return 0
    probs = [p for s in sources for p in problems_of(s, root)]
    for p in probs:
        print(p)
    edition = [] if args.files else edition_problems(root)
    for line in edition:
        print(line)
    print(f"{len(probs)} problem(s) in {len(sources)} file(s)"
          + (f"; {len(edition)} file(s) of the Chinese edition not current" if edition else ""))
    return 1 if probs or edition else 0


if __name__ == "__main__":
    sys.exit(main())
