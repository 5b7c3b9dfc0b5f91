"""Checks of the built Chinese edition (_build/html/zh_CN) and of the language switch between the editions.

Build both with ``bash tools/build_book.sh`` (while translations are incomplete:
``bash tools/build_book.sh --zh-allow-missing``); every test here skips when the Chinese site is absent,
as tests/book/test_site.py does for the English one.

Static checks (no browser): every page of the toc exists in both editions; ``<html lang>`` says which;
every page of both editions has one language switch, a relative link (with ``lang`` and ``hreflang``) to the
same page in the other edition; the Chinese pages' internal links and anchors resolve, they load nothing from
outside the site, their launch buttons open the Chinese notebooks (``zh_CN/notebooks/NAME.ipynb``), and every
anchor of an English page (section ids, explicit ``<a id>``, glossary terms, bibliography entries) exists in
its Chinese page; the Chinese search index holds 注意力 and 掩码.

Browser checks (tests/site_browser.py: the system's headless Chromium, network off): the language switch,
clicked both ways on three pages, lands on the same chapter in the other language (and keeps the section a
reader was at); it can be reached with the keyboard and shows its focus; every Chinese page passes
tests/book/test_site.py's offline test (math, images, widgets, explorers, solutions, no request leaving the site,
no JavaScript error) and its axe-core audit with 0 violations; the Chinese search page finds the attention
chapter for 注意力 and the masks chapter for 掩码. Screenshots of three Chinese pages on a desktop and a phone
go to _build/screenshots/zh/ (look at them: Chinese glyphs drawn, the switch visible).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from site_browser import browser_unavailable
from tool_modules import tool
from test_site import (ACCESSIBILITY, PAGES, SCREENSHOTS, SITE, broken_link, browser,  # noqa: F401
                       internal_links, offline_page_problems, parse)

ROOT = Path(__file__).resolve().parents[2]
ZH = SITE / "zh_CN"
ZH_SHOTS = SCREENSHOTS / "zh"
BUILT = bool(PAGES) and (ZH / "index.html").is_file()
needs_zh = pytest.mark.skipif(not BUILT, reason=f"no built Chinese edition at {ZH}: build both editions with "
                                                 "`bash tools/build_book.sh`")
EXTRA_PAGES = ["search.html", "genindex.html"]
SWITCH_PAGES = ["book/intro.html", "notebooks/02_masks.html", "book/glossary.html"]
SHOT_PAGES = ["book/intro.html", "notebooks/01_attention.html", "book/glossary.html"]


def switch_links(path: Path) -> list[dict]:
    """The language-switch links of a page (``<a class="... minitfm-lang-switch">``), with their attributes."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for tag in re.findall(r"<a\b[^>]*\bminitfm-lang-switch\b[^>]*>", text):
        found.append(dict(re.findall(r'([\w-]+)="([^"]*)"', tag)))
    return found


def all_html(site: Path) -> list[str]:
    """Every rendered page of an edition (not the redirect index.html, not the other edition's pages)."""
    pages = []
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site).as_posix()
        if rel == "index.html" or rel.startswith(("zh_CN/", "_static/", "_sources/", "_assets/", "_images/")):
            continue
        pages.append(rel)
    return pages


# ------------------------------------------------------------------------------ static checks
@needs_zh
def test_every_page_exists_in_both_editions():
    missing = [f"{edition}/{page}" for page in PAGES + EXTRA_PAGES
               for edition, site in (("en", SITE), ("zh_CN", ZH)) if not (site / page).is_file()]
    assert not missing, f"pages missing from an edition (run bash tools/build_book.sh): {missing}"
    only_zh = sorted(set(all_html(ZH)) - set(all_html(SITE)))
    assert not only_zh, f"pages only the Chinese edition has: {only_zh}"


@needs_zh
def test_html_lang_names_the_edition():
    wrong = []
    for site, lang in ((SITE, "en"), (ZH, "zh-CN")):
        for page in PAGES + EXTRA_PAGES:
            head = (site / page).read_text(encoding="utf-8")[:2000]
            match = re.search(r"<html[^>]*\blang=\"([^\"]+)\"", head)
            if not match or match.group(1) != lang:
                wrong.append(f"{site.relative_to(SITE.parent)}/{page}: lang={match and match.group(1)!r}, not {lang!r}")
    assert not wrong, "\n".join(wrong)


@needs_zh
def test_every_page_has_a_language_switch_to_the_same_page_in_the_other_edition():
    problems = []
    for site, other, lang in ((SITE, ZH, "zh-CN"), (ZH, SITE, "en")):
        for page in all_html(site):
            links = switch_links(site / page)
            where = f"{'zh_CN/' if site == ZH else ''}{page}"
            if len(links) != 1:
                problems.append(f"{where}: {len(links)} language switches")
                continue
            link = links[0]
            href = link.get("href", "")
            if urlsplit(href).scheme or href.startswith("/"):
                problems.append(f"{where}: switch href {href!r} is not relative")
                continue
            target = Path(os.path.normpath((site / page).parent / unquote(href)))
            if target != other / page:
                problems.append(f"{where}: switch goes to {target}, not {other / page}")
            elif not target.is_file():
                problems.append(f"{where}: switch target {href!r} was not built")
            if link.get("hreflang") != lang or link.get("lang") != lang:
                problems.append(f"{where}: switch has hreflang={link.get('hreflang')!r} lang={link.get('lang')!r}, "
                                f"not {lang!r}")
            head = (site / page).read_text(encoding="utf-8").split("</head>")[0]
            if f'<link rel="alternate" hreflang="{lang}" href="{href}"' not in head:
                problems.append(f"{where}: no <link rel=alternate hreflang={lang}> in the head")
    assert not problems, "\n".join(problems[:40])


@needs_zh
def test_chinese_internal_links_and_anchors_resolve():
    broken = []
    for page in PAGES + ["genindex.html"]:
        for tag, attr, url, target, fragment in internal_links(ZH / page):
            problem = broken_link(tag, attr, url, target, fragment)
            if problem is None and not target.is_relative_to(ZH.resolve()) and target != (SITE / page).resolve():
                # only the language switch and its <link rel=alternate> (the same page in English) leave it
                problem = f"<{tag} {attr}={url!r}> leaves the Chinese edition"
            if problem:
                broken.append(f"zh_CN/{page}: {problem}")
    assert not broken, "broken internal links in the Chinese edition:\n" + "\n".join(broken[:40])


@needs_zh
def test_chinese_pages_load_no_resource_from_outside_the_site():
    external = [f"zh_CN/{page}: <{tag} {attr}={url}>" for page in PAGES
                for tag, attr, url in parse(ZH / page).links
                if tag != "a" and urlsplit(url).scheme not in ("", "data", "blob")]
    assert not external, "Chinese pages load resources from outside the site:\n" + "\n".join(external)


@needs_zh
def test_chinese_launch_buttons_open_the_chinese_notebooks():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo = config["repository"]["url"].rstrip("/")
    branch = config["repository"].get("branch", "main")
    owner_name = urlsplit(repo).path.strip("/")
    problems = []
    notebooks = [p for p in PAGES if (ZH / "_sources" / Path(p).with_suffix(".ipynb")).is_file()]
    assert len(notebooks) >= 10, f"only {len(notebooks)} notebook pages in the Chinese edition"
    for page in notebooks:
        notebook = "zh_CN/" + Path(page).with_suffix(".ipynb").as_posix()
        hrefs = {url for tag, _, url in parse(ZH / page).links if tag == "a"}
        expected = {
            "Colab": f"https://colab.research.google.com/github/{owner_name}/blob/{branch}/{notebook}",
            "Binder": f"https://mybinder.org/v2/gh/{owner_name}/{branch}?urlpath=lab/tree/{notebook}",
            "download": os.path.relpath(ZH / "_sources" / Path(page).with_suffix(".ipynb"), (ZH / page).parent),
        }
        missing = {name: url for name, url in expected.items() if url not in hrefs}
        if missing:
            problems.append(f"zh_CN/{page} lacks {missing}")
        wrong = [h for h in hrefs if ("colab.research" in h or "mybinder" in h) and notebook not in h]
        if wrong:
            problems.append(f"zh_CN/{page}: launch links to other notebooks: {wrong}")
    assert not problems, "\n".join(problems)


_AUTO_ID = re.compile(r"^(id\d+|term-\d+)$")


@needs_zh
def test_every_english_anchor_exists_in_the_chinese_page():
    """Section ids, explicit anchors, glossary terms and bibliography entries: links work in both editions."""
    problems = []
    for page in PAGES:
        missing = sorted(i for i in parse(SITE / page).ids - parse(ZH / page).ids if not _AUTO_ID.match(i))
        if missing:
            problems.append(f"{page}: {len(missing)} anchors only in English, e.g. {missing[:6]}")
    assert not problems, "\n".join(problems)


@needs_zh
def test_the_themes_labels_are_in_chinese():
    """aria-labels, titles and alt texts of the theme that its catalogues leave in English are translated
    (tools/i18n.py ZH_SITE["ui"], applied by book/_ext/minitfm_i18n.py)."""
    english = set(tool("i18n").ZH_SITE["ui"])
    attribute = re.compile(r'\s(?:aria-label|title|alt|placeholder|data-bs-title)="([^"]*)"')
    left = sorted({f"zh_CN/{page}: {value!r}" for page in PAGES + EXTRA_PAGES
                   for value in attribute.findall((ZH / page).read_text(encoding="utf-8")) if value in english})
    assert not left, "theme labels left in English on Chinese pages:\n" + "\n".join(left[:30])
    footer = (ZH / "book/intro.html").read_text(encoding="utf-8")
    assert "© Copyright" not in footer and "The minitfm authors" not in footer


def _search_index(site: Path) -> dict:
    text = (site / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


@needs_zh
@pytest.mark.parametrize("word, chapter", [("注意力", "notebooks/01_attention"), ("掩码", "notebooks/02_masks")])
def test_chinese_search_index_holds_chinese_words(word, chapter):
    index = _search_index(ZH)
    docs = set()
    for table in ("terms", "titleterms"):
        value = index[table].get(word, [])
        docs |= {index["docnames"][i] for i in ([value] if isinstance(value, int) else value)}
    assert chapter in docs, f"the Chinese search index maps {word!r} to {sorted(docs)}, not to {chapter}"


# ------------------------------------------------------------------------------ browser checks
@pytest.fixture(scope="module")
def zh_browser(browser):  # noqa: F811 - the fixture of tests/book/test_site.py, serving the whole of _build/html
    if not BUILT:
        pytest.skip(f"no built Chinese edition at {ZH}")
    return browser


def _lang_and_path(page) -> tuple[str, str]:
    return page.evaluate("document.documentElement.lang"), urlsplit(page.page.url).path


@pytest.mark.parametrize("page_path", SWITCH_PAGES)
def test_language_switch_clicked_both_ways_lands_on_the_same_page(zh_browser, page_path):
    page = zh_browser.open(f"{zh_browser.site.origin}/{page_path}")
    try:
        title_en = page.evaluate("document.querySelector('h1').textContent.trim()")
        with page.page.expect_navigation():
            page.page.locator("a.minitfm-lang-switch").first.click()
        lang, path = _lang_and_path(page)
        assert (lang, path) == ("zh-CN", f"/zh_CN/{page_path}"), f"English {page_path} switched to {path} ({lang})"
        title_zh = page.evaluate("document.querySelector('h1').textContent.trim()")
        assert re.search(r"[\u4e00-\u9fff]", title_zh) and title_zh != title_en, (title_en, title_zh)
        with page.page.expect_navigation():
            page.page.locator("a.minitfm-lang-switch").first.click()
        lang, path = _lang_and_path(page)
        assert (lang, path) == ("en", f"/{page_path}"), f"Chinese {page_path} switched to {path} ({lang})"
        assert page.evaluate("document.querySelector('h1').textContent.trim()") == title_en
    finally:
        page.close()


def test_language_switch_keeps_the_section_and_works_from_the_keyboard(zh_browser):
    page = zh_browser.open(f"{zh_browser.site.origin}/notebooks/02_masks.html")
    try:
        switch = page.page.locator("a.minitfm-lang-switch").first
        for _ in range(60):  # Tab from the top of the page until the switch has the focus
            page.page.keyboard.press("Tab")
            if page.evaluate("document.activeElement && document.activeElement.classList.contains("
                             "'minitfm-lang-switch')"):
                break
        else:
            pytest.fail("the language switch cannot be reached with Tab")
        outline = page.evaluate("(() => { const s = getComputedStyle(document.activeElement);"
                                " return [s.outlineStyle, s.outlineWidth]; })()")
        assert outline[0] != "none" and outline[1] != "0px", f"no visible focus on the switch: {outline}"
        ZH_SHOTS.mkdir(parents=True, exist_ok=True)
        box = switch.bounding_box()  # with a margin: the focus ring is drawn outside the link
        page.page.screenshot(path=ZH_SHOTS / "switch_focused.png",
                             clip={"x": box["x"] - 12, "y": box["y"] - 12, "width": box["width"] + 24,
                                   "height": box["height"] + 24})
        # the reader goes to a section (the focus stays on the switch), then follows the switch
        page.evaluate("history.replaceState(null, '', '#the-padding-mask')")
        with page.page.expect_navigation():
            page.page.keyboard.press("Enter")
        lang, path = _lang_and_path(page)
        assert (lang, path) == ("zh-CN", "/zh_CN/notebooks/02_masks.html")
        assert urlsplit(page.page.url).fragment == "the-padding-mask"
        assert page.evaluate("!!document.getElementById('the-padding-mask')"), "the section's anchor is not there"
    finally:
        page.close()


@pytest.mark.parametrize("page_path", PAGES or ["(no built book)"])
def test_chinese_page_renders_offline_and_passes_axe(zh_browser, page_path):
    if not (ZH / page_path).is_file():
        pytest.fail(f"zh_CN/{page_path} was not built")
    problems = offline_page_problems(zh_browser, page_path, prefix="zh_CN/", screenshots=ZH_SHOTS / "pages",
                                     accessibility=ACCESSIBILITY / "zh")
    assert not problems, f"zh_CN/{page_path}:\n  " + "\n  ".join(problems)


SEARCH_JS = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const deadline = Date.now() + 20000;
  let count = -1;
  while (Date.now() < deadline) {
    const summary = document.querySelector('#search-results .search-summary, #search-results p');
    const links = [...document.querySelectorAll('#search-results ul.search li a')];
    if (summary && summary.textContent.trim() && links.length === count) return links.map(a => a.getAttribute('href'));
    count = links.length;
    await sleep(300);
  }
  return [...document.querySelectorAll('#search-results ul.search li a')].map(a => a.getAttribute('href'));
})()
"""


@pytest.mark.parametrize("word, chapter", [("注意力", "notebooks/01_attention.html"), ("掩码", "notebooks/02_masks.html")])
def test_chinese_search_finds_the_chapter(zh_browser, word, chapter):
    page = zh_browser.open(f"{zh_browser.site.origin}/zh_CN/search.html?q={word}")
    try:
        hrefs = page.evaluate(SEARCH_JS)
        found = [urlsplit(h).path.lstrip("./") for h in hrefs]
        assert chapter in found, f"searching the Chinese site for {word!r} gave {found[:15]}"
        assert not page.js_errors(), page.js_errors()
        assert not [u for u in page.requests() if not zh_browser.site.is_local(u)]
    finally:
        page.close()


@pytest.mark.parametrize("page_path", SHOT_PAGES)
def test_screenshots_of_chinese_pages_on_desktop_and_phone(zh_browser, page_path):
    """Saves _build/screenshots/zh/{desktop,mobile}__PAGE.png; checks the switch is visible and text is Chinese."""
    shots, size = [], zh_browser.size
    for device, (width, height) in (("desktop", (1280, 900)), ("mobile", (390, 844))):
        zh_browser.size = {"width": width, "height": height}  # the viewport of the pages it opens
        try:
            page = zh_browser.open(f"{zh_browser.site.origin}/zh_CN/{page_path}")
            page.evaluate("document.fonts.ready.then(() => true)")
            box = page.page.locator("a.minitfm-lang-switch").first.bounding_box()
            assert box and box["width"] > 0 and box["y"] + box["height"] <= height, \
                f"{device}: the language switch is not visible at the top of the page: {box}"
            text = page.evaluate("document.querySelector('main').innerText")
            assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 20, f"{device}: no Chinese text on zh_CN/{page_path}"
            path = ZH_SHOTS / f"{device}__{page_path.replace('/', '__').replace('.html', '.png')}"
            page.screenshot(path)
            shots.append(path)
            page.close()
        finally:
            zh_browser.size = size
    assert all(p.is_file() and p.stat().st_size > 10_000 for p in shots), shots


def test_browser_checks_can_run():
    """Says plainly (a skip) when the browser checks above cannot run here."""
    missing = browser_unavailable()
    if missing:
        pytest.skip(missing)
