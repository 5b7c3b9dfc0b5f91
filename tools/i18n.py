"""Translations of the book: one source of code and outputs, the English prose as the source of the Chinese.

Every piece of English prose the book ships has one entry in a translation file under ``locale/zh_CN/``:

- a notebook ``notebooks/NAME.ipynb`` -> ``locale/zh_CN/notebooks/NAME.yml``, one entry per markdown cell,
  keyed by the cell id (nbformat 4.5 ids are stable: editing a cell keeps its id);
- a book page ``book/NAME.md`` -> ``locale/zh_CN/book/NAME.yml``, one entry per block (paragraphs, lists,
  tables, directives, split at blank lines outside code fences and math), keyed by the anchor of the
  section it sits in and its number there (``how-to-read/2``);
- ``README.md`` -> ``locale/zh_CN/README.yml`` the same way.

Each entry holds the English it translates (``en``) beside the Chinese (``zh``), so that when the English
changes the tool can say which file, which cell, what the English was and what it is now::

    python tools/i18n.py extract            # add entries for new English, keep every translation
    python tools/i18n.py status             # per file: entries, translated, missing, stale
    python tools/i18n.py check              # every problem, one line each; exit 1 if any
    python tools/i18n.py stale [FILE...]    # the stale entries, with the old and the new English

A translator edits ``zh`` (and, after checking the new English, copies it into ``en``); nothing else in
the file needs touching. Math, code spans, link targets and anchors of a translation must be those of
its English (as sets): :func:`invariant_problems` checks them.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
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


def slug(text: str) -> str:
    """A heading's anchor as MyST writes it: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_\[\]()]", "", text.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"\s+", "-", text).strip("-") or "top"


def split_blocks(text: str) -> list[str]:
    """Split markdown into blocks at blank lines, never inside a fenced block or a ``$$`` display."""
    blocks, current, fence, math = [], [], None, False
    for line in text.split("\n"):
        stripped = line.strip()
        if fence is None and not math and stripped == "":
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
        m = _FENCE.match(line)
        if fence is None and m and not math:
            # A directive fence (```{note}) holds prose: split inside it. A code fence holds code: keep whole.
            rest = line.strip()[len(m.group(1)):]
            if not rest.startswith("{") or rest.startswith(("{code", "{math")):
                fence = m.group(1)
        elif fence is not None and stripped.startswith(fence[0] * len(fence)) and stripped.strip(fence[0]) == "":
            fence = None
        elif fence is None and stripped.count("$$") % 2 == 1:
            math = not math
    if current:
        blocks.append("\n".join(current))
    return blocks


def page_entries(text: str) -> list[tuple[str, str]]:
    """(key, English block) for every block of a page; key = section anchor / number in that section."""
    entries, section, count = [], "top", 0
    seen: dict[str, int] = {}
    for block in split_blocks(text):
        m = _HEADING.match(block.split("\n")[0])
        if m and "\n" not in block:
            base = slug(m.group(2))
            seen[base] = seen.get(base, 0) + 1
            section, count = (base if seen[base] == 1 else f"{base}-{seen[base] - 1}"), 0
        count += 1
        entries.append((f"{section}/{count}", block))
    return entries


def notebook_entries(nb) -> list[tuple[str, str]]:
    """(cell id, markdown source) for every markdown cell of a notebook."""
    return [(cell.id, cell.source) for cell in nb.cells if cell.cell_type == "markdown"]


def source_entries(source: Path) -> list[tuple[str, str]]:
    if source.suffix == ".ipynb":
        return notebook_entries(nbformat.read(source, as_version=4))
    return page_entries(source.read_text(encoding="utf-8"))


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


def read_translation(path: Path) -> Translation:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or "source" not in data or not isinstance(data.get("entries", []), list):
        raise ValueError(f"{path}: a translation file is a mapping with 'source' and a list 'entries'")
    entries = [Entry(str(e["key"]), e.get("en") or "", e.get("zh") or "") for e in data.get("entries") or []]
    return Translation(data["source"], entries)


def write_translation(path: Path, tr: Translation) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"source": tr.source,
            "entries": [{"key": e.key, "en": e.en, "zh": e.zh} for e in tr.entries]}
    header = (f"# Chinese translation of {tr.source}: one entry per "
              f"{'markdown cell (key = cell id)' if tr.source.endswith('.ipynb') else 'block (key = section/number)'}.\n"
              "# Edit `zh`; `en` is the English it translates (python tools/i18n.py stale shows what changed).\n")
    text = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=10_000)
    path.write_text(header + text, encoding="utf-8")


def extract(source: Path, root: Path = ROOT) -> Translation:
    """The translation of ``source`` with an entry for every current piece of English, in source order.

    Existing translations are kept under their key even when the English changed (they are then stale,
    and ``en`` still holds the English they translate); entries whose key disappeared are dropped.
    """
    path = translation_path(source, root)
    old = read_translation(path).by_key() if path.exists() else {}
    rel = source.resolve().relative_to(root.resolve()).as_posix()
    entries = []
    for key, en in source_entries(source):
        prev = old.get(key)
        entries.append(Entry(key, prev.en if prev and prev.zh else en, prev.zh if prev else ""))
    return Translation(rel, entries)


# ---- checks --------------------------------------------------------------------------------------------

_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$", re.S)
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_ANCHOR = re.compile(r"""\b(?:id|name)\s*=\s*["']([^"']+)["']""")
_LABEL = re.compile(r"^\((.+?)\)=\s*$", re.M)
_FENCED = re.compile(r"^(\s*)(`{3,}|~{3,})(.*?)$\n(.*?)^\1\2\s*$", re.S | re.M)


def invariants(text: str) -> dict[str, set]:
    """What a translation must keep exactly: math, code spans, link targets, anchors, code blocks."""
    code_blocks = set()

    def keep_code(m):
        info = m.group(3).strip()
        if info.startswith("{") and not info.startswith(("{code", "{math")):
            return m.group(0)  # a directive's body is prose
        code_blocks.add(m.group(4).strip())
        return ""

    rest = _FENCED.sub(keep_code, text)
    code = {m.group(2).strip() for m in _CODE.finditer(rest)}
    rest = _CODE.sub(" ", rest)
    display = {" ".join(m.group(1).split()) for m in _DISPLAY.finditer(rest)}
    rest = _DISPLAY.sub(" ", rest)
    inline = {" ".join(m.group(1).split()) for m in _INLINE.finditer(rest)}
    return {
        "math": display | inline,
        "code spans": code,
        "code blocks": code_blocks,
        "links": set(_LINK.findall(rest)),
        "anchors": set(_ANCHOR.findall(rest)) | set(_LABEL.findall(rest)),
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
    kind: str  # "missing", "stale", "invariant", "orphan", "no translation file"
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
    for key, en in current:
        entry = tr.get(key)
        if entry is None or not entry.zh.strip():
            found.append(Problem(rel, key, "missing", f"{en.strip()[:80]!r}"))
        elif entry.en != en:
            found.append(Problem(rel, key, "stale", f"the English changed since it was translated "
                                                    f"(python tools/i18n.py stale {rel})"))
        else:
            found.extend(Problem(rel, key, "invariant", p) for p in invariant_problems(en, entry.zh))
    keys = {k for k, _ in current}
    found.extend(Problem(rel, k, "orphan", "no such cell or block in the English any more (run extract)")
                 for k in tr if k not in keys)
    return found


def all_problems(root: Path = ROOT) -> list[Problem]:
    return [p for s in notebook_sources(root) + page_sources(root) for p in problems_of(s, root)]


def translate_text(source: Path, root: Path = ROOT) -> dict[str, str]:
    """key -> Chinese for every entry that is translated and current (raises if any is missing or stale)."""
    problems = [p for p in problems_of(source, root) if p.kind != "invariant"]
    if problems:
        raise ValueError(f"the translation of {source.name} is not complete and current:\n  "
                         + "\n  ".join(map(str, problems[:20])))
    tr = read_translation(translation_path(source, root)).by_key()
    return {k: tr[k].zh for k, _ in source_entries(source)}


# ---- command line --------------------------------------------------------------------------------------

def _sources(args_files: list[str]) -> list[Path]:
    if not args_files:
        return notebook_sources() + page_sources()
    return [Path(f).resolve() for f in args_files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("extract", "status", "check", "stale"):
        p = sub.add_parser(name)
        p.add_argument("files", nargs="*", help="English sources (default: all)")
    args = parser.parse_args(argv)
    sources = _sources(args.files)
    if args.cmd == "extract":
        for source in sources:
            tr = extract(source)
            write_translation(translation_path(source), tr)
            print(f"{translation_path(source).relative_to(ROOT)}: {len(tr.entries)} entries")
        return 0
    if args.cmd == "status":
        for source in sources:
            n = len(source_entries(source))
            probs = problems_of(source)
            count = {k: sum(p.kind == k for p in probs) for k in ("missing", "stale", "invariant")}
            print(f"{source.relative_to(ROOT)}: {n} entries, {n - count['missing'] - count['stale']} translated, "
                  f"{count['missing']} missing, {count['stale']} stale, {count['invariant']} invariant problems")
        return 0
    if args.cmd == "stale":
        for source in sources:
            path = translation_path(source)
            if not path.exists():
                continue
            tr = read_translation(path).by_key()
            for key, en in source_entries(source):
                entry = tr.get(key)
                if entry and entry.zh.strip() and entry.en != en:
                    print(f"== {source.relative_to(ROOT)} [{key}]\n-- was:\n{entry.en}\n-- is now:\n{en}\n")
        return 0
    probs = [p for s in sources for p in problems_of(s)]
    for p in probs:
        print(p)
    print(f"{len(probs)} problem(s) in {len(sources)} file(s)")
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main())
