"""bookbuild.check: What a built book must satisfy: notebooks in sync, every chapter in the TOC, executed to the end
without errors, its figures legible (:mod:`linrec.plots.legibility`, recorded as each was shown), its stated run time
that of the measurements (:func:`bookbuild.timing.stale_run_times`), rendered with a figure, its Colab link, the footer
naming the build, and every figure-data link resolving."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import nbformat
import pytest

from bookbuild import check, notebooks, publish
from bookbuild.layout import Book
from conftest import book_script
from linrec.notebook import figures
from support.book import SOURCE
from support.publish import executed


def _tampered(path: Path, tmp_path: Path, change) -> Path:
    nb = nbformat.read(path, as_version=4)
    change(nb)
    out = tmp_path / f"tampered-{len(list(tmp_path.glob('tampered-*')))}.ipynb"
    nbformat.write(nb, out)
    return out


@pytest.fixture
def completed(tmp_path) -> Path:
    """A chapter as papermill records a completed run (a real one passes the check in the test above)."""
    done = {"status": "completed", "exception": False}
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A chapter", metadata={"papermill": done}),
            nbformat.v4.new_code_cell("x = 1", execution_count=1, metadata={"papermill": done}),
            nbformat.v4.new_code_cell("", metadata={"papermill": done}),  # nothing to run: no count needed
            nbformat.v4.new_code_cell("print(x)", execution_count=2, metadata={"papermill": dict(done)}),
        ],
        metadata={"papermill": {"exception": None, "end_time": "2026-11-23T17:33:51+00:00"}},
    )
    path = tmp_path / "01_done.ipynb"
    nbformat.write(nb, path)
    return path


def test_error_outputs_are_found(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "1", outputs=[nbformat.v4.new_output("stream", name="stdout", text="fine: no Error here\n")]
            ),
            nbformat.v4.new_code_cell(
                "2",
                outputs=[nbformat.v4.new_output("stream", name="stderr", text="Traceback (most recent call last):\n")],
            ),
            nbformat.v4.new_code_cell(
                "3", outputs=[nbformat.v4.new_output("error", ename="ValueError", evalue="x", traceback=[])]
            ),
        ]
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    problems = check._output_problems(path)
    assert [p.split(": cell ")[1][0] for p in problems] == ["1", "2"]


def test_a_chapter_papermill_did_not_complete_fails_the_check(completed, tmp_path):
    assert check._execution_problems(completed) == []
    last_code = lambda nb: [c for c in nb.cells if c.cell_type == "code"][-1]  # noqa: E731
    cases = {
        "failed or was interrupted": lambda nb: nb.metadata.papermill.update(exception=True),
        "failed or was interrupted ": lambda nb: nb.metadata.papermill.update(end_time=None),
        "never ran to the end": lambda nb: last_code(nb).update(execution_count=None),
        "never ran to the end ": lambda nb: last_code(nb).metadata.papermill.update(status="running"),
        "not executed by papermill": lambda nb: nb.metadata.pop("papermill"),
    }
    for message, change in cases.items():
        (problem,) = check._execution_problems(_tampered(completed, tmp_path, change))
        assert message.strip() in problem, problem


def test_html_refuses_a_half_executed_chapter(completed, tmp_path, monkeypatch, capsys):
    build = book_script("build")
    demo = Book(tmp_path)
    demo.notebooks.mkdir()
    (demo.notebooks / "01_demo.py").write_text(SOURCE)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: book/chapters/01_demo\n")
    demo.chapters.mkdir(parents=True)
    _tampered(completed, tmp_path, lambda nb: nb.metadata.papermill.update(end_time=None)).rename(
        demo.chapters / "01_demo.ipynb"
    )
    monkeypatch.setattr(build, "BOOK", demo)
    monkeypatch.setattr(build, "html", lambda book: (_ for _ in ()).throw(AssertionError("rendered")))
    assert build.main(["html"]) == 1
    assert "01_demo.ipynb: papermill did not complete it" in capsys.readouterr().err


def test_book_check_wants_the_footer_and_every_figure_data_link_to_resolve(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "release_version", lambda book: "1.0.0")
    book = Book(tmp_path)
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/o/n\n")
    (tmp_path / "_toc.yml").write_text("root: intro\nchapters:\n  - file: book/chapters/01_demo\n")
    book.notebooks.mkdir()
    (book.notebooks / "01_demo.py").write_text('# %% [markdown]\n# # Demo\n\n# %% tags=["parameters"]\nPROFILE = 1\n')
    notebooks.sync(book)
    executed(book, "01_demo", "smoke")
    page = book.page("01_demo")
    page.parent.mkdir(parents=True)
    link = f"{figures.FIGURE_DATA}/01_demo/fig-a.csv"
    body = f'<img src="data:image/png;base64,AA"/><a href="{notebooks.colab_link(book, "01_demo")}">Colab</a>'
    page.write_text(f'{body}<a href="{link}" download>fig-a.csv</a>')
    problems = check.check(book)
    assert problems == [
        f"_build/html/book/chapters/01_demo.html: links {link}, which the build did not copy",
        "_build/html/book/chapters/01_demo.html: no footer naming the build (profile, commit, date)",
    ]
    (page.parent / link).parent.mkdir(parents=True)
    (page.parent / link).write_text("a\n1\n")
    page.write_text(page.read_text() + publish.footer(["smoke"], "abc1234", dt.date(2026, 1, 2), "1.0.0"))
    assert check.check(book) == []
