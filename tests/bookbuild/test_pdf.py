"""The whole book as one PDF (bookbuild.pdf): printed by headless Chromium, checked for pages and figures."""

from __future__ import annotations

import base64
import io

import matplotlib.pyplot as plt
import nbformat
import pytest

from bookbuild import pdf
from bookbuild.layout import Book, BookError
from support.reader import needs_chromium


def book_with(tmp_path, chapters: int, figures: int, body: str) -> Book:
    """A checkout with ``chapters`` chapter sources, the first executed with ``figures`` PNG outputs, and a
    single-page rendering whose body is ``body``."""
    book = Book(tmp_path)
    book.notebooks.mkdir(parents=True)
    book.chapters.mkdir(parents=True)
    for i in range(chapters):
        (book.notebooks / f"0{i + 1}_c.py").write_text("# %% [markdown]\n# # C\n")
    png = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "fig"})
    cell = nbformat.v4.new_code_cell("x", outputs=[png] * figures)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), book.chapters / "01_c.ipynb")
    (book.root / "_toc.yml").write_text("root: book/intro\n")
    page = book.root / "_build" / "singlehtml" / "book" / "intro.html"
    page.parent.mkdir(parents=True)
    page.write_text(f"<html><body>{body}</body></html>")
    return book


def figure_png() -> str:
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.slow
@needs_chromium
def test_the_book_is_printed_with_its_figures_and_checked_for_pages_and_figures(tmp_path):
    image = f'<img src="data:image/png;base64,{figure_png()}"/>'
    pages = "".join(f'<h1 style="page-break-before: always">Chapter {i}</h1>{image}' for i in range(3))
    book = book_with(tmp_path, chapters=3, figures=3, body=pages)
    path, shown = pdf.print_book(book)
    assert path == book.html / pdf.PDF and path.read_bytes().startswith(b"%PDF")
    assert pdf.pdf_pages(path) == 3 and shown == 3
    assert pdf.pdf_problems(book, path, shown) == []
    short = pdf.pdf_problems(book_with(tmp_path / "more", chapters=4, figures=4, body=""), path, shown)
    assert short == ["linrec-book.pdf: 3 page(s) for 4 chapters",
                     "linrec-book.pdf: the printed page shows 3 figure(s); the chapters have 4"]  # fmt: skip


@needs_chromium
def test_a_picture_that_did_not_load_stops_the_print(tmp_path):
    book = book_with(tmp_path, chapters=1, figures=1, body='<img src="_images/missing.png"/>')
    with pytest.raises(BookError, match="1 picture.s. did not load"):
        pdf.print_book(book)
    assert not (book.html / pdf.PDF).exists()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "_toc.yml").write_text("root: book/intro\n")
    with pytest.raises(BookError, match="singlehtml builder first"):
        pdf.print_book(Book(tmp_path / "empty"))
