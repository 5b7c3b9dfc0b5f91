"""The book in two languages (loaded through ``sphinx.local_extensions``; tools/i18n.py writes the Chinese one).

1. **A language switch on every page**, linking to the same page in the other edition. The English site is
   ``_build/html/``, the Chinese ``_build/html/zh_CN/``; ``minitfm_other_edition`` (``_config.yml`` for the
   English, the generated Chinese ``_config.yml`` for the Chinese) says where the other edition's root is,
   relative to this one's, and how the link reads. The link is relative, so that it works from ``file://``
   and under any base URL; it is a real ``<a href>`` with ``lang`` and ``hreflang`` (keyboard focus and
   screen readers), placed in the article header by ``templates/minitfm-lang-switch.html`` (the theme's
   ``article_header_end``), and announced in the head as ``<link rel="alternate" hreflang>``.
   ``_static/minitfm-lang.js`` adds the current ``#fragment`` when it is clicked: anchors are the same in
   both editions (below), so the reader lands on the same section.
2. **Stable heading anchors in the Chinese edition.** A Chinese heading would get an id made from its own
   text; ``minitfm_heading_ids`` names the English site, and every section of a Chinese page gets, in
   addition, the id of the corresponding section of the English page (same document, same order: the
   translation keeps the heading levels, which tools/i18n.py checks), first, so that permalinks and the
   page's own table of contents use it. So ``02_masks.html#the-padding-mask`` works in both editions. Explicit ``<a id>`` anchors are kept by the translation itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
TEMPLATES = Path(__file__).resolve().parent / "templates"
_SECTION_ID = re.compile(r'<section\b[^>]*?\sid="([^"]+)"')


def add_templates(app: Sphinx, config) -> None:
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.append(str(TEMPLATES))


def other_edition_href(pagename: str, root: str, suffix: str = ".html") -> str:
    """The relative URL of ``pagename`` in the other edition, from ``pagename`` in this one."""
    return "../" * pagename.count("/") + root + pagename + suffix


def language_switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    other = app.config.minitfm_other_edition
    if not other or app.builder.format != "html":
        return
    href = other_edition_href(pagename, other["root"], app.builder.out_suffix)
    context["minitfm_lang_switch"] = {**other, "href": href}
    context["metatags"] = context.get("metatags", "") + (
        f'\n    <link rel="alternate" hreflang="{other["lang"]}" href="{href}" />')


def english_section_ids(app: Sphinx, doctree: nodes.document) -> None:
    """Give every section of this page the id of the same section in the other (English) site too."""
    source = app.config.minitfm_heading_ids
    if not source:
        return
    docname = app.env.docname
    html = Path(app.confdir, source, docname + ".html")
    if not html.is_file():
        logger.warning("no English page %s to take heading anchors from: build the English book first "
                       "(bash tools/build_book.sh builds both)", html, location=docname,
                       type="minitfm", subtype="i18n")
        return
    app.env.note_dependency(str(html))  # re-read this page when the English one changes
    english = _SECTION_ID.findall(html.read_text(encoding="utf-8"))
    sections = list(doctree.findall(nodes.section))
    if len(english) != len(sections):
        logger.warning("%d sections here but %d in the English page: the translation must keep every heading "
                       "and its level (python tools/i18n.py check)", len(sections), len(english),
                       location=docname, type="minitfm", subtype="i18n")
        return
    for section, ident in zip(sections, english):
        if ident in section["ids"]:
            continue
        if ident in doctree.ids and doctree.ids[ident] is not section:
            logger.info("%s: English anchor %r already names another element", docname, ident)
            continue
        section["ids"].insert(0, ident)  # first: the section's id, its permalink and the page's own toc use it
        doctree.ids[ident] = section


_UI_ATTRIBUTE = re.compile(r'(\s(?:aria-label|title|alt|placeholder|data-bs-title|data-bs-original-title)=")([^"<>]*)(")')
_UI_TEXT = re.compile(r"(>\s*)([^<>]*?[^<>\s])(\s*<)")


def translate_ui_strings(app: Sphinx, exception) -> None:
    strings = app.config.minitfm_ui_strings
    if exception is not None or not strings or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for path in outdir.rglob("*.html"):
        if path.relative_to(outdir).parts[0] in ("_static", "_sources", "_images", "_assets"):
            continue
        text = path.read_text(encoding="utf-8")
        new = _UI_ATTRIBUTE.sub(lambda m: m.group(1) + strings.get(m.group(2), m.group(2)) + m.group(3), text)
        new = _UI_TEXT.sub(lambda m: m.group(1) + strings.get(m.group(2), m.group(2)) + m.group(3), new)
        if new != text:
            path.write_text(new, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.add_config_value("minitfm_other_edition", None, "html")
    app.add_config_value("minitfm_ui_strings", {}, "html")
    app.add_config_value("minitfm_heading_ids", None, "env")
    app.connect("config-inited", add_templates)
    app.connect("html-page-context", language_switch)
    app.connect("doctree-read", english_section_ids, priority=400)  # before Sphinx's toc collector
    app.connect("build-finished", translate_ui_strings)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
