"""The notebooks as Colab and Jupyter show them: CommonMark, not MyST (issue 18).

For every notebook: convert it with nbconvert's classic HTML exporter (the classic Jupyter rendering),
open it in headless Chromium (Playwright on the system browser, network off: the page's CDN scripts,
MathJax and jQuery, are blocked, as no result depends on them) and check that

- no MyST syntax is visible: ``{admonition}``, ``{cite``, ``{term}``, ``{ref}``, ``{doc}``, ``:class:``,
  ``:name:``;
- every solution of the notebook's Markdown is a ``<details>`` in the page (as many as the source has),
  and none of its text is visible before its ``<summary>`` is clicked: the solution is closed, none of its
  elements is visible, and clicking adds its first words to the page's visible text (``innerText``);
- after the click, it is visible;
- every figure the notebook embeds (a PNG output: plots and the diagrams of ``minitfm.viz.diagrams``) is drawn:
  an ``<img>`` that loaded, with a size, for each one.

A screenshot of each chapter's first exercise, solutions still collapsed, goes to
_build/screenshots/colab_view_chNN.png. One browser serves every notebook. Skips without Playwright or
Chromium (tests/site_browser.py says why).

The same checks run on the Chinese notebooks (zh_CN/notebooks/, written by ``python tools/i18n.py sync``);
there a solution is a ``<details class="solution">`` whatever its summary says (答案, 解答...).
Screenshots: _build/screenshots/colab_view_zh_chNN.png.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import nbformat
import pytest

from site_browser import Browser, LocalSite, browser_unavailable
from test_notebooks_meta import NOT_YET_CONVERTED

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SCREENSHOTS = ROOT / "_build" / "screenshots"
MYST_TEXT = ("{admonition}", "{cite", "{term}", "{ref}", "{doc}", ":class:", ":name:")
# a solution in the Markdown: the CommonMark form, or a MyST one (which must not be shown open either)
SOLUTION_IN_SOURCE = re.compile(r"<summary>\s*Solution|^\s*(?:`{3,}|:{3,})\s*\{(?:admonition|dropdown)\}\s*Solution",
                                re.I | re.M)
# in the Chinese notebooks the summary is translated: the class says it is a solution
SOLUTION_IN_CHINESE_SOURCE = re.compile(r"<details\b[^>]*\bclass=\"[^\"]*\bsolution\b", re.I)

# Text of the page as a reader sees it, and each solution's state; ``visible`` follows the site test.
PAGE_JS = r"""
(() => {
  const norm = s => s.replace(/\s+/g, ' ').trim();
  const visible = el => el.checkVisibility({visibilityProperty: true, opacityProperty: true,
                                           checkVisibilityCSS: true, checkOpacity: true})
                        && el.getBoundingClientRect().height > 0;
  const text = norm(document.body.innerText);
  const solutions = [...document.querySelectorAll('details')]
    .filter(d => d.querySelector(':scope > summary') && (d.classList.contains('solution') ||
                 /^\s*solution/i.test(d.querySelector(':scope > summary').textContent)))
    .map((d, index) => {
      d.setAttribute('data-test-solution', String(index));
      const body = [...d.children].filter(c => c.tagName !== 'SUMMARY');
      const words = norm(body.map(c => c.textContent).join(' '));
      const snippet = words.slice(0, 60);
      return {index, open: d.open, bodyElements: body.length, snippet, visible: body.some(visible)};
    });
  return {text, solutions};
})()
"""

SOLUTION_JS = r"""
(([index, snippet]) => {
  const norm = s => s.replace(/\s+/g, ' ').trim();
  const d = document.querySelector(`details[data-test-solution="${index}"]`);
  const visible = el => el.checkVisibility({visibilityProperty: true, opacityProperty: true,
                                           checkVisibilityCSS: true, checkOpacity: true})
                        && el.getBoundingClientRect().height > 0;
  return {open: d.open, visible: [...d.children].filter(c => c.tagName !== 'SUMMARY').some(visible),
          shown: norm(document.body.innerText).split(snippet).length - 1};
})
"""


FIGURES_JS = r"""
(() => [...document.images].filter(img => img.src.startsWith('data:image/png'))
  .map(img => ({width: img.naturalWidth, height: img.getBoundingClientRect().height})))()
"""
# The diagrams the book draws (issue 26), and the chapter each must appear in.
DIAGRAMS = {"01_attention": ["attention_diagram"], "02_masks": ["mask_diagram"],
            "03_multi_head": ["head_split_diagram"], "05_norms_ffn": ["block_diagram"],
            "06_whole_transformer": ["encoder_decoder_diagram"], "08_kv_cache": ["kv_cache_diagram"]}


def png_outputs(path: Path) -> int:
    cells = nbformat.read(path, as_version=4).cells
    return sum("image/png" in o.get("data", {}) for c in cells if c.cell_type == "code" for o in c.outputs)


def test_each_diagram_is_drawn_in_its_chapter():
    for stem, names in DIAGRAMS.items():
        cells = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4).cells
        for name in names:
            drawn = [c for c in cells if c.cell_type == "code" and f"diagrams.{name}(" in c.source]
            assert drawn, f"{stem} draws no minitfm.viz.diagrams.{name}()"
            assert any("image/png" in o.get("data", {}) for o in drawn[0].outputs), f"{stem}: {name} has no figure"
            assert drawn[0].metadata.get("mystnb", {}).get("image", {}).get("alt"), f"{stem}: {name} has no alt text"


def solutions_in_source(path: Path, pattern: re.Pattern = SOLUTION_IN_SOURCE) -> int:
    cells = nbformat.read(path, as_version=4).cells
    return sum(len(pattern.findall(c.source)) for c in cells if c.cell_type == "markdown")


def classic_html(path: Path) -> str:
    """The notebook as nbconvert's classic template renders it (the classic Jupyter Notebook look)."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="classic").from_notebook_node(nbformat.read(path, as_version=4))
    return body


@pytest.fixture(scope="module")
def viewer():
    missing = browser_unavailable()
    if missing:
        pytest.skip(missing)
    import nbconvert  # noqa: F401  jupyter-book and jupyterlab (requirements.txt) install it: a missing one fails
    with tempfile.TemporaryDirectory(prefix="colab_view_") as folder:
        site = LocalSite(Path(folder))
        browser = Browser(site, width=1100, height=900)
        try:
            yield Path(folder), browser
        finally:
            browser.close()
            site.close()


def shot_name(path: Path, prefix: str = "colab_view_") -> str:
    match = re.match(r"^(\d+[a-z]?)_", path.stem)
    return f"{prefix}ch{match.group(1)}.png" if match else f"{prefix}{path.stem}.png"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_reads_well_in_classic_jupyter(viewer, path):
    if path.name in NOT_YET_CONVERTED:
        pytest.skip(f"{path.name} is in test_notebooks_meta.NOT_YET_CONVERTED")
    problems = classic_view_problems(viewer, path, solutions_in_source(path), shot_name(path))
    assert not problems, f"{path.name} in classic Jupyter:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS])
def test_chinese_notebook_reads_well_in_classic_jupyter(viewer, name):
    if name in NOT_YET_CONVERTED:
        pytest.skip(f"{name} is in test_notebooks_meta.NOT_YET_CONVERTED")
    path = ROOT / "zh_CN" / "notebooks" / name  # tests/book/test_i18n.py checks they are what i18n.py sync writes
    expected = solutions_in_source(path, SOLUTION_IN_CHINESE_SOURCE)
    assert expected == solutions_in_source(ROOT / "notebooks" / name), "the translation lost or added a solution"
    problems = classic_view_problems(viewer, path, expected, shot_name(path, "colab_view_zh_"), page_name=f"zh_{name}")
    assert not problems, f"zh_CN/notebooks/{name} in classic Jupyter:\n  " + "\n  ".join(problems)


MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)  # display maths, then inline maths, as the page text holds it


def without_math(text: str) -> str:
    """The page's text without its $...$ and $$...$$ spans (raw TeX when MathJax does not run)."""
    return MATH.sub(" ", text)


def test_without_math_keeps_myst_outside_maths():
    assert "{ref}" not in without_math(r"the reference $\pi_\text{ref}$ and $$\text{ref}$$ here")
    assert "{ref}" in without_math(r"see {ref}`x` and $a$")


def classic_view_problems(viewer, path: Path, expected: int, screenshot: str, page_name: str = "") -> list[str]:
    """Everything the classic-Jupyter view checks, for one notebook with ``expected`` solutions."""
    folder, browser = viewer
    stem = Path(page_name or path.name).stem
    (folder / f"{stem}.html").write_text(classic_html(path), encoding="utf-8")
    page = browser.open(f"{browser.site.origin}/{stem}.html")
    problems = []
    try:
        before = page.evaluate(PAGE_JS)
        text = without_math(before["text"])  # the MathJax is blocked here: "$\\pi_\\text{ref}$" is TeX, not MyST
        shown = [s for s in MYST_TEXT if s in text]
        if shown:
            context = [text[max(0, text.index(s) - 40):text.index(s) + 60] for s in shown]
            problems.append(f"MyST syntax visible: {shown}, e.g. {context[:3]}")

        figures = page.evaluate(FIGURES_JS)
        if len(figures) != png_outputs(path) or any(f["width"] == 0 or f["height"] < 20 for f in figures):
            problems.append(f"{png_outputs(path)} figures in the notebook, drawn in the page: {figures}")

        found = before["solutions"]
        if len(found) != expected:
            problems.append(f"{expected} solutions in the Markdown but {len(found)} <details> solutions in the page")
        for s in found:
            if s["open"] or s["visible"]:
                problems.append(f"solution {s['index'] + 1} visible before its toggle was clicked: {s}")
            if not s["bodyElements"] or not s["snippet"]:
                problems.append(f"solution {s['index'] + 1} is empty: {s}")

        if found:  # collapsed solutions, as a reader first sees them
            page.evaluate("(() => { const e = document.querySelector('div.exercise') ||"
                          " document.querySelector('details'); e.scrollIntoView({block: 'start'});"
                          " window.scrollBy(0, -20); })()")
            page.screenshot(SCREENSHOTS / screenshot)

        for index in range(len(found)):
            # the solution's text is on the page's visible text only once its summary is clicked: opening it
            # adds its first words to the text (they may also be elsewhere, e.g. in a code cell)
            snippet = found[index]["snippet"]
            closed = page.evaluate(SOLUTION_JS, [index, snippet])
            page.page.locator(f'details[data-test-solution="{index}"] > summary').click()
            opened = page.evaluate(SOLUTION_JS, [index, snippet])
            if not (opened["open"] and opened["visible"]):
                problems.append(f"solution {index + 1} still hidden after a click on its summary: {opened}")
            if closed["visible"] or opened["shown"] <= closed["shown"]:
                problems.append(f"solution {index + 1}'s text {snippet!r} was already visible before the click "
                                f"(closed: {closed}, opened: {opened})")
    finally:
        page.close()
    return problems
