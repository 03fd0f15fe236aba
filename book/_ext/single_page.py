"""A Sphinx extension for the single-page build the PDF is printed from (``make book-pdf``).

Sphinx draws a node with the handlers registered for the builder's name, falling back to its format ("html") only
when no extension registered any for that name. sphinx-exercise registers some for ``singlehtml``, so every node
that other extensions (myst-nb's hidden cells, ...) register for ``html`` alone would have no handler there: this
gives ``singlehtml`` the ``html`` handlers it lacks.
"""

from __future__ import annotations

from sphinx.application import Sphinx


def _html_handlers(app: Sphinx) -> None:
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for node, visitors in handlers.get("html", {}).items():
        single.setdefault(node, visitors)


def setup(app: Sphinx) -> dict[str, bool]:
    app.connect("builder-inited", _html_handlers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
