"""The executed chapters a book check reads, planted, for the publishing and check tests."""

from __future__ import annotations

import nbformat

from bookbuild.layout import Book


def executed(book: Book, stem: str, profile: object) -> None:
    book.chapters.mkdir(parents=True, exist_ok=True)
    completed = {"parameters": {"PROFILE": profile, "SEED": 0}, "exception": None, "end_time": "2026-01-02T00:00:00"}
    nb = nbformat.v4.new_notebook(metadata={"papermill": completed})  # as papermill records a completed run
    nbformat.write(nb, book.chapters / f"{stem}.ipynb")
