"""The Chinese edition is complete, current and faithful to the English (issue 29); no notebook is executed.

- every English Markdown cell, figure alt text and page block has a Chinese translation that is current
  (translated from the English as it is now), each failure naming the file and the cell or block;
- the translations keep the English's math, code spans, links, anchors and heading levels (as sets);
- zh_CN/notebooks/*.ipynb are the English notebooks with only their Markdown (and figure alt texts)
  replaced by the translation: cell ids, code, outputs, execution counts and metadata identical; zh_CN/book/
  and README.zh-CN.md are what ``python tools/i18n.py sync`` writes; the edition's links resolve inside it.

Each check is also shown failing on a deliberately broken copy of the repository (in tmp_path), through the
same functions of tools/i18n.py with ``root=`` the copy.

The tool's own parts (review of December 2026, #8, #9 and the i18n points of its section 2.5): pages split
into blocks with a stack of open directives (a directive's closing fence opens no code fence); translations
matched to their English by content before key, so that inserting a block keeps the later ones current; the
line breaks that would render as a stray space in Chinese removed from every translation (checked over all
of them, read-only); prices that are not math; translation files that would lose a translation refused.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from tool_modules import tool

ROOT = Path(__file__).resolve().parents[2]
i18n = tool("i18n")

NOTEBOOKS = i18n.notebook_sources()
SOURCES = NOTEBOOKS + i18n.page_sources()
HOW_TO_FIX = ("python tools/i18n.py stale FILE shows what changed; translate in locale/zh_CN/, then run "
              "python tools/i18n.py sync")


def rel(path: Path, root: Path = ROOT) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A copy of what the translation tools read: notebooks, book pages, README, translations, config."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("notebooks", "locale", "book", i18n.LANG):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("_ext", "__pycache__",
                                                                                    ".ipynb_checkpoints"))
    for name in ("README.md", i18n.README_ZH, "_config.yml", "_toc.yml"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, copy / name)
    return copy


def pretend_translated(root: Path, source: Path, keys: list[str] | None = None) -> None:
    """In a copy: give entries of ``source`` (all, or ``keys``) a 'translation' that keeps every invariant."""
    path = i18n.translation_path(source, root)
    tr = i18n.extract(source, root)
    for entry in tr.entries:
        if keys is None or entry.key in keys:
            entry.en = dict(i18n.source_entries(source))[entry.key]
            entry.zh = entry.en + "\n\n【中文】"
    i18n.write_translation(path, tr)


def first_markdown_cell(nb, containing: str = ""):
    return next(c for c in nb.cells if c.cell_type == "markdown" and containing in c.source)


# ------------------------------------------------------------------------------ completeness
def test_every_english_cell_and_block_has_a_current_chinese_translation():
    """Fails, naming the file and the cell (or block), while any translation is missing or stale."""
    problems = [p for p in i18n.all_problems() if p.kind != "invariant"]
    by_kind = {k: sum(p.kind == k for p in problems) for k in sorted({p.kind for p in problems})}
    assert not problems, (f"{len(problems)} translation problems {by_kind} ({HOW_TO_FIX}):\n  "
                          + "\n  ".join(map(str, problems[:60])))


def test_a_missing_translation_names_the_notebook_and_cell(repo):
    source = repo / "notebooks" / "02_masks.ipynb"
    pretend_translated(repo, source)
    assert i18n.problems_of(source, repo) == []
    path = i18n.translation_path(source, repo)
    tr = i18n.read_translation(path)
    tr.entries[3].zh = ""
    i18n.write_translation(path, tr)
    problems = i18n.problems_of(source, repo)
    assert [(p.file, p.key, p.kind) for p in problems] == [("notebooks/02_masks.ipynb", tr.entries[3].key, "missing")]


def test_an_edited_english_cell_makes_its_translation_stale_and_stale_shows_old_and_new(repo, capsys):
    source = repo / "notebooks" / "01_attention.ipynb"
    pretend_translated(repo, source)
    nb = nbformat.read(source, as_version=4)
    cell = first_markdown_cell(nb, "##")
    old = cell.source
    cell.source = old.replace("\n", "\n\nA SENTENCE ADDED TO THE ENGLISH.\n", 1)
    nbformat.write(nb, source)

    problems = i18n.problems_of(source, repo)
    assert [(p.file, p.key, p.kind) for p in problems] == [("notebooks/01_attention.ipynb", cell.id, "stale")]
    assert "notebooks/01_attention.ipynb" in str(problems[0]) and cell.id in str(problems[0])

    assert i18n.main(["--root", str(repo), "stale"]) == 0
    out = capsys.readouterr().out
    assert f"== notebooks/01_attention.ipynb [{cell.id}]" in out
    was, now = out.split("-- was:\n", 1)[1].split("-- is now:\n", 1)
    assert old in was and "A SENTENCE ADDED" not in was and "A SENTENCE ADDED TO THE ENGLISH." in now

    # the one command refuses to write the edition over a stale translation, and says where
    assert i18n.main(["--root", str(repo), "notebooks"]) == 1
    assert cell.id in capsys.readouterr().err


def test_an_edited_figure_alt_text_is_stale_too(repo):
    source = repo / "notebooks" / "02_masks.ipynb"
    pretend_translated(repo, source)
    nb = nbformat.read(source, as_version=4)
    cell = next(c for c in nb.cells if i18n.figure_alt(c))
    cell.metadata["mystnb"]["image"]["alt"] += " Another sentence."
    nbformat.write(nb, source)
    assert [(p.key, p.kind) for p in i18n.problems_of(source, repo)] == [(cell.id + i18n.ALT, "stale")]


# ------------------------------------------------------------------------------ invariants
def test_every_translation_keeps_math_code_links_anchors_and_headings():
    problems = [p for p in i18n.all_problems() if p.kind == "invariant"]
    assert not problems, ("translations that change what they must keep (math, code spans, link targets, anchors, "
                          "heading levels):\n  " + "\n  ".join(map(str, problems[:60])))


@pytest.mark.parametrize("change, kind", [
    (lambda s: s.replace("$(B, 1, 1, T)$", "$(B, 1, T)$"), "math"),
    (lambda s: s.replace("`-inf`", "`-1e9`"), "code spans"),
    (lambda s: s.replace("(01_attention.ipynb)", "(03_multi_head.ipynb)", 1), "links"),
    (lambda s: s.replace("#term-causal-mask", "#term-mask-causal"), "links"),
])
def test_a_translation_that_breaks_an_invariant_is_caught(repo, change, kind):
    source = repo / "notebooks" / "02_masks.ipynb"
    pretend_translated(repo, source)
    path = i18n.translation_path(source, repo)
    tr = i18n.read_translation(path)
    entry = tr.entries[0]  # the chapter's opening cell: math, code, links
    broken = change(entry.zh)
    assert broken != entry.zh, "the English changed: pick another example"
    entry.zh = broken
    i18n.write_translation(path, tr)
    problems = i18n.problems_of(source, repo)
    assert [(p.key, p.kind) for p in problems] == [(entry.key, "invariant")]
    assert problems[0].detail.startswith(kind), problems[0].detail


@pytest.mark.parametrize("en, zh, problems", [
    # prose inside the invariants may be translated: math's \\text{...} and a Python fence's comments
    ("$\\text{bits per byte} = B / 8$", "$\\text{每字节比特数} = B / 8$", []),
    ("```python\nx = f(y)  # the reply and its <|end|>\n# step two\ny = '# kept'\n```",
     "```python\nx = f(y)  # 回复及其 <|end|>\n# 第二步\ny = '# kept'\n```", []),
    ("```\nx = 1  # one\n```", "```\nx = 1\n```", []),  # a fence without a language is Python's too
    # the rest of them may not
    ("$\\text{a} = x$", "$\\text{甲} = y$", ["math"]),
    ("```python\nx = 1  # one\n```", "```python\nx = 2  # 一\n```", ["code blocks"]),
    ("```python\ny = '# kept'\n```", "```python\ny = '# 保留'\n```", ["code blocks"]),  # a string is code
    ("```text\nx = 1  # one\n```", "```text\nx = 1  # 一\n```", ["code blocks"]),  # not Python: all of it
])
def test_math_words_and_code_block_comments_may_be_translated(en, zh, problems):
    assert [p.split(":")[0] for p in i18n.invariant_problems(en, zh)] == problems


def test_invariants_of_anchors_and_heading_levels():
    en = '<a id="ch2-claim-fill"></a>\n## The fill value\n\nText.\n\n### Detail\n\n```python\n# not a heading\n```'
    assert i18n.invariant_problems(en, en.replace("The fill value", "填充值").replace("Text.", "正文。")) == []
    assert i18n.invariant_problems(en, en.replace('id="ch2-claim-fill"', 'id="ch2-fill"'))[0].startswith("anchors")
    assert i18n.invariant_problems(en, en.replace("### Detail", "## Detail"))[0].startswith("heading levels")
    assert i18n.invariant_problems(en, en.replace("### Detail\n\n", ""))[0].startswith("heading levels")


# ------------------------------------------------------------------------------ the Chinese notebooks
@pytest.fixture(scope="module")
def expected_edition() -> dict[Path, str]:
    return i18n.edition_files(allow_missing=True)


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.name)
def test_chinese_notebook_equals_the_english_but_for_its_markdown(source):
    target = i18n.edition_path(source)
    assert target.is_file(), f"{rel(target)} is missing: run python tools/i18n.py sync"
    expected, _ = i18n.chinese_text(source, allow_missing=True)
    differences = i18n.notebook_differences(nbformat.read(source, as_version=4),
                                            nbformat.read(target, as_version=4), expected)
    assert not differences, f"{rel(target)} (run python tools/i18n.py sync):\n  " + "\n  ".join(differences[:20])


def test_the_chinese_edition_is_what_sync_writes():
    """zh_CN/notebooks, zh_CN/book and README.zh-CN.md: current with the English and the translations."""
    problems = i18n.edition_problems()
    assert not problems, "\n".join(problems)


def test_a_chinese_notebook_with_an_edited_output_is_caught(repo):
    assert i18n.main(["--root", str(repo), "sync", "--allow-missing"]) == 0
    assert i18n.edition_problems(repo) == []
    source = repo / "notebooks" / "02_masks.ipynb"
    target = i18n.edition_path(source, repo)
    zh = nbformat.read(target, as_version=4)
    assert i18n.notebook_differences(nbformat.read(source, as_version=4), zh) == []
    cell = next(c for c in zh.cells if c.cell_type == "code" and any(o.get("text") for o in c.outputs))
    output = next(o for o in cell.outputs if o.get("text"))
    output["text"] = output["text"] + "an output the English notebook does not have\n"
    other = next(c for c in zh.cells if c.cell_type == "code" and c is not cell and c.execution_count)
    other.execution_count += 100
    nbformat.write(zh, target)

    differences = i18n.notebook_differences(nbformat.read(source, as_version=4), nbformat.read(target, as_version=4))
    assert f"cell {cell.id}: outputs differ" in differences
    assert any(d.startswith(f"cell {other.id}: execution count") for d in differences)
    assert "zh_CN/notebooks/02_masks.ipynb: not current (run: python tools/i18n.py sync)" in i18n.edition_problems(repo)


def test_a_chinese_notebook_with_changed_code_or_cell_ids_is_caught(repo):
    source = repo / "notebooks" / "03_multi_head.ipynb"
    en = nbformat.read(source, as_version=4)
    zh = i18n.chinese_notebook(source, repo, allow_missing=True)
    code = next(c for c in zh.cells if c.cell_type == "code" and "import" in c.source)
    code.source += "\nprint('translated code')"
    assert i18n.notebook_differences(en, zh) == [f"cell {code.id}: code differs"]
    zh.cells[1].id = "renamed1"
    assert i18n.notebook_differences(en, zh)[0].startswith("cells differ")


def test_the_chinese_markdown_is_the_translation(repo):
    source = repo / "notebooks" / "02_masks.ipynb"
    pretend_translated(repo, source)
    zh = i18n.chinese_notebook(source, repo)  # complete: no --allow-missing needed
    expected, problems = i18n.chinese_text(source, repo)
    assert problems == [] and all(text.endswith("【中文】") for text in expected.values())
    en = nbformat.read(source, as_version=4)
    assert i18n.notebook_differences(en, zh, expected) == []
    assert all(c.source.endswith("【中文】") for c in zh.cells if c.cell_type == "markdown")
    alt = next(c for c in zh.cells if i18n.figure_alt(c))
    assert i18n.figure_alt(alt).endswith("【中文】")
    first_markdown_cell(zh).source += " 多出来的一句。"
    assert i18n.notebook_differences(en, zh, expected) == [f"cell {first_markdown_cell(zh).id}: Markdown is not "
                                                           "its translation"]
    # the set-up cell (tools/notebooks.py sync) is the English one: it installs minitfm from the repository and
    # reads no path relative to the notebook, so it works in zh_CN/notebooks/ and in Colab alike
    setup = next(c for c in zh.cells if c.cell_type == "code")
    assert setup.source.startswith("# minitfm set-up") and "../" not in setup.source


def test_incomplete_translations_fall_back_to_english_only_when_allowed(repo, capsys):
    source = repo / "notebooks" / "02_masks.ipynb"
    pretend_translated(repo, source)
    path = i18n.translation_path(source, repo)
    tr = i18n.read_translation(path)
    entry = [e for e in tr.entries if not e.key.endswith(i18n.ALT)][2]
    entry.zh = ""
    i18n.write_translation(path, tr)
    with pytest.raises(i18n.IncompleteTranslation, match=entry.key):
        i18n.chinese_notebook(source, repo)
    zh = i18n.chinese_notebook(source, repo, allow_missing=True)
    english = dict(i18n.source_entries(source))
    assert next(c for c in zh.cells if c.get("id") == entry.key).source == english[entry.key]
    assert sum(c.source.endswith("【中文】") for c in zh.cells if c.cell_type == "markdown") == \
        sum(c.cell_type == "markdown" for c in zh.cells) - 1  # the others are translated
    assert i18n.main(["--root", str(repo), "notebooks"]) == 1
    assert f"notebooks/02_masks.ipynb [{entry.key}] missing" in capsys.readouterr().err


# ------------------------------------------------------------------------------ pages, README, links
def test_readme_zh_is_current_and_links_back():
    path = ROOT / i18n.README_ZH
    assert path.is_file(), "README.zh-CN.md is missing: run python tools/i18n.py sync"
    text = path.read_text(encoding="utf-8")
    assert text == i18n.chinese_readme(allow_missing=True), "README.zh-CN.md is not current: run python tools/i18n.py sync"
    assert text.startswith("[English README](README.md)")
    assert i18n.link_problems(path, text, ROOT, Path.exists) == []


def test_a_hand_edited_readme_zh_is_caught(repo):
    (repo / i18n.README_ZH).write_text(i18n.chinese_readme(repo, allow_missing=True), encoding="utf-8")
    assert not [p for p in i18n.edition_problems(repo) if p.startswith(i18n.README_ZH)]
    with open(repo / i18n.README_ZH, "a", encoding="utf-8") as f:
        f.write("\n手工加的一段。\n")
    assert f"{i18n.README_ZH}: not current (run: python tools/i18n.py sync)" in i18n.edition_problems(repo)


def test_the_readme_zh_is_built_from_the_readme_blocks(repo):
    pretend_translated(repo, repo / "README.md")
    text = i18n.chinese_readme(repo)
    blocks = text.split("\n\n")
    assert blocks[0] == i18n.README_BACKLINK and "README.zh-CN.md)" not in text  # no link to itself
    assert blocks[1].startswith("# ") and blocks[2] == "【中文】"  # the title block, translated, comes next


def test_a_book_page_is_its_blocks_translated(repo):
    source = repo / "book" / "glossary.md"
    pretend_translated(repo, source)
    text = i18n.chinese_page(source, repo)
    english = source.read_text(encoding="utf-8")
    assert text.replace("\n\n【中文】", "") == "\n\n".join(b for _, b in i18n.page_entries(english)) + "\n"


def test_every_link_of_the_chinese_edition_resolves_inside_it(expected_edition):
    """Chinese chapters link to Chinese chapters and pages: zh_CN/ mirrors notebooks/ and book/."""
    files = {p.resolve() for p in expected_edition}
    problems = []
    for path, text in expected_edition.items():
        if path.suffix == ".ipynb":
            text = "\n\n".join(c.source for c in nbformat.reads(text, as_version=4).cells if c.cell_type == "markdown")
        edition_root = ROOT if path.name == i18n.README_ZH else ROOT / i18n.LANG
        exists = lambda p: p.resolve() in files or p.is_file()  # noqa: E731
        problems += [f"{rel(path)}: {p}" for p in i18n.link_problems(path, text, edition_root.resolve(), exists)]
    assert not problems, "\n".join(problems[:40])


def test_link_problems_sees_a_link_that_leaves_the_edition(tmp_path):
    edition = tmp_path / "zh_CN"
    (edition / "notebooks").mkdir(parents=True)
    (edition / "notebooks" / "01_attention.ipynb").write_text("{}")
    page = edition / "notebooks" / "02_masks.ipynb"
    text = "[1](01_attention.ipynb#x) [g](../book/glossary.md#term-mask) [r](../../README.md) [w](https://x.org)"
    assert i18n.link_problems(page, text, edition, Path.exists) == [
        "../../README.md: leaves the Chinese edition (zh_CN/)",
        "../book/glossary.md#term-mask: no such file in the Chinese edition"]


# ------------------------------------------------------------------------------ the Chinese site's sources
def test_the_chinese_book_source_tree(repo):
    shutil.copytree(ROOT / "book" / "_ext", repo / "book" / "_ext")
    shutil.copytree(ROOT / "_static", repo / "_static")
    files = i18n.site_files(repo, repo / "_build" / "zh_src", allow_missing=True)
    import yaml

    config = yaml.safe_load(files[Path("_config.yml")])
    sphinx = config["sphinx"]["config"]
    assert (sphinx["language"], sphinx["html_search_language"], config["repository"]["path_to_book"]) == \
        ("zh_CN", "zh", "zh_CN")
    assert sphinx["minitfm_other_edition"]["root"] == "../" and sphinx["html_extra_path"] == ["../site_assets"]
    toc = yaml.safe_load(files[Path("_toc.yml")])
    assert [part["caption"] for part in toc["parts"]] == ["从这里开始", "章节", "参考资料"]
    entries = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    missing = [e for e in entries if Path(e + ".ipynb") not in files and Path(e + ".md") not in files]
    assert not missing, missing
    words = files[Path("_search_words.txt")].split()
    assert {"注意力", "掩码", "因果掩码"} <= set(words)
    nb = json.loads(files[Path("notebooks/02_masks.ipynb")])
    assert len(nb["cells"]) == len(nbformat.read(repo / "notebooks" / "02_masks.ipynb", as_version=4).cells)


# ------------------------------------------------------------------------------ blocks and directives (review #8)
DIRECTIVE_THEN_PROSE = ("```{note}\nSome prose.\nMore prose.\n```\n\nNext paragraph.\n\nAnother paragraph.\n\n"
                        "```python\nx = 1\n\ny = 2\n```")


def test_a_directive_closing_fence_does_not_open_a_code_fence():
    """The review's repro: the closing ``` of a {note} opened a "code fence", merging what follows into one block."""
    assert i18n.split_blocks(DIRECTIVE_THEN_PROSE) == [
        "```{note}\nSome prose.\nMore prose.\n```", "Next paragraph.", "Another paragraph.",
        "```python\nx = 1\n\ny = 2\n```"]
    nested = "````{note}\nA.\n\n```{tip}\nB.\n\nC.\n```\n\nD.\n````\n\nE."
    assert i18n.split_blocks(nested) == ["````{note}\nA.", "```{tip}\nB.", "C.\n```", "D.\n````", "E."]
    blocks = i18n.page_blocks(nested)
    assert [inside for _, inside in blocks] == [(), (("````", "note"),), (("````", "note"), ("```", "tip")),
                                                (("````", "note"),), ()]
    assert i18n.line_kinds(["```{note}", ":class: tip", "Prose.", "```", "```", "code", "```", "Prose."]) == [
        "directive", "directive", "prose", "directive", "code", "code", "code", "prose"]


def test_chinese_inside_a_directive_and_after_it_is_joined():
    text = "```{note}\n:class: tip\n第一行，\n第二行。\n```\n\n后面的中文\n段落。\n\n```python\n# 注释一\n# 注释二\n```"
    assert i18n.join_cjk_lines(text) == (
        "```{note}\n:class: tip\n第一行，第二行。\n```\n\n后面的中文段落。\n\n```python\n# 注释一\n# 注释二\n```")
    # a block taken from inside a directive (a page is split inside it) knows where it is
    glossary = "因果掩码\n  一种掩码，\n  只允许位置 i 关注\n  它之前的位置。\n```"
    inside = (("```", "glossary"),)
    assert i18n.join_cjk_lines(glossary, inside) == "因果掩码\n  一种掩码，只允许位置 i 关注它之前的位置。\n```"
    two_terms = "注意力\n自注意力\n  定义。"  # two names of one glossary entry: two lines, never one
    assert i18n.join_cjk_lines(two_terms, inside) == two_terms
    assert i18n.stray_line_breaks(two_terms, inside) == []


def test_page_blocks_inside_a_directive_get_their_context(repo):
    page = repo / "book" / "glossary.md"
    contexts = i18n.page_contexts(page.read_text(encoding="utf-8"))
    keys = [k for k, _ in i18n.page_entries(page.read_text(encoding="utf-8"))]
    blocks = [b for _, b in i18n.page_entries(page.read_text(encoding="utf-8"))]
    first = next(n for n, b in enumerate(blocks) if b.startswith("```{glossary}"))  # opens the directive
    assert set(contexts) == set(keys[first + 1:]) and set(contexts.values()) == {(("```", "glossary"),)}


# ------------------------------------------------------------------------------ page keys by content (review #9)
def test_inserting_a_block_into_a_page_keeps_every_later_translation_current(repo, capsys):
    source = repo / "book" / "how_to_use.md"
    pretend_translated(repo, source)
    text = source.read_text(encoding="utf-8")
    entries = i18n.page_entries(text)
    section = max({k.split("/")[0] for k, _ in entries}, key=lambda s: sum(k.startswith(s + "/") for k, _ in entries))
    first = next(b for k, b in entries if k == f"{section}/2")
    later = [(k, b) for k, b in entries if k.startswith(section + "/") and int(k.split("/")[1]) >= 2]
    assert len(later) >= 3, "pick a section with more blocks"
    before = {e.en: e.zh for e in i18n.read_translation(i18n.translation_path(source, repo)).entries}
    source.write_text(text.replace(first, "A PARAGRAPH INSERTED INTO THE ENGLISH.\n\n" + first, 1), encoding="utf-8")
    before_extract = i18n.problems_of(source, repo)  # the keys moved: check says to run extract
    assert any("the block moved: run python tools/i18n.py extract" in p.detail for p in before_extract)

    assert i18n.main(["--root", str(repo), "extract", str(source)]) == 0
    assert capsys.readouterr().out == "locale/zh_CN/book/how_to_use.yml: %d entries\n" % (len(entries) + 1)
    problems = i18n.problems_of(source, repo)
    assert [(p.key, p.kind) for p in problems] == [(f"{section}/2", "missing")]
    after = i18n.read_translation(i18n.translation_path(source, repo)).by_key()
    for key, en in later:  # each moved one block down, with its translation
        number = int(key.split("/")[1]) + 1
        moved = after[f"{section}/{number}"]
        assert moved.en == en and moved.zh == before[en]
    assert i18n.main(["--root", str(repo), "stale", str(source)]) == 0
    assert capsys.readouterr().out.strip() == ""


def test_an_edited_block_keeps_its_translation_as_stale_even_when_its_number_moved():
    old = [i18n.Entry("s/1", "Alpha block.", "甲"), i18n.Entry("s/3", "Gamma block.", "丙"),
           i18n.Entry("s/2", "The beta block, with enough words to compare.", "乙")]
    # a block is inserted before the first, and the second is edited: every translation finds its English
    current = [("s/1", "New block."), ("s/2", "Alpha block."),
               ("s/3", "The beta block, with enough words to compare!"), ("s/4", "Gamma block.")]
    chosen = i18n.match_entries(current, old)
    assert [e.zh if e else None for e in chosen] == [None, "甲", "乙", "丙"]
    # by key when nothing else took it (the English changed in place: stale)
    assert [e.zh for e in i18n.match_entries([("s/1", "Alpha, rewritten entirely.")], old[:1])] == ["甲"]


# ------------------------------------------------------------------------------ line breaks that render as a space
@pytest.mark.parametrize("zh, joined", [
    ("前后两半配对：\n$(x_0, x_1)$ 成对", "前后两半配对：$(x_0, x_1)$ 成对"),  # after full-width punctuation
    ("位置插值、\nNTK-aware scaling", "位置插值、NTK-aware scaling"),
    ("模型）和\n[第 7 章](07_training.ipynb)（交叉熵）", "模型）和[第 7 章](07_training.ipynb)（交叉熵）"),  # a link
    ("注意力是\n**置换等变**的", "注意力是**置换等变**的"),  # bold
    ("*同一个*\n位置", "*同一个*位置"),  # after italic
    ("见 GPT-2\n（第 13 章）", "见 GPT-2（第 13 章）"),  # before full-width punctuation
    ("称为“token”\n的单位", "称为“token”的单位"),  # shared punctuation next to Chinese
    ("1. 第一项的\n   续行。\n2. 第二项", "1. 第一项的续行。\n2. 第二项"),  # a list item's own lines
    # left alone: Chinese next to Latin text, math or code (the conventional space), and structure
    ("中文\nGPT-2 英文", None), ("the “fill value”\nis", None), ("- 第一项，\n- 第二项", None),
    ("第一段。\n\n第二段", None), ("```python\n# 中文\n# 中文\n```", None), ("$$\n\\text{中文}\n\\text{中文}\n$$", None),
    ("| 中文 | 表 |\n| --- | --- |\n| 中 | 文 |", None), ("代码 `a\nb` 中文", None), ("硬换行：  \n第二行", None),
    ("文字：\n## 标题", None),
])
def test_line_breaks_that_render_as_a_space_are_removed(zh, joined):
    assert i18n.join_cjk_lines(zh) == (zh if joined is None else joined)
    assert i18n.stray_line_breaks(i18n.join_cjk_lines(zh)) == []
    if joined is not None:
        assert i18n.stray_line_breaks(zh), "the break was not seen as a stray space"


def test_a_join_that_would_change_the_markdown_is_not_made():
    # "**" preceded by a Chinese character and followed by punctuation opens no emphasis (CommonMark): joined,
    # the bold would turn into literal asterisks; the break stays, and the check still reports it
    zh = "注意力是\n**“置换等变”**（permutation-equivariant）的。"
    assert i18n.join_cjk_lines(zh) == zh
    assert i18n.stray_line_breaks(zh) == ["注意力是⏎“置换等变”（permutat"]


def test_no_translation_leaves_a_line_break_that_renders_as_a_space():
    """Every translation, through the edition writer's text functions (read-only, in memory): no soft line
    break between Chinese text or full-width punctuation and Chinese text, a link or emphasis."""
    found, entries = [], 0
    for source in SOURCES:
        inside = i18n.source_contexts(source)
        path = i18n.translation_path(source)
        if not path.exists():
            continue
        texts = {e.key: i18n.join_cjk_lines(e.zh, inside.get(e.key, ())) for e in i18n.read_translation(path).entries
                 if e.zh.strip()}
        edition, _ = i18n.chinese_text(source, allow_missing=True)  # what the edition writes (English if stale)
        english = dict(i18n.source_entries(source))
        assert all(edition[k] == texts[k] for k in edition if k in texts and edition[k] != english[k]), \
            "the edition's text is not join_cjk_lines of the translation"
        for key, text in texts.items():
            entries += 1
            found += [f"{rel(source)} [{key}]: {s}" for s in i18n.stray_line_breaks(text, inside.get(key, ()))]
    assert entries > 500
    assert not found, f"{len(found)} line breaks render as a space:\n  " + "\n  ".join(found[:40])


@pytest.mark.parametrize("zh, found", [
    # reported: a typed space beside full-width punctuation, whatever is on its other side, or between Chinese
    ("然后用 `config_cache_bytes`（`minitfm.generation.kv_memory`） 和一个 `ModelConfig` 验证",
     ["然后用 x（x）␣和一个 x 验证"]),  # the stray space of 345e79c (13b.4)
    ("结论： `generate` 给出", ["结论：␣x 给出"]), ("用 `generate` ，再", ["用 x␣，再"]),  # punctuation and code
    ("损失 。下一句", ["损失␣。下一句"]), ("一个 **（加粗）** 词", ["一个␣（加粗） 词", "一个 （加粗）␣词"]),
    ("把 选择方式 切换", ["把␣选择方式 切换", "把 选择方式␣切换"]),  # between Chinese characters
    ("| 表格 ，单元 | 二 |\n| --- | --- |\n| 中 | 文 |", ["表格␣，单元"]),  # inside a table cell too
    # left alone: the edition's conventional space between Chinese and Latin text, code or math, and spaces
    # beside shared punctuation, in code, in math and in code blocks
    ("用 `generate` 生成 GPT-2 的 $x$ 文本", []), ("“更差” = 留出集", []), ("README · 本书中文版", []),
    ("代码 `a ，b` 中文", []), ("$\\text{中 ，文}$", []), ("```\n中文 ，代码\n```", []),
    ("（`generate`）和一个", []), ("第一行，\n第二行", []),
])
def test_a_typed_space_beside_full_width_punctuation_or_between_chinese_is_reported(zh, found):
    assert i18n.typed_spaces(zh) == found


def test_check_reports_a_typed_space_by_file_and_cell(repo, capsys):
    source = repo / "notebooks" / "02_masks.ipynb"
    path = i18n.translation_path(source, repo)
    tr = i18n.read_translation(path)
    entry = next(e for e in tr.entries if "，" in e.zh)
    entry.zh = entry.zh.replace("，", " ，", 1)
    i18n.write_translation(path, tr)
    assert [(p.key, p.kind) for p in i18n.problems_of(source, repo)] == [(entry.key, "space")]
    assert i18n.main(["--root", str(repo), "check", str(source)]) == 1
    assert f"[{entry.key}] space: a typed space Chinese does not have: " in capsys.readouterr().out


def test_no_translation_has_a_typed_space_beside_full_width_punctuation():
    problems = [p for p in i18n.all_problems() if p.kind == "space"]
    assert not problems, "typed spaces that Chinese does not have:\n  " + "\n  ".join(map(str, problems[:40]))


@pytest.fixture(scope="module")
def chromium():
    from site_browser import browser_for_a_module

    yield from browser_for_a_module()


@pytest.mark.parametrize("lang, shown", [
    ("en", "The live model needs JavaScript: it runs on the book's web page."),
    ("zh-CN", "实时模型需要 JavaScript：它在本书的网页上运行。"),
])
def test_the_live_model_without_javascript_speaks_the_language_of_its_page(chromium, tmp_path, lang, shown):
    """A live model's cell output is the same in both editions (the notebooks' outputs are identical): its line for
    a page without JavaScript is written in both languages, and the book's CSS shows the page's own."""
    from minitfm.viz.live_model import live_explorer

    css = (ROOT / "_static" / "minitfm.css").as_uri()
    page_file = tmp_path / f"{lang}.html"
    page_file.write_text(f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>t</title>'
                         f'<link rel="stylesheet" href="{css}"></head><body>{live_explorer(prompt="the dog").html}'
                         "</body></html>", encoding="utf-8")
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(page_file.as_uri())
    assert page.inner_text("[data-minitfm-live-status]").strip() == shown
    context.close()


# ------------------------------------------------------------------------------ smaller points of the review
def test_a_price_is_not_math():
    en = "Here $x$ is math: GPT-3 cost $4.6M and Llama $2M to train."  # the review's example
    assert i18n.invariants(en)["math"] == {"x"}
    assert i18n.invariant_problems(en, "这里 $x$ 是数学：训练 GPT-3 花费 $4.6M，Llama 花费 $2M。") == []
    assert i18n.invariant_problems(en, "这里 $y$ 是数学：训练 GPT-3 花费 $4.6M，Llama 花费 $2M。")[0].startswith("math")
    assert i18n.invariants("$$\na + b\n$$ and `$not math$`")["math"] == {"a + b"}


def test_a_price_is_not_math_without_dollarmath_either(monkeypatch):
    monkeypatch.setattr(i18n, "_has_dollarmath", lambda: False)  # the stricter regular expressions stand in
    i18n.math_spans.cache_clear()
    try:
        assert i18n.invariants("Here $x$ is math: GPT-3 cost $4.6M and Llama $2M to train.")["math"] == {"x"}
        assert i18n.invariants("$$\na + b\n$$ and `$not math$` and $y_1$")["math"] == {"a + b", "y_1"}
    finally:
        i18n.math_spans.cache_clear()


@pytest.mark.parametrize("entries, message", [
    ("- key: a\n  en: A\n  zh: 甲\n- key: a\n  en: B\n  zh: 乙\n", "entries 1 and 2 have the same key 'a'"),
    ("- key: a\n  en: A\n  zh: 甲\n- just a string\n", "entry 2 is a str"),
    ("- key: a\n  en: A\n  zh: 甲\n  zh: 乙\n", "the field 'zh' appears twice"),
    ("- key: a\n  en: A\n  zn: 甲\n", "unknown field(s) ['zn']"),
    ("- key: a\n  en: A\n  zh: [甲]\n", "'zh' must be text, got list"),
    ("- en: A\n  zh: 甲\n", "entry 1 has no 'key'"),
])
def test_a_malformed_translation_file_is_refused_with_a_clear_error(tmp_path, entries, message):
    path = tmp_path / "x.yml"
    path.write_text("source: book/x.md\nentries:\n" + entries, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        i18n.read_translation(path)
    assert message in str(error.value) and str(path) in str(error.value)


def literal_bold_marks(text: str) -> bool:
    """Whether ``text`` shows a literal ``**`` in strict CommonMark (Colab, Jupyter): a text token of the tool's
    parser (CommonMark with its maths) holding it; code and maths are tokens of their own."""
    return any(t.type == "text" and "**" in t.content for t in i18n._walk(i18n._markdown().parse(text)))


@pytest.mark.parametrize("zh,shown", [("**练习 1.1。**下一个", True), ("**练习 1.1**。下一个", False),
                                      ("这是**粗体**，对吧", False), ("`x ** 2`", False)])
def test_bold_closed_after_full_width_punctuation_is_seen_as_literal(zh, shown):
    # CommonMark closes ** only after punctuation when a space or punctuation follows: "。**下" stays literal
    assert literal_bold_marks(zh) is shown


def test_the_chinese_renders_its_bold_wherever_the_english_does():
    found = [f"{rel(path)}: {e.key}" for path in sorted((ROOT / "locale" / "zh_CN").rglob("*.yml"))
             for e in i18n.read_translation(path).entries
             if e.zh and literal_bold_marks(e.zh) and not literal_bold_marks(e.en)]
    assert not found, ("Chinese text whose ** shows as two asterisks in Colab and Jupyter (strict CommonMark does not "
                       "close bold between full-width punctuation and a character: put the 。 or ： after the "
                       "closing **): " + "; ".join(found))
