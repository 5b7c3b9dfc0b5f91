"""Link targets that both the book and Colab understand (loaded through ``sphinx.local_extensions``).

The notebooks' Markdown is plain CommonMark with a little HTML (``python tools/notebooks.py commonmark``),
so that Colab and Jupyter render it as the book does. Their links are plain Markdown links:

- ``[Symptom 2](#debug-nan)`` to an anchor ``<a id="debug-nan"></a>`` in the same notebook,
- ``[Chapter 10](../notebooks/10_debugging.ipynb#ch10-claim-clipping)`` to one in another page,
- ``[Vaswani et al. (2017)](../book/references.md#cite-vaswani2017attention)`` to a bibliography entry
  (``bibtex_cite_id: "cite-{key}"`` in _config.yml gives every entry that id),
- ``[attention](../book/glossary.md#term-attention)`` to a glossary term (Sphinx's own ids).

MyST checks such a link's fragment against the page's heading anchors only, and warns (``-W``: fails)
for any other id. This extension records the ids above as anchors of their page (raw HTML elements
with an ``id``, bibliography entries, glossary terms and MyST ``(label)=`` targets), so MyST resolves
them, and still reports a fragment that names no id at all.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.transforms import Transform
from sphinx.application import Sphinx

_HTML_ID = re.compile(r"""<[a-zA-Z][\w-]*\b[^>]*?\bid\s*=\s*["']([^"']+)["']""")


class RecordAnchors(Transform):
    """Add the page's HTML ids, glossary term ids and bibliography entry ids to MyST's anchors.

    Runs before MyST resolves ``[text](#id)`` links within the page (its ResolveAnchorIds, priority 879);
    links from other pages are resolved later, from ``env.metadata[docname]["myst_slugs"]``.
    """

    default_priority = 870

    def apply(self, **kwargs) -> None:
        env = getattr(self.document.settings, "env", None)
        if env is None:
            return
        docname = env.docname
        slugs = getattr(self.document, "myst_slugs", None)
        if slugs is None:
            slugs = self.document.myst_slugs = {}

        def add(anchor: str, line, text: str) -> None:
            slugs.setdefault(anchor, (line or 0, anchor, text))

        for name, explicit in self.document.nametypes.items():  # MyST (label)= targets
            labelid = self.document.nameids.get(name)
            if explicit and labelid:
                add(name, None, name) if name == labelid else slugs.setdefault(name, (0, labelid, name))
        for node in self.document.findall(nodes.raw):
            if "html" in node.get("format", "").split():
                for anchor in _HTML_ID.findall(node.astext()):
                    add(anchor, node.line, anchor)
        for node in self.document.findall(nodes.term):
            for anchor in node["ids"]:
                add(anchor, node.line, node.astext())
        domain = env.domains.get("cite")
        for key, bibliography in getattr(domain, "bibliographies", {}).items():
            if key.docname == docname:
                for cite_key, citation in bibliography.citation_nodes.items():
                    for anchor in citation["ids"]:
                        add(anchor, bibliography.line, cite_key)
        if slugs:
            env.metadata[docname]["myst_slugs"] = slugs


def setup(app: Sphinx) -> dict:
    app.add_transform(RecordAnchors)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
