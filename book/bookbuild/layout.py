"""Where a book's files are, and the one error every build step raises.

The build works on a checkout of this repository: chapter sources in ``notebooks/``, executed chapters in
``book/chapters/``, the rendered site in ``_build/html``. A :class:`Book` names them from the checkout's root,
so a test can build a book in a temporary directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class BookError(Exception):
    """A failed build step, with a message naming the notebook or page at fault."""


@dataclass(frozen=True)
class Book:
    """A checkout's book: its root and the folders the build reads and writes."""

    root: Path

    @property
    def notebooks(self) -> Path:
        """The chapter sources ``NN_topic.py`` and their committed Colab notebooks ``NN_topic.ipynb``."""
        return self.root / "notebooks"

    @property
    def chapters(self) -> Path:
        """The executed chapters the site is rendered from."""
        return self.root / "book" / "chapters"

    @property
    def html(self) -> Path:
        """The rendered site."""
        return self.root / "_build" / "html"

    @property
    def claims(self) -> Path:
        """The intro's claims table, generated from the ledger of the profile last executed (never hand-typed)."""
        return self.root / "book" / "_generated" / "claims.md"

    def page(self, stem: str) -> Path:
        """The rendered page of chapter ``stem``."""
        return self.html / "book" / "chapters" / f"{stem}.html"
