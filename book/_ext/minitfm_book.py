"""Sphinx checks for the minitfm book (loaded through ``sphinx.local_extensions`` in _config.yml).

1. The book does not execute notebooks (they are committed executed and nbval checks them), so a
   notebook committed with an error output would otherwise render its traceback silently.  This
   extension emits a warning for every error output; ``jupyter-book build -W`` turns it into a
   failed build.
2. The site serves MathJax, RequireJS and the widgets' HTML manager itself (no CDN).  They are
   staged by ``tools/build_book.sh`` (into the folder ``html_extra_path`` names); if someone runs ``jupyter-book build`` directly without
   them, say so plainly instead of publishing pages whose math and widgets cannot load.
3. Accessibility (the axe-core audit in tests/book/test_site.py): docutils writes the bibliography as
   ``<div role="list" class="citation-list">`` whose children are not list items (axe
   aria-required-children) and each entry with the deprecated role ``doc-biblioentry`` (axe
   aria-deprecated-role).  Both roles are dropped from the page; the entries stay plain ``<div>``s.
"""

from __future__ import annotations

import json
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

# Files every page may load; staged by tools/build_book.sh into <confdir>/_build/site_assets/_assets/.
REQUIRED_ASSETS = (
    "mathjax/tex-mml-chtml.js",
    "widgets/widgets-setup.js",
    "widgets/require.js",
    "widgets/embed-amd.js",
)


def error_outputs(notebook: dict) -> list[str]:
    """Return one line per error output in a notebook: 'cell N: Ename: evalue'."""
    found = []
    for index, cell in enumerate(notebook.get("cells", [])):
        for output in cell.get("outputs", []) or []:
            if output.get("output_type") == "error":
                evalue = str(output.get("evalue", ""))[:200]
                found.append(f"cell {index}: {output.get('ename', 'Error')}: {evalue}")
    return found


def check_notebook_errors(app: Sphinx, docname: str, source: list[str]) -> None:
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    try:
        notebook = json.loads(source[0])
    except (ValueError, IndexError):
        return  # not JSON (e.g. jupytext); myst-nb reports its own parse errors
    for line in error_outputs(notebook):
        logger.warning(
            "notebook has an error output (%s); fix the notebook and re-run it top to bottom",
            line,
            location=docname,
            type="minitfm",
            subtype="notebook_error",
        )


def check_assets(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    # html_extra_path holds the staged folder (_build/site_assets; the Chinese edition's source tree,
    # written by tools/i18n.py, names the same folder relative to itself)
    roots = [Path(app.confdir, extra) / "_assets" for extra in app.config.html_extra_path] or \
        [Path(app.confdir) / "_build" / "site_assets" / "_assets"]
    root = next((r for r in roots if all((r / name).is_file() for name in REQUIRED_ASSETS)), roots[0])
    missing = [name for name in REQUIRED_ASSETS if not (root / name).is_file()]
    if missing:
        logger.warning(
            "vendored browser assets missing (%s under %s): build the book with "
            "`bash tools/build_book.sh`, which fetches them with npm ci",
            ", ".join(missing),
            root,
            type="minitfm",
            subtype="assets",
        )


INVALID_CITATION_ROLES = (
    ('<div role="list" class="citation-list">', '<div class="citation-list">'),
    (' role="doc-biblioentry"', ""),
)


def drop_invalid_citation_roles(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body")
    if body and "citation-list" in body:
        for old, new in INVALID_CITATION_ROLES:
            body = body.replace(old, new)
        context["body"] = body


def setup(app: Sphinx) -> dict:
    app.connect("source-read", check_notebook_errors)
    app.connect("builder-inited", check_assets)
    app.connect("html-page-context", drop_invalid_citation_roles)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
