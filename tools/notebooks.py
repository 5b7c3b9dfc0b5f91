"""Maintain the book's notebooks.

    python tools/notebooks.py sync               # write the standard set-up cell (tagged hide-input) into every notebook
    python tools/notebooks.py check              # exit 1 if a notebook's set-up cell is out of date
    python tools/notebooks.py execute [NB ...]   # re-execute notebooks in place (all by default)
    python tools/notebooks.py student OUT/ [NB ...]  # the students' edition: every notebook without solutions
    python tools/notebooks.py student --lang zh_CN OUT/  # the same, from the Chinese notebooks (zh_CN/notebooks/)
    python tools/notebooks.py commonmark [NB ...]    # rewrite MyST-only Markdown so Colab/Jupyter render it too

The set-up cell installs minitfm from the repository when it is not importable (Colab) and does nothing
elsewhere. The repository URL comes from one place: ``repository.url`` in ``_config.yml``; the release it
installs (the tag ``v<version>``) from ``pyproject.toml``'s version, so a saved notebook keeps its library.

The students' edition keeps exercises, stubs, check cells and outputs, and removes every solution:
- a Markdown block `````{admonition} Solution`` (any fence of 3+ backticks or colons, up to its closing
  fence; ``{dropdown} Solution`` too);
- an HTML block ``<details>`` whose ``<summary>`` contains "Solution" (in the Chinese edition 答案 or 解答),
  or of class ``solution``, up to its matching ``</details>``;
- a code cell whose first line starts with ``# SOLUTION`` (the convention for solution code that the test
  suite runs), or that is tagged ``solution``.
Where a solution was, a short note says what a student does instead (run the check cell, or bring the
answer to the next session), and sentences that point to solutions are reworded; ``--lang zh_CN`` does the same
to the Chinese notebooks (written by ``python tools/i18n.py notebooks``), with the note and rewordings in Chinese.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SETUP_MARKER = "# minitfm set-up"
# The book shows the set-up cell collapsed (MyST-NB: a "Show code cell source" toggle); Colab and Jupyter
# show it as it is, since it is the cell that installs the library there.
SETUP_TAG = "hide-input"


def repository_url() -> str:
    """The repository URL from _config.yml (read with a regex to need nothing beyond the stdlib)."""
    text = (ROOT / "_config.yml").read_text(encoding="utf-8")
    match = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", text, flags=re.M)
    if not match:
        raise SystemExit("_config.yml has no repository.url")
    return match.group(1).strip("'\"")


def library_version() -> str:
    """minitfm's version from pyproject.toml: the set-up cell installs the release the notebook was written for."""
    match = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    if not match:
        raise SystemExit("pyproject.toml has no version")
    return match.group(1)


def setup_source() -> str:
    # Pinned to the release tag, so that a notebook saved today keeps the library it was written for (a later
    # release may move a module: minitfm/_moved.py).
    return (
        f"{SETUP_MARKER}: install the library when it is missing (Colab); does nothing elsewhere.\n"
        "import importlib.util, sys\n"
        'if importlib.util.find_spec("minitfm") is None:\n'
        f'    %pip install -q "minitfm @ git+{repository_url()}@v{library_version()}"\n'
        'if "google.colab" in sys.modules:  # Colab needs this to show ipywidgets 8 sliders\n'
        "    from google.colab import output\n"
        "    output.enable_custom_widget_manager()"
    )


def setup_cell_is_current(cell, source: str) -> bool:
    """The set-up cell has the current source and the tag that collapses it in the book."""
    return cell.source == source and SETUP_TAG in cell.get("metadata", {}).get("tags", [])


def all_notebooks() -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def first_code_cell(nb):
    return next((c for c in nb.cells if c.cell_type == "code"), None)


def sync(paths: list[Path]) -> int:
    source = setup_source()
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        cell = first_code_cell(nb)
        if cell is not None and cell.source.startswith(SETUP_MARKER):
            if setup_cell_is_current(cell, source):
                continue
            cell.source = source
        else:
            index = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
            cell = nbformat.v4.new_code_cell(source)
            cell.pop("id", None)
            nb.cells.insert(index, cell)
        tags = cell.metadata.setdefault("tags", [])
        if SETUP_TAG not in tags:
            tags.append(SETUP_TAG)
        nbformat.validator.normalize(nb)
        nbformat.write(nb, path)
        print(f"updated set-up cell: {path.relative_to(ROOT)}")
    return 0


def check(paths: list[Path]) -> int:
    source, bad = setup_source(), []
    for path in paths:
        cell = first_code_cell(nbformat.read(path, as_version=4))
        if cell is None or not setup_cell_is_current(cell, source):
            bad.append(str(path.relative_to(ROOT)))
    if bad:
        print(f"set-up cell missing, out of date or not tagged {SETUP_TAG!r} "
              "(run `python tools/notebooks.py sync`):", *bad, sep="\n  ")
        return 1
    print(f"{len(paths)} notebooks have the current set-up cell")
    return 0


def _children_cpu() -> float:
    """User + system CPU seconds of finished child processes (the kernel, once it has shut down)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_notebook(nb, path: Path, timeout: int = 180) -> None:
    """Execute ``nb``, read from ``path``, top to bottom in a fresh kernel (``path``'s folder as the working
    directory); its outputs are written into ``nb``, also when a cell raises.

    ``timeout`` is per cell: a whole chapter runs in under 45 s, so a cell still waiting after 3 minutes is
    a lost kernel message (seen twice in about twenty runs here, client and kernel both idle) or a real hang.
    The notebook then runs once more from the start; a second timeout raises nbclient's CellTimeoutError."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    for attempt in (1, 2):
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            return
        except CellTimeoutError:
            if attempt == 2:
                raise
            print(f"{path.name}: a cell waited over {timeout} s; running the notebook again from the start",
                  flush=True)
            nb.clear()
            nb.update(nbformat.read(path, as_version=4))  # in place: the caller's reference sees the new run


def execute(paths: list[Path]) -> int:
    """Run each notebook in a fresh kernel (:func:`run_notebook`) and write its outputs back."""
    # Busy-waiting OpenMP threads make torch ~10x slower when another process shares the cores;
    # passive waiting changes no result. The kernel inherits this environment.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start, cpu_start = time.perf_counter(), _children_cpu()
        run_notebook(nb, path)
        elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu_start
        for cell in nb.cells:  # keep diffs small: execution timestamps change every run
            cell.get("metadata", {}).pop("execution", None)
        nbformat.write(nb, path)
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        # CPU time is what the notebook costs on an idle machine even when other programs share the cores.
        print(f"{name}: executed in {elapsed:.1f} s ({cpu:.1f} s of CPU time)")
    return 0


SOLUTION_CODE_MARKER = "# SOLUTION"
_FENCED_SOLUTION = re.compile(r"^\s*(`{3,}|:{3,})\s*\{(?:admonition|dropdown)\}\s*Solution\b", re.I)
_SUMMARY_SOLUTION = re.compile(r"<summary>[^<]*(?:solution|答案|解答)|<details\b[^>]*\bclass=\"[^\"]*\bsolution\b", re.I)


def _block_end(lines: list[str], start: int) -> int:
    """Index of the last line of the block opening at ``start`` (a fence or a ``<details>``)."""
    fence = _FENCED_SOLUTION.match(lines[start])
    if fence:
        char, length = fence.group(1)[0], len(fence.group(1))
        closing = re.compile(rf"^\s*{re.escape(char)}{{{length},}}\s*$")
        return next((j for j in range(start + 1, len(lines)) if closing.match(lines[j])), len(lines) - 1)
    depth = 0
    for j in range(start, len(lines)):
        depth += len(re.findall(r"<details\b", lines[j], re.I)) - len(re.findall(r"</details>", lines[j], re.I))
        if depth <= 0:
            return j
    return len(lines) - 1


# What a student does instead of opening a solution: said where each solution was, and in the sentences that
# point to solutions (the full edition's wording stays in the notebooks themselves).
STUDENT_NOTE = ("*Students' edition: no solution here. Where a check cell follows, run it: it names your first "
                "mistake. Otherwise write your answer down and compare it in the next session; your instructor "
                "has the edition with solutions.*")
STUDENT_REWRITES = [
    (re.compile(r"\bbefore (?:you open|reading|opening) the solution\b", re.I), "yourself, before the next session"),
    (re.compile(r"[;,] the solutions are hidden under each exercise", re.I),
     "; this edition has no solutions: the check cells are your feedback"),
]
# The same, for the Chinese edition (the translations' wording of those sentences).
STUDENT_NOTES = {
    "en": STUDENT_NOTE,
    "zh_CN": ("*学生版：此处不提供答案。如果后面有检查单元格，就运行它：它会指出你的第一个错误。否则请把你的答案写下来，"
              "在下一次课上对照；你的老师有带答案的版本。*"),
}
STUDENT_REWRITES_BY_LANG = {
    "en": STUDENT_REWRITES,
    "zh_CN": [
        (re.compile(r"在(?:打开|查看|看|阅读)(?:答案|解答)之前"), "在下一次课之前自己"),
        (re.compile(r"[；;，,]\s*(?:答案|解答)都?隐藏在每道练习(?:的)?下方"), "；本版不含答案：检查单元格就是你的反馈"),
    ],
}
LANGS = tuple(STUDENT_NOTES)


def strip_solutions(markdown: str, note: str = "") -> str:
    """Markdown without its solution blocks (fenced ``{admonition} Solution`` or ``<details>`` Solution).

    ``note``, when given, stands where each solution was, so a reader knows what to do instead.
    """
    lines, kept, i = markdown.split("\n"), [], 0
    while i < len(lines):
        is_details = re.match(r"^\s*<details\b", lines[i], re.I)
        if _FENCED_SOLUTION.match(lines[i]) or is_details:
            end = _block_end(lines, i)
            if not is_details or _SUMMARY_SOLUTION.search("\n".join(lines[i:end + 1])):
                i = end + 1
                if note:
                    kept += ["", note, ""]
                continue
        kept.append(lines[i])
        i += 1
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))
    return text.strip("\n")


def student_markdown(markdown: str, lang: str = "en") -> str:
    """A Markdown cell of the students' edition: solutions replaced by what to do, pointers to them reworded."""
    text = strip_solutions(markdown, note=STUDENT_NOTES[lang])
    for pattern, replacement in STUDENT_REWRITES_BY_LANG[lang]:
        text = pattern.sub(replacement, text)
    return text


def is_solution_cell(cell) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return cell.cell_type == "code" and (cell.source.lstrip().startswith(SOLUTION_CODE_MARKER) or "solution" in tags)


def student_notebook(nb, lang: str = "en"):
    """A copy of ``nb`` for students: solution cells and blocks removed, everything else kept."""
    cells = []
    for cell in nb.cells:
        if is_solution_cell(cell):
            continue
        if cell.cell_type == "markdown":
            source = student_markdown(cell.source, lang)
            if not source.strip():
                continue
            cell = nbformat.from_dict({**cell, "source": source})
        cells.append(cell)
    new = nbformat.from_dict({**nb, "cells": cells})
    return new


def edition_notebooks(lang: str = "en") -> list[Path]:
    """The notebooks of an edition: notebooks/ (English), or zh_CN/notebooks/ (written by tools/i18n.py)."""
    if lang == "en":
        return all_notebooks()
    found = sorted((ROOT / lang / "notebooks").glob("*.ipynb"))
    if len(found) != len(all_notebooks()):
        raise SystemExit(f"{lang}/notebooks/ has {len(found)} of the {len(all_notebooks())} notebooks: "
                         "write them with `python tools/i18n.py sync`")
    return found


def student(paths: list[Path], out: Path, lang: str = "en") -> int:
    out = Path(out).resolve()
    sources = {NOTEBOOKS.resolve(), *(ROOT / code / "notebooks" for code in LANGS if code != "en")}
    if out in {Path(s).resolve() for s in sources} or any(p.parent == out for p in paths):
        raise SystemExit(f"refusing to write the students' edition over the notebooks themselves: {out}")
    out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        nb = student_notebook(nbformat.read(path, as_version=4), lang)
        nbformat.write(nb, out / path.name)
    print(f"students' edition{'' if lang == 'en' else f' ({lang})'}: {len(paths)} notebooks without solutions in {out}")
    return 0


# ---------------------------------------------------------------------------------- commonmark
# Notebooks are read in Colab, JupyterLab and classic Jupyter (CommonMark) as often as in the book
# (MyST). `commonmark` rewrites MyST-only Markdown into constructs that both render alike:
#   exercise admonition   -> <div class="exercise" id="ex-N-M"> + Markdown + </div>
#   dropdown "Solution"   -> <details class="solution"><summary>Solution (click to open)</summary> + Markdown + </details>
#   {cite:t}`key`         -> [Vaswani et al. (2017)](../book/references.md#cite-key)
#   {cite:p}`a,b`         -> ([A et al., 2017](...#cite-a); [B and C, 2019](...#cite-b))
#   {term}`x`             -> [x](../book/glossary.md#term-x)
#   {doc}`02_masks`       -> [<that page's title>](02_masks.ipynb)
#   {ref}`text <label>`   -> [text](#label), or [text](other.ipynb#label) in another notebook
#   (label)=              -> <a id="label"></a>
# Markdown cells only (they have no outputs: nothing needs re-executing); idempotent.
MYST_SYNTAX = re.compile(
    r"\{(?:admonition|note|tip|warning|important|hint|caution|dropdown)\}"  # directives
    r"|\{(?:cite(?::\w+)?|term|ref|doc|numref|eq|download)\}`"               # roles
    r"|^\s*:(?:class|name):"                                                 # directive options
    r"|^\s*\([\w.:-]+\)=\s*$",                                               # label lines
    re.M,
)
_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|:{3,})\s*\{(admonition|note|tip|warning|important|hint|caution|dropdown)\}"
                         r"\s*(.*?)\s*$")
_OPTION = re.compile(r"^\s*:(\w[\w-]*):\s*(.*?)\s*$")
_LABEL = re.compile(r"^\s*\(([\w.:-]+)\)=\s*$")
_ROLE = re.compile(r"\{(cite(?::\w+)?|term|ref|doc)\}`([^`]*)`")
_ANY_ROLE = re.compile(r"\{[a-z][\w:-]*\}`")
_EXERCISE_TITLE = re.compile(r"^Exercise\s+(\d+[a-z]?)\.(\d+)\b", re.I)
_BLOCK_START = re.compile(r"^(\s{4}|\s*(`{3}|~{3}|[-*+]\s|\d+[.)]\s|#|>|\||<|\$\$))")


def _strip_tex(text: str) -> str:
    return re.sub(r"[{}]", "", text).replace("\\&", "&").strip()


def _citations() -> dict[str, tuple[str, str]]:
    """key -> (author names as cited, year), from book/references.bib."""
    from pybtex.database import parse_file

    cites = {}
    for key, entry in parse_file(str(ROOT / "book" / "references.bib")).entries.items():
        persons = entry.persons.get("author") or entry.persons.get("editor") or []
        surnames = [_strip_tex(" ".join(p.prelast_names + p.last_names)) for p in persons]
        if not surnames:
            names = _strip_tex(entry.fields.get("organization", entry.fields.get("title", key)))
        elif len(surnames) == 1:
            names = surnames[0]
        elif len(surnames) == 2:
            names = f"{surnames[0]} and {surnames[1]}"
        else:
            names = f"{surnames[0]} et al."
        cites[key] = (names, _strip_tex(entry.fields.get("year", "n.d.")))
    return cites


def _title(path: Path) -> str:
    """The first H1 of a notebook or Markdown page (what {doc} shows), else its file name."""
    if path.suffix == ".ipynb":
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    match = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.M)
    return match.group(1) if match else path.stem


def _labels() -> dict[str, tuple[Path, str]]:
    """label -> (notebook, text of the heading right after it), for MyST labels and HTML anchors."""
    found = {}
    for path in all_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            lines = cell.source.split("\n")
            for i, line in enumerate(lines):
                match = _LABEL.match(line) or re.match(r'^\s*<a id="([^"]+)"></a>\s*$', line)
                if match:
                    nxt = lines[i + 1] if i + 1 < len(lines) else ""
                    heading = re.match(r"^#+\s+(.*)$", nxt)
                    found[match.group(1)] = (path, heading.group(1) if heading else match.group(1))
    return found


class CommonMarkConverter:
    """Rewrites one notebook's Markdown (see the comment above); raises on MyST it does not know."""

    def __init__(self):
        self.cites = _citations()
        self.labels = _labels()

    def _rel(self, target: Path, notebook: Path) -> str:
        return os.path.relpath(target, notebook.parent).replace(os.sep, "/")

    def _cite(self, kind: str, keys: str, notebook: Path) -> str:
        refs = self._rel(ROOT / "book" / "references.md", notebook)
        parts = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.cites:
                raise SystemExit(f"{notebook.name}: unknown citation key {key!r} (not in book/references.bib)")
            names, year = self.cites[key]
            text = f"{names} ({year})" if kind == "cite:t" else f"{names}, {year}"
            parts.append(f"[{text}]({refs}#cite-{key})")
        joined = "; ".join(parts)
        return joined if kind == "cite:t" else f"({joined})"

    def _role(self, match: re.Match, notebook: Path) -> str:
        role, content = match.group(1), match.group(2)
        explicit = re.match(r"^(.*?)\s*<([^<>]+)>$", content, re.S)
        text, target = (explicit.group(1), explicit.group(2)) if explicit else (None, content)
        if role in ("cite", "cite:p", "cite:t"):
            return self._cite("cite:t" if role == "cite:t" else "cite:p", content, notebook)
        if role.startswith("cite"):
            raise SystemExit(f"{notebook.name}: {{{role}}} has no CommonMark form here; use cite:p or cite:t")
        if role == "term":
            term_id = "term-" + re.sub(r"[^\w]+", "-", target.strip().lower()).strip("-")
            return f"[{text or target}]({self._rel(ROOT / 'book' / 'glossary.md', notebook)}#{term_id})"
        if role == "doc":
            base = (notebook.parent / target) if not target.startswith("/") else ROOT / target.lstrip("/")
            for suffix in (".ipynb", ".md"):
                path = base.with_name(base.name + suffix) if base.suffix not in (".ipynb", ".md") else base
                if path.is_file():
                    return f"[{text or _title(path)}]({self._rel(path, notebook)})"
            raise SystemExit(f"{notebook.name}: {{doc}}`{content}`: no such page")
        # ref
        if target not in self.labels:
            raise SystemExit(f"{notebook.name}: {{ref}}`{content}`: label {target!r} is in no notebook")
        where, heading = self.labels[target]
        href = f"#{target}" if where.resolve() == notebook.resolve() else f"{self._rel(where, notebook)}#{target}"
        return f"[{text or heading}]({href})"

    def _block(self, title: str, options: dict[str, str], directive: str, body: list[str]) -> list[str]:
        while body and not body[0].strip():
            body.pop(0)
        while body and not body[-1].strip():
            body.pop()
        classes = options.get("class", "").split()
        if directive != "admonition" and not title:
            title = directive.capitalize()
        if "dropdown" in classes or directive == "dropdown":
            css = "solution" if title.lower().startswith("solution") else "dropdown"
            if title == "Solution":  # classic Jupyter draws no arrow before a <summary>: say what it does
                title = "Solution (click to open)"
            return [f'<details class="{css}">', f"<summary>{title}</summary>", "", *body, "", "</details>"]
        exercise = _EXERCISE_TITLE.match(title)
        css = "exercise" if exercise else " ".join(c for c in classes if c != "tip") or directive
        ident = options.get("name") or (f"ex-{exercise.group(1)}-{exercise.group(2)}" if exercise else "")
        opening = f'<div class="{css}"' + (f' id="{ident}"' if ident else "") + ">"
        head = f"**{title.rstrip('.')}.**" if title else ""
        if head and body and not _BLOCK_START.match(body[0]):
            body = [f"{head} {body[0]}", *body[1:]]
        elif head:
            body = [head, "", *body]
        return [opening, "", *body, "", "</div>"]

    def markdown(self, source: str, notebook: Path) -> str:
        lines, out, i = source.split("\n"), [], 0
        while i < len(lines):
            fence = _FENCE_OPEN.match(lines[i])
            label = _LABEL.match(lines[i])
            if label:
                out.append(f'<a id="{label.group(1)}"></a>')
                i += 1
                continue
            if not fence:
                out.append(lines[i])
                i += 1
                continue
            char, length = fence.group(2)[0], len(fence.group(2))
            closing = re.compile(rf"^\s*{re.escape(char)}{{{length},}}\s*$")
            end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
            if end is None:
                raise SystemExit(f"{notebook.name}: unclosed {{{fence.group(3)}}} block: {lines[i]!r}")
            options, j = {}, i + 1
            while j < end and _OPTION.match(lines[j]):
                key, value = _OPTION.match(lines[j]).groups()
                options[key] = value
                j += 1
            # a block inside the block (e.g. a nested admonition) is converted too
            body = self.markdown("\n".join(lines[j:end]), notebook).split("\n")
            out.extend(self._block(fence.group(4), options, fence.group(3), body))
            i = end + 1
        text = _ROLE.sub(lambda m: self._role(m, notebook), "\n".join(out))
        leftover = _ANY_ROLE.search(text)
        if leftover:
            line = text[:leftover.start()].count("\n")
            raise SystemExit(f"{notebook.name}: no CommonMark form for {text.split(chr(10))[line].strip()!r}")
        return text


def commonmark(paths: list[Path]) -> int:
    converter = CommonMarkConverter()
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        changed = 0
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                new = converter.markdown(cell.source, path)
                if new != cell.source:
                    cell.source, changed = new, changed + 1
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if changed:
            nbformat.write(nb, path)
            print(f"{name}: {changed} Markdown cells rewritten in CommonMark")
        left = [c.source[m.start():m.start() + 40] for c in nb.cells if c.cell_type == "markdown"
                for m in [MYST_SYNTAX.search(c.source)] if m]
        if left:
            print(f"{name}: MyST syntax left: {left}", file=sys.stderr)
            return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("sync", "check", "execute", "student", "commonmark"))
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: every notebook in notebooks/ (for student: OUT/ first, then notebooks)")
    parser.add_argument("--lang", choices=LANGS, default="en",
                        help="student: the edition (zh_CN: the Chinese notebooks of zh_CN/notebooks/)")
    args = parser.parse_intermixed_args(argv)
    if args.command == "student":
        if not args.notebooks:
            parser.error("student needs an output folder: python tools/notebooks.py student OUT/")
        out, rest = args.notebooks[0], args.notebooks[1:]
        return student([p.resolve() for p in rest] or edition_notebooks(args.lang), out, args.lang)
    paths = [p.resolve() for p in args.notebooks] or all_notebooks()
    return {"sync": sync, "check": check, "execute": execute, "commonmark": commonmark}[args.command](paths)


if __name__ == "__main__":
    sys.exit(main())
