"""The book as a course uses it: exercises on Colab (plain Markdown, solutions "Run all" skips, answer checks),
each chapter's run time from the measurements, the first-run zoo warning, and the appendix in a fresh runtime."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import jupytext
import nbformat
import pytest

from bookbuild import notebooks, timing
from bookbuild.colab import bibliography, colab_cells, raw_myst
from bookbuild.layout import Book, BookError
from conftest import book_script
from linrec.book import chapter, ledger
from linrec.book.exercises import check
from linrec.errors import LinrecError
from linrec.experiment.profiles import get_profile

ROOT = Path(__file__).resolve().parents[1]
REPO = Book(ROOT)


# ---------------------------------------------------------------------------------------------- answer checks


def test_check_says_right_wrong_or_how_to_answer(capsys):
    assert check(None, 0.667, tol=0.03) is None
    assert "set `answer = <your number>`" in capsys.readouterr().out
    assert check(0.65, 0.667, tol=0.03) is True
    assert "Right" in capsys.readouterr().out
    assert check(0.5, 0.667, tol=0.03, hint="split the square") is False
    out = capsys.readouterr().out
    assert "below" in out and "Hint: split the square" in out and "0.667" not in out  # no spoiler
    assert check(0.7, 0.667, tol=0.0) is False and "above" in capsys.readouterr().out


@pytest.mark.parametrize(
    "answer, expected, tol, message",
    [("0.6", 0.6, 0.1, "answer must be a finite number"), (float("nan"), 0.6, 0.1, "answer must be"),
     (True, 1.0, 0.1, "answer must be"), (0.6, float("inf"), 0.1, "expected must be"), (0.6, 0.6, -1, "tol must")],
)  # fmt: skip
def test_check_rejects_what_is_not_a_number(answer, expected, tol, message):
    with pytest.raises(LinrecError, match=message):
        check(answer, expected, tol)


# ---------------------------------------------------------------------------------------------- Colab notebooks

PLANTED = """# %% [markdown]
# # A chapter
#
# As {cite}`whipp2026linear` and {cite:t}`chan1979updating` say, {numref}`fig-b` is later. Value
# {glue:text}`rows:.1%`.

# %%
x = 1

# %% mystnb={"figure": {"caption": "A.", "name": "fig-a"}}
fig_a = 1

# %% mystnb={"figure": {"caption": "B.", "name": "fig-b"}}
fig_b = 1

# %% [markdown]
# {numref}`fig-a` and {numref}`fig-b` are above.
#
# :::{admonition} Note
# Careful.
# :::
#
# ## Exercises
#
# :::{exercise} Planted
# :label: ex-demo-planted
# What is $x$?
# :::

# %% tags=["remove-cell"]
answer = None

# %% [markdown]
# :::{solution-start} ex-demo-planted
# :class: dropdown
# :::
# It is one; see {numref}`fig-a`.

# %% tags=["solution"]
print("SOLUTION-CODE", x)

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Second
# :label: ex-demo-second
# Why? See {ref}`ex-demo-planted`.
# :::
#
# :::{solution} ex-demo-second
# :class: dropdown
# Because.
# :::
#
# ## Provenance

# %%
print("end")
"""


def planted_cells(text: str = PLANTED) -> list[nbformat.NotebookNode]:
    return colab_cells(jupytext.reads(text, fmt="py:percent").cells, bibliography(ROOT / "book/references.bib"), "x")


def test_colab_cells_write_plain_markdown_and_solutions_that_do_not_run():
    cells = planted_cells()
    markdown = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    code = [c.source for c in cells if c.cell_type == "code"]
    assert raw_myst(markdown) == []
    assert "As (Whipp, 2026) and Chan et al. (1979) say, the second figure below is later." in markdown
    assert "`rows` (printed above)" in markdown
    assert "The second figure above and the figure above are above." in markdown
    assert "**Note.** Careful." in markdown
    assert "### Exercise 1: Planted\n\nWhat is $x$?" in markdown
    assert "### Exercise 2: Second\n\nWhy? See exercise 1." in markdown
    assert code == ["x = 1", "fig_a = 1", "fig_b = 1", "answer = None", 'print("end")']  # the check cell runs
    solutions = [c for c in cells if c.metadata.get("solution")]
    assert [s.source.splitlines()[0] for s in solutions] == [
        "#### Solution to exercise 1",
        "#### Solution to exercise 2",
    ]
    assert 'It is one; see the second figure above.\n\n```python\nprint("SOLUTION-CODE", x)\n```' in solutions[0].source
    assert all(s.metadata["jp-MarkdownHeadingCollapsed"] for s in solutions)
    order = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown"]
    assert (
        order.index("### Exercise 1: Planted")
        < order.index("#### Solution to exercise 1")
        < order.index("### Exercise 2: Second")
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (PLANTED.replace("# :::{solution-end}\n# :::\n", ""), "without its solution-end"),
        (PLANTED.replace(":::{solution} ex-demo-second", ":::{solution} ex-demo-none"), "no exercise before it"),
        (PLANTED.replace("{cite}`whipp2026linear`", "{cite}`nobody2000`"), "nobody2000"),
        (PLANTED.replace("# %%\nx = 1", '# %% tags=["solution"]\nx = 1'), "outside solution-start"),
    ],
)
def test_colab_cells_name_a_broken_exercise(text, message):
    with pytest.raises(BookError, match=message):
        planted_cells(text)


def test_bibliography_labels_every_entry_by_author_and_year():
    labels = bibliography(ROOT / "book/references.bib")
    keys = re.findall(r"^@\w+\{([^,]+),", (ROOT / "book/references.bib").read_text(), re.MULTILINE)
    assert sorted(labels) == sorted(keys)
    assert labels["whipp2026linear"] == "Whipp, 2026" and labels["chan1979updating"] == "Chan et al., 1979"


def test_every_colab_notebook_is_plain_and_runs_no_solution():
    """What sync writes for each chapter: no raw MyST in Markdown, no solution code in a code cell, each exercise
    followed by its collapsed solution, and the solutions listed in Colab's collapsed sections."""
    for source in notebooks.sources(REPO):
        nb = notebooks.paired_notebook(REPO, source, colab=True)
        solution_code = [
            c.source
            for c in jupytext.read(source).cells
            if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])
        ]
        markdown = [c for c in nb.cells if c.cell_type == "markdown"]
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert raw_myst("\n".join(c.source for c in markdown)) == [], source.name
        assert all(s not in code for s in solution_code), f"{source.name}: solution code in a code cell"
        assert all(any(s in c.source for c in markdown) for s in solution_code), source.name
        exercises = [c for c in markdown if c.source.startswith("### Exercise ")]
        solutions = [c.id for c in markdown if c.metadata.get("solution")]
        assert len(solutions) == len(exercises) == len(re.findall(r"^# :::\{exercise\}", source.read_text(), re.M))
        assert nb.metadata["colab"]["collapsed_sections"] == solutions
        nbformat.validate(nb)


def test_exercise_labels_are_unique_and_every_solution_names_an_exercise():
    labels, solved = [], []
    for source in notebooks.sources(REPO):
        text = source.read_text()
        labels += re.findall(r"^# :label: (ex-[\w-]+)$", text, re.MULTILINE)
        solved += re.findall(r"^# :::\{solution(?:-start)?\} (\S+)$", text, re.MULTILINE)
    assert len(labels) == len(set(labels)) > 20
    assert sorted(solved) == sorted(labels)  # one solution per exercise


# ---------------------------------------------------------------------------------------------- run times

RESOURCES = {
    "builds": [
        {"profile": "offline", "machine": "2 CPU cores (x86_64)", "date": "2026-11-23", "zoo_s": 704.1,
         "chapters": {"02_x": 314.0, "03_y": 50.0}},
        {"profile": "offline", "machine": "2 CPU cores (x86_64)", "date": "2026-11-23", "zoo_s": 812.3,
         "measure_s": 1300.0, "chapters": {"02_x": 331.7}},
        {"profile": "smoke", "machine": "m", "date": "d", "zoo_s": None, "chapters": {"02_x": 1.0, "04_z": 1.0}},
    ],
    "gpu": {"02_x": "124 (H100)", "03_y": "unfinished (lease ended)"},
}  # fmt: skip


def test_the_run_time_note_states_the_measurements_and_where_they_were_taken():
    note = timing.run_time_note(RESOURCES, "02_x")
    assert note.startswith("**Run time.** On a CPU (`offline` profile): 5 to 6 minutes, in two full builds")
    assert "2 CPU cores (x86_64), 2026-11-23" in note and "12 to 14 minutes in those builds" in note
    assert "2 minutes on one H100" in note  # 124 s
    assert "two chapters at a time, after 22 minutes capturing the measurements the chapters share)" in note
    one = timing.run_time_note(RESOURCES, "03_y")
    assert "50 s, in one full build" in one and "on a GPU at the paper's model sizes has not been measured" in one
    other = timing.run_time_note(RESOURCES, "04_z")  # measured only under another profile
    assert "time on a CPU (`offline` profile) has not been measured" in other
    assert raw_myst(note) == []


def test_every_chapter_states_its_run_time_under_its_title():
    for source in notebooks.sources(REPO):
        title = notebooks.paired_notebook(REPO, source).cells[0].source
        assert title.split("\n\n")[1].startswith("**Run time.** On a CPU"), source.name


def test_a_page_whose_run_time_disagrees_with_the_build_s_own_is_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(timing.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(timing.platform, "machine", lambda: "x86_64")

    def executed(stem: str, note: str) -> None:
        cell = nbformat.v4.new_markdown_cell(f"# {stem}\n\n{note}\nText.")
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / f"{stem}.ipynb")

    executed("02_x", timing.run_time_note(RESOURCES, "02_x"))  # states 5 to 6 minutes
    executed("03_y", "**Run time.** On a CPU (`offline` profile): 5 minutes.")  # written before the last record
    timing.record_times(tmp_path, "offline", {"02_x": 330.0, "03_y": 50.0})
    assert timing.stale_run_times(tmp_path, RESOURCES) == [
        "03_y: the page states another run time than book/resources.json: execute it again"
    ]
    timing.record_times(tmp_path, "offline", {"02_x": 720.0})  # a cold build of 12 minutes: planted stale time
    (stale,) = [p for p in timing.stale_run_times(tmp_path, RESOURCES) if p.startswith("02_x")]
    assert (
        stale.startswith("02_x: this build took 12 minutes; the page states 5 to 6 minutes")
        and "--record-build" in stale
    )
    timing.record_times(tmp_path, "offline", {"02_x": 15.0})  # warm: far under the span, also not what it says
    assert any(p.startswith("02_x: this build took 15 s") for p in timing.stale_run_times(tmp_path, RESOURCES))
    timing.record_times(tmp_path, "smoke", {"02_x": 1.0})  # another profile's times replace, and are not compared
    assert timing.load(tmp_path / timing.TIMINGS)["chapters"] == {"02_x": 1.0}
    assert [p for p in timing.stale_run_times(tmp_path, RESOURCES) if "took" in p] == []
    monkeypatch.setattr(timing.os, "cpu_count", lambda: 16)  # another machine than the records name
    timing.record_times(tmp_path, "offline", {"02_x": 10.0})
    assert [p for p in timing.stale_run_times(tmp_path, RESOURCES) if "took" in p] == []


def test_a_build_log_becomes_a_record_of_chapter_times(tmp_path):
    log = tmp_path / "build.log"
    log.write_text(
        "[book] zoo 'offline' ready in 704.1 s\n[book] 01_method: done in 147.8 s\n"
        "1795445480 [book] 02_heterogeneity: done in 331.7 s\n[book] all took 1684.4 s\n"
    )
    resources = book_script("resources")
    record = resources.build_record(log, "offline")
    assert record["chapters"] == {"01_method": 147.8, "02_heterogeneity": 331.7}
    assert record["zoo_s"] is None  # ready, but the log shows no training: a cached zoo
    assert "| zoo, before the chapters | not trained |" in resources.build_lines([record])
    assert record["measure_s"] is None
    log.write_text(log.read_text() + "zoo-gpt2:  50%|#####     | 500/1000\n")
    assert resources.build_record(log, "offline")["zoo_s"] == 704.1  # an older log's bar of one model
    log.write_text(
        "training 4 zoo model(s): 123/4000 step after 00:30, zoo-gpt2 6%\n[book] zoo 'offline' ready in 704.1 s\n"
        "[book] measured smollm2-135m (final) on kjv-bible in 161.0 s\n[book] measurements ready in 1234.5 s\n"
        "[book] 01_method: done in 147.8 s\n[book] 02_heterogeneity: done in 331.7 s\n"
    )
    trained = resources.build_record(log, "offline")
    assert trained["zoo_s"] == 704.1 and trained["measure_s"] == 1234.5
    page = resources.build_lines([record, trained])  # the Resources page's table of whole builds
    assert "| 01_method | 148 | 148 |" in page and "| zoo, before the chapters | not trained | 704 |" in page
    assert "| shared measurements, before the chapters |  | 1234 |" in page
    log.write_text("nothing\n")
    with pytest.raises(SystemExit, match="is it the log of a book build"):
        resources.build_record(log, "offline")


# ---------------------------------------------------------------------------------------------- first-run zoo


def test_a_chapter_warns_before_training_a_missing_zoo(tmp_path, monkeypatch, capsys):
    from linrec.cache import build_entry
    from linrec.models.zoo import build as zoo_build
    from linrec.models.zoo import zoo_missing, zoo_model_path

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    # the cache keys need the corpora's hashes only: stand-ins spare building the corpora
    monkeypatch.setattr(
        zoo_build,
        "_corpora",
        lambda spec: {c: SimpleNamespace(sha256=c) for c in [*spec.train_corpora, *spec.eval_corpora]},
    )
    smoke = get_profile("smoke")
    names = smoke.zoo.names()
    assert zoo_missing(smoke.zoo) == names
    assert chapter.warn_if_zoo_missing(smoke)
    out = capsys.readouterr().out
    assert f"The model zoo 'smoke' is not in the cache ({tmp_path})" in out and f"trains {len(names)} model(s)" in out
    for name in names:  # every model's entry complete: nothing to train, nothing to warn about
        build_entry(zoo_model_path(smoke.zoo, name).parent, lambda tmp: (tmp / "zoo.json").write_text("{}"))
    assert zoo_missing(smoke.zoo) == [] and not chapter.warn_if_zoo_missing(smoke)
    assert capsys.readouterr().out == ""
    assert not chapter.warn_if_zoo_missing(get_profile("paper"))  # no zoo at all


# ---------------------------------------------------------------------------------------------- the appendix


def test_the_appendix_explains_an_empty_ledger_on_colab_and_off_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    assert ledger.ledger("paper").empty
    colab = ledger.empty_note("paper", colab=True)
    assert "fresh runtime" in colab and "read the appendix of the built book" in colab
    assert 'os.environ["LINREC_CACHE"]' in colab and raw_myst(colab) == []
    here = ledger.empty_note("offline", colab=False)
    assert str(tmp_path) in here and "make book PROFILE=offline" in here
