"""What a built book must satisfy: notebooks in sync, every chapter in the TOC, executed to the end without
errors, its figures legible (:mod:`linrec.plots.legibility`, recorded as each was shown), its stated run time
that of the measurements (:func:`bookbuild.timing.stale_run_times`), rendered with a figure, its Colab link, the
footer naming the build, and every figure-data link resolving."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import yaml

from bookbuild import timing
from bookbuild.layout import Book
from bookbuild.notebooks import RESOURCES, colab_link, sources, sync_problems
from linrec.notebook.figures import FIGURE_DATA, ILLEGIBLE


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img" and (src := a.get("src")):
            self.images.append(src)
        if tag == "a" and (href := a.get("href")):
            self.links.append(href)


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception): ", re.MULTILINE)


def _output_problems(executed: Path) -> list[str]:
    problems = []
    nb = nbformat.read(executed, as_version=4)
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") or "".join(
                str(v) for k, v in output.get("data", {}).items() if k.startswith("text/")
            )
            if output.output_type == "error" or _TRACEBACK.search(text):
                problems.append(f"{executed.name}: cell {i} has an error or traceback in its output")
            illegible = output.get("metadata", {}).get(ILLEGIBLE, [])
            problems += [
                f"{executed.name}: cell {i}: figure {output['data'].get('text/plain')}: {p}" for p in illegible
            ]
    return problems


def _execution_problems(executed: Path) -> list[str]:
    """Why papermill's ``executed`` notebook is not a fully executed chapter: no papermill record, an exception
    or no end time recorded (it failed, or was stopped), or a code cell with code that never ran."""
    nb = nbformat.read(executed, as_version=4)
    record = nb.metadata.get("papermill")
    if not record:
        return [f"{executed.name}: not executed by papermill (run `python book/build.py execute`)"]
    if record.get("exception") or not record.get("end_time"):
        return [f"{executed.name}: papermill did not complete it (it failed or was interrupted); execute it again"]
    unrun = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and cell.source.strip()
        and (cell.get("execution_count") is None or cell.metadata.get("papermill", {}).get("status") != "completed")
    ]
    return [f"{executed.name}: code cells {unrun} never ran to the end; execute it again"] if unrun else []


def execution_problems(book: Book, chapters: Sequence[str] = ()) -> list[str]:
    """Chapters (every one, or ``chapters``) that are missing from ``book.chapters`` or not fully executed
    (:func:`_execution_problems`): what ``html`` refuses to render and ``check`` fails on."""
    problems = []
    for stem in chapters or [s.stem for s in sources(book)]:
        executed = book.chapters / f"{stem}.ipynb"
        problems += _execution_problems(executed) if executed.exists() else [f"{stem}: not executed (run `make book`)"]
    return problems


def _toc_files(node: object) -> list[str]:
    if isinstance(node, dict):
        return ([node["file"]] if "file" in node else []) + [f for v in node.values() for f in _toc_files(v)]
    if isinstance(node, list):
        return [f for v in node for f in _toc_files(v)]
    return []


def _toc_chapters(book: Book) -> list[str]:
    files = _toc_files(yaml.safe_load((book.root / "_toc.yml").read_text()))
    return [f.removeprefix("book/chapters/") for f in files if f.startswith("book/chapters/")]


def toc_problems(book: Book) -> list[str]:
    """Chapters missing from _toc.yml, and _toc.yml entries without a chapter source."""
    stems, listed = [s.stem for s in sources(book)], _toc_chapters(book)
    return [
        f"notebooks/{s}.py is not listed in _toc.yml (add '- file: book/chapters/{s}')"
        for s in stems
        if s not in listed
    ] + [f"_toc.yml lists book/chapters/{s} but there is no notebooks/{s}.py" for s in listed if s not in stems]


def check(book: Book) -> list[str]:
    """Everything wrong with the built book: stale notebooks, TOC gaps, chapters not fully executed, errors,
    missing figures, Colab links or footers, and figure-data links to no file."""
    problems = sync_problems(book) + toc_problems(book) + execution_problems(book)
    problems += timing.stale_run_times(book.chapters, timing.load(book.root / RESOURCES))
    stems = [s.stem for s in sources(book)]
    for stem in stems:
        executed, page = book.chapters / f"{stem}.ipynb", book.page(stem)
        if not executed.exists():
            continue  # reported by execution_problems
        if not page.exists():
            problems.append(f"{stem}: not rendered (run `make book`)")
            continue
        problems += _output_problems(executed)
        text = page.read_text()
        parsed = _Page()
        parsed.feed(text)
        figures = [s for s in parsed.images if "_images/" in s or s.startswith("data:image")]
        if not figures:
            problems.append(f"{page.relative_to(book.root)}: no figure")
        if "Traceback (most recent call last)" in text or 'class="output traceback' in text:
            problems.append(f"{page.relative_to(book.root)}: shows a traceback")
        if colab_link(book, stem) not in parsed.links:
            problems.append(f"{page.relative_to(book.root)}: no link to {colab_link(book, stem)}")
        for href in parsed.links:
            if href.startswith(f"{FIGURE_DATA}/") and not (page.parent / href).exists():
                problems.append(f"{page.relative_to(book.root)}: links {href}, which the build did not copy")
        if 'class="linrec-built"' not in text:
            problems.append(f"{page.relative_to(book.root)}: no footer naming the build (profile, commit, date)")
        if not (book.notebooks / f"{stem}.ipynb").exists():
            problems.append(f"notebooks/{stem}.ipynb, the Colab target, does not exist (run `make notebooks`)")
    return problems
