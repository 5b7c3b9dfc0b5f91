"""The students' edition (`python tools/notebooks.py student OUT/`) keeps the exercises and drops every solution."""
import csv
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tool_modules import tool as load_tool

ROOT = Path(__file__).resolve().parents[2]
tool = load_tool("notebooks")


def everything(nb) -> str:
    """Every source line and every text output of a notebook, as one string."""
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            text = output.get("text") or "".join(output.get("data", {}).get("text/plain", ""))
            parts.append(text if isinstance(text, str) else "".join(text))
    return "\n".join(parts)


SYNTHETIC = [
    nbformat.v4.new_markdown_cell(
        "```{admonition} Exercise 1 (build)\n:class: tip\nEXERCISE_ONE: write `my_mask`.\n```\n\n"
        "````{admonition} Solution\n:class: dropdown\nSECRET_FENCED_4 in prose.\n\n```python\n"
        "def my_mask(t):  # SECRET_CODE_IN_SOLUTION\n    return t\n```\n````\n\nAfter the block: KEPT_AFTER."),
    nbformat.v4.new_code_cell("def my_mask(t_q, t_k):\n    raise NotImplementedError  # STUB_KEPT"),
    nbformat.v4.new_code_cell("from minitfm.exercises import check_causal_mask\ncheck_causal_mask(my_mask)  # CHECK_KEPT"),
    nbformat.v4.new_code_cell("# SOLUTION: the test suite runs this\ndef my_mask(t_q, t_k):\n    return SECRET_SOLUTION_CELL"),
    nbformat.v4.new_code_cell("x = 'SECRET_TAGGED_CELL'", metadata={"tags": ["solution"]}),
    nbformat.v4.new_markdown_cell(
        "EXERCISE_TWO: predict the shape.\n\n```{admonition} Solution\n:class: dropdown\nSECRET_FENCED_3\n```"),
    nbformat.v4.new_markdown_cell(":::{admonition} Solution\n:class: dropdown\nSECRET_COLON_FENCE\n:::"),
    nbformat.v4.new_markdown_cell(
        "EXERCISE_THREE in HTML.\n\n<details>\n<summary>Solution</summary>\n\nSECRET_DETAILS with **Markdown**.\n\n"
        "<details>\n<summary>A nested note</summary>\n\nSECRET_NESTED\n\n</details>\n\n```python\nSECRET_DETAILS_CODE = 1\n"
        "```\n\n</details>\n\n<details>\n<summary>Hint</summary>\n\nHINT_KEPT\n\n</details>"),
    nbformat.v4.new_markdown_cell("<details><summary>Solution (Ex 3)</summary>\n\nSECRET_ONE_LINE_SUMMARY\n\n</details>"),
]


def test_a_synthetic_notebook_loses_every_solution_form_and_keeps_the_rest(tmp_path):
    source = tmp_path / "in" / "chapter.ipynb"
    source.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=SYNTHETIC), source)
    assert tool.main(["student", str(tmp_path / "out"), str(source)]) == 0
    nb = nbformat.read(tmp_path / "out" / "chapter.ipynb", as_version=4)
    nbformat.validate(nb)
    text = everything(nb)
    assert re.findall(r"SECRET_\w+", text) == []
    assert "Solution" not in text
    for kept in ("EXERCISE_ONE", "EXERCISE_TWO", "EXERCISE_THREE", "KEPT_AFTER", "STUB_KEPT", "CHECK_KEPT", "HINT_KEPT"):
        assert kept in text, kept
    # 9 cells - 2 solution code cells; the 2 Markdown cells that held only a solution now hold the note
    assert len(nb.cells) == 7
    assert text.count(tool.STUDENT_NOTE) == 5  # one note where each of the five solution blocks was


def test_the_students_edition_says_what_to_do_instead_of_opening_a_solution(edition):
    for path in sorted(edition.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown").replace(tool.STUDENT_NOTE, "")
        pointers = re.findall(r"[^.\n]*\bsolutions?\b[^.\n]*", markdown, re.I)
        # the only sentences left that mention solutions say there are none in this edition
        assert all("no solution" in p for p in pointers), (path.name, pointers)
    assert tool.STUDENT_NOTE in everything(nbformat.read(edition / "01_attention.ipynb", as_version=4))


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("students")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "student", str(out)],
                            capture_output=True, text=True, check=True)
    assert "without solutions" in result.stdout
    return out


def solution_bodies(nb) -> list[str]:
    """Solution text found independently of the tool: fenced Solution blocks up to the same fence, and
    <details> blocks whose summary says Solution; plus code cells marked # SOLUTION."""
    bodies = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            if cell.source.lstrip().startswith("# SOLUTION"):
                bodies.append(cell.source)
            continue
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            fence = re.match(r"\s*(`{3,}|:{3,})\{admonition\} Solution", line)
            if fence:
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1))
                bodies.append("\n".join(lines[i + 1:end]))
        for block in re.findall(r"<details\b[^>]*>\s*<summary>[^<]*Solution.*?</details>", cell.source, re.S | re.I):
            bodies.append(block)
    return bodies


def test_the_command_writes_every_notebook(edition):
    names = sorted(p.name for p in tool.all_notebooks())
    assert sorted(p.name for p in edition.glob("*.ipynb")) == names and len(names) >= 10
    for name in names:
        assert "{admonition} Solution" not in everything(nbformat.read(edition / name, as_version=4)), name


def test_the_real_notebooks_keep_no_solution_text_or_code():
    checked = 0
    for path in tool.all_notebooks():  # converted in memory: other people may be editing the files meanwhile
        original = nbformat.read(path, as_version=4)
        student = tool.student_notebook(original)
        text, bodies = everything(student), solution_bodies(original)
        outside = everything(original)
        for body in bodies:  # what the notebook says outside its solutions may stay (an exercise quoting code)
            outside = outside.replace(body, "")
        for body in bodies:
            for line in body.split("\n"):  # every distinctive solution line is gone
                line = line.strip()
                if len(line) >= 25 and line not in outside:
                    assert line not in text, f"{path.name}: solution line survived: {line!r}"
                    checked += 1
        assert not re.search(r"\{admonition\} Solution|<summary>[^<]*Solution", text, re.I), path.name
        exercises = lambda nb: re.findall(  # noqa: E731
            r"\{admonition\} Exercise [^\n]*|<div class=\"exercise\"[^\n]*\n\n\\*\\*Exercise [^\n]*", everything(nb))
        assert exercises(student) == exercises(original), path.name
        kept_code = [c.source for c in original.cells if c.cell_type == "code" and not tool.is_solution_cell(c)]
        assert [c.source for c in student.cells if c.cell_type == "code"] == kept_code, path.name
    assert checked > 100  # the notebooks do hold solutions, and they were looked for


def test_it_refuses_to_overwrite_the_notebooks():
    with pytest.raises(SystemExit, match="refusing to write the students' edition over the notebooks"):
        tool.main(["student", str(tool.NOTEBOOKS)])


def test_it_needs_an_output_folder(capsys):
    with pytest.raises(SystemExit):
        tool.main(["student"])
    assert "student needs an output folder" in capsys.readouterr().err


# ---- grading a class with tools/grade.py ----
grade_tool = load_tool("grade")


def submission(mask_body: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import torch\nfrom minitfm.exercises import check_causal_mask, check_padding_mask"),
        nbformat.v4.new_code_cell(f"def my_causal_mask(t_q, t_k):\n    {mask_body}\ncheck_causal_mask(my_causal_mask)"),
        nbformat.v4.new_code_cell("def my_padding_mask(tokens, pad_id):\n    raise NotImplementedError\n"
                                  "check_padding_mask(my_padding_mask)"),
        nbformat.v4.new_code_cell("1 / 0  # an error in a cell does not stop the grading"),
    ])


def test_grade_runs_every_students_notebook_and_collects_each_verdict(tmp_path):
    import nbclient  # noqa: F401  jupyter-book and nbval (requirements.txt) install it: a missing one fails
    right = "return ~torch.ones(t_q, t_k, dtype=torch.bool).triu(t_k - t_q + 1)"
    for student, body in (("alice", right), ("bob", "return torch.ones(t_q, t_k, dtype=torch.bool).triu(t_k - t_q + 1)")):
        (tmp_path / "class" / student).mkdir(parents=True)
        nbformat.write(submission(body), tmp_path / "class" / student / "02_masks.ipynb")
    rows = grade_tool.grade(tmp_path / "class", tmp_path / "grades.csv", timeout=120)
    got = {(r["student"], r["checker"]): r["status"] for r in rows}
    assert got == {("alice", "check_causal_mask"): "pass", ("alice", "check_padding_mask"): "not implemented",
                   ("bob", "check_causal_mask"): "fail", ("bob", "check_padding_mask"): "not implemented"}
    bob = next(r for r in rows if r["student"] == "bob" and r["checker"] == "check_causal_mask")
    assert "polarity is flipped" in bob["message"] and bob["notebook_error"].startswith("ZeroDivisionError")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        assert [r["status"] for r in csv.DictReader(f)] == [r["status"] for r in rows] and len(rows) == 4
    assert grade_tool.summary(rows) == "alice: 1 of 2 checks pass\nbob: 0 of 2 checks pass"


def test_grade_can_read_the_verdicts_already_in_saved_outputs(tmp_path):
    nb = submission("pass")
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
        "✗ check_causal_mask: case 1 of 6 fails (a square 4 x 4 mask)\n  the mask's polarity is flipped\n"))]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="✓ check_padding_mask: all 4 cases pass\n")]
    nbformat.write(nb, tmp_path / "carol.ipynb")
    rows = grade_tool.grade(tmp_path, tmp_path / "grades.csv", execute=False)
    assert [(r["student"], r["checker"], r["status"]) for r in rows] == [
        ("carol", "check_causal_mask", "fail"), ("carol", "check_padding_mask", "pass")]
    assert rows[0]["message"].endswith("the mask's polarity is flipped")


# ---------------------------------------------------------------------------------- the Chinese students' edition
i18n = load_tool("i18n")

SYNTHETIC_ZH = [
    nbformat.v4.new_markdown_cell(
        '<div class="exercise" id="ex-2-1">\n\n**练习 2.1（构建）。** EXERCISE_ZH：写出 `my_mask`。\n\n</div>\n\n'
        '<details class="solution">\n<summary>答案（点击展开）</summary>\n\nSECRET_ZH_ANSWER\n\n```python\n'
        'SECRET_ZH_CODE = 1\n```\n\n</details>\n\n请在打开解答之前找出错误。'),
    nbformat.v4.new_markdown_cell('<details class="solution">\n<summary>参考答案（点击展开）</summary>\n\nSECRET_ZH_REF\n\n'
                                  '</details>\n\n<details>\n<summary>提示</summary>\n\nHINT_ZH_KEPT\n\n</details>'),
    nbformat.v4.new_markdown_cell("在本页上，检查器回应的是空的桩函数；答案隐藏在每道练习下方。"),
    nbformat.v4.new_code_cell("# SOLUTION: the test suite runs this\nSECRET_ZH_CELL = 1"),
]


def test_a_synthetic_chinese_notebook_loses_every_solution(tmp_path):
    source = tmp_path / "in" / "chapter.ipynb"
    source.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=SYNTHETIC_ZH), source)
    assert tool.main(["student", "--lang", "zh_CN", str(tmp_path / "out"), str(source)]) == 0
    text = everything(nbformat.read(tmp_path / "out" / "chapter.ipynb", as_version=4))
    assert re.findall(r"SECRET_\w+", text) == [] and "<summary>答案" not in text and "参考答案" not in text
    assert text.count(tool.STUDENT_NOTES["zh_CN"]) == 2 and tool.STUDENT_NOTE not in text
    for kept in ("EXERCISE_ZH", "HINT_ZH_KEPT", "请在下一次课之前自己找出错误", "本版不含答案：检查单元格就是你的反馈"):
        assert kept in text, kept


@pytest.fixture(scope="module")
def chinese_edition(tmp_path_factory):
    """The Chinese notebooks as tools/i18n.py writes them (English where a translation is still missing)."""
    folder = tmp_path_factory.mktemp("zh_notebooks")
    for source in tool.all_notebooks():
        nbformat.write(i18n.chinese_notebook(source, allow_missing=True), folder / source.name)
    return folder


def test_the_chinese_students_edition_is_the_english_one_in_chinese(chinese_edition, edition, tmp_path):
    out = tmp_path / "zh_students"
    assert tool.student(sorted(chinese_edition.glob("*.ipynb")), out, "zh_CN") == 0
    for english in sorted(edition.glob("*.ipynb")):
        en = nbformat.read(english, as_version=4)
        zh = nbformat.read(out / english.name, as_version=4)
        # the same cells survive (same ids, same code and outputs): only the Markdown is in Chinese
        assert [c.get("id") for c in zh.cells] == [c.get("id") for c in en.cells], english.name
        assert [c.source for c in zh.cells if c.cell_type == "code"] == \
            [c.source for c in en.cells if c.cell_type == "code"], english.name
        markdown = "\n".join(c.source for c in zh.cells if c.cell_type == "markdown")
        english_notes = everything(en).count(tool.STUDENT_NOTE)
        notes = markdown.count(tool.STUDENT_NOTES["zh_CN"]) + markdown.count(tool.STUDENT_NOTE)  # untranslated cells
        assert notes == english_notes, (english.name, notes, english_notes)
        assert "<details class=\"solution\"" not in markdown, english.name
        pointers = re.findall(r"[^。\n]*(?:(?:答案|解答)都?隐藏|(?:打开|查看|看)(?:答案|解答)之前)[^。\n]*", markdown)
        assert not pointers, (english.name, pointers)


def test_the_chinese_students_edition_needs_the_chinese_notebooks(tmp_path, monkeypatch):
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    with pytest.raises(SystemExit, match="python tools/i18n.py sync"):
        tool.edition_notebooks("zh_CN")
