"""Render executed chapters into the site with Jupyter Book.

:func:`html` runs ``jupyter-book build`` with warnings as errors, after copying a local MathJax where
``_config.yml`` expects it (formulas render without a network), with a footer naming the build and the pages
:mod:`bookbuild.publish` generates. The pages are then read as a reader would by :mod:`bookbuild.reader`.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bookbuild.layout import Book, BookError
from bookbuild.notebooks import release_version
from bookbuild.publish import build_commit, built_profiles, cite_page, footer, partial_toc, render_config, today
from linrec.notebook.figures import FIGURE_DATA


def vendor_mathjax(book: Book) -> None:
    """Copy a local MathJax (from the jupyter-server-mathjax wheel) where _config.yml's mathjax_path
    expects it, so formulas render without a network: offline readers and classrooms included."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")  # locates the files; does not import it
    if spec is None or not spec.submodule_search_locations:
        raise BookError("jupyter-server-mathjax is missing: run `make install` (it is in requirements.txt)")
    target = book.root / "_build" / "static" / "mathjax"
    if not (target / "MathJax.js").exists():
        shutil.copytree(Path(spec.submodule_search_locations[0]) / "static", target, dirs_exist_ok=True)


def html(book: Book, chapters: Sequence[str] = (), builder: str = "html") -> None:
    """Render the executed chapters with Jupyter Book, any Sphinx warning failing the build: every page's footer
    names the build (profile, commit, date), the cite page is written from CITATION.cff, and the figures' CSV
    files are copied beside the pages that link them. Without a claims table (no chapter executed in this
    checkout) the intro says so instead of failing on a missing include. ``chapters``: render only these chapters
    (a profile that runs a few, e.g. ``scale``) with the front and back matter; links to the others are plain
    text. ``builder``: Sphinx's, ``singlehtml`` for the whole book on one page (:mod:`bookbuild.pdf`)."""
    vendor_mathjax(book)
    cite_page(book)
    if not book.claims.exists():
        book.claims.parent.mkdir(parents=True, exist_ok=True)
        book.claims.write_text("No chapter has been executed in this checkout: run `make book` to fill this table.\n")
    line = footer(built_profiles(book), build_commit(book), today(), release_version(book))
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe), "build", str(book.root), "--all", "-W", "-n", "--keep-going", "--builder", builder]
    cmd += ["--config", str(render_config(book, line, partial=bool(chapters)))]
    if chapters:
        cmd += ["--toc", str(partial_toc(book, chapters))]
    if subprocess.run(cmd, cwd=book.root).returncode != 0:
        raise BookError("jupyter-book build failed (warnings are errors); see the messages above")
    data = book.chapters / FIGURE_DATA
    if data.is_dir() and builder == "html":
        shutil.copytree(data, book.html / book.chapters.relative_to(book.root) / FIGURE_DATA, dirs_exist_ok=True)
