"""The whole executed book as one PDF, for a course: Jupyter Book's single-page HTML printed by headless Chromium.

Chromium is already what ``make book-check`` reads the pages with, so nothing more installs (Jupyter Book's LaTeX
builder needs a TeX Live of several hundred MB, its ``pdfhtml`` builder downloads a Chromium of its own). The
page is printed once settled (MathJax done, :mod:`bookbuild.browser`) and only with every figure loaded; the
PDF goes beside the site (:data:`PDF`), where the intro links it, and :func:`pdf_problems` checks it: pages, and
as many pictures as the chapters have figures.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import yaml

from bookbuild.browser import Browser
from bookbuild.layout import Book, BookError
from bookbuild.notebooks import sources

PDF = "linrec-book.pdf"
"""The PDF's name in the rendered site (``_build/html``): the intro links it there."""

MISSING_IMAGES = "[...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src.slice(0, 80))"

FIGURES = """document.querySelectorAll('img[src^="data:image"], img[src*="_images/"]').length"""


def figures_executed(book: Book) -> int:
    """How many figures the executed chapters show (a PNG output each)."""
    count = 0
    for source in sources(book):
        executed = book.chapters / f"{source.stem}.ipynb"
        if executed.exists():
            nb = nbformat.read(executed, as_version=4)
            outputs = [o for c in nb.cells for o in c.get("outputs", [])]
            count += sum("image/png" in o.get("data", {}) for o in outputs)
    return count


def pdf_pages(path: Path) -> int:
    """The number of pages of the PDF at ``path`` (its page objects, which Chromium writes uncompressed)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", path.read_bytes()))


def print_book(book: Book) -> tuple[Path, int]:
    """Print the single-page book (``_build/singlehtml``: the table of contents' root page, whose links Sphinx
    writes relative to the build's top folder, so it is read from a copy there) to :data:`PDF` in the site; the
    path and how many figures the page showed. Refuses a page with a picture that did not load."""
    root = yaml.safe_load((book.root / "_toc.yml").read_text())["root"]  # the one page holds the whole book
    written = book.root / "_build" / "singlehtml" / f"{root}.html"
    if not written.exists():
        raise BookError(f"{written} does not exist: render the book with the singlehtml builder first")
    page = written.parents[len(Path(root).parts) - 1] / "whole-book.html"  # its links are relative to the top
    shutil.copyfile(written, page)
    out = book.html / PDF
    with Browser(timeout=600) as browser:
        tab = browser.open(page)
        if missing := tab.evaluate(MISSING_IMAGES):
            raise BookError(f"{len(missing)} picture(s) did not load in {page}: {missing[:3]}")
        shown = int(tab.evaluate(FIGURES))
        tab.pdf(out)
    return out, shown


def pdf_problems(book: Book, path: Path, shown: int) -> list[str]:
    """What is wrong with the printed book: no PDF, fewer pages than chapters, or fewer pictures on its page than
    the executed chapters have figures."""
    if not path.exists():
        return [f"{path} was not written"]
    problems = []
    chapters = len(sources(book))
    if (pages := pdf_pages(path)) < chapters:
        problems.append(f"{path.name}: {pages} page(s) for {chapters} chapters")
    if shown < (expected := figures_executed(book)):
        problems.append(f"{path.name}: the printed page shows {shown} figure(s); the chapters have {expected}")
    return problems
