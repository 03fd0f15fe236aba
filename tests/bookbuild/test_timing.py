"""bookbuild.timing: How long a chapter takes, stated at its top from the measurements in ``book/resources.json``."""

from __future__ import annotations

import nbformat
import pytest

from bookbuild import timing
from bookbuild.colab import raw_myst
from conftest import book_script

RESOURCES = {
    "builds": [
        {"profile": "offline", "machine": "2 CPU cores (x86_64)", "date": "2026-11-22", "zoo_s": 704.1,
         "measure_s": 1500.0, "chapters": {"02_x": 400.0, "03_y": 50.0}},
        {"profile": "offline", "machine": "2 CPU cores (x86_64)", "date": "2026-11-23", "zoo_s": None,
         "measure_s": 5.0, "chapters": {"02_x": 20.0}},
        {"profile": "offline", "machine": "2 CPU cores (x86_64)", "date": "2026-11-24", "zoo_s": 812.3,
         "measure_s": 1300.0, "chapters": {"02_x": 331.7}},
        {"profile": "offline", "machine": "2 CPU cores (x86_64)", "date": "2026-11-25", "zoo_s": None,
         "measure_s": 6.0, "chapters": {"02_x": 14.0}},
        {"profile": "smoke", "machine": "m", "date": "d", "zoo_s": None, "chapters": {"02_x": 1.0, "04_z": 1.0}},
    ],
    "gpu": {"02_x": "124 (H100)", "03_y": "unfinished (lease ended)"},
}  # fmt: skip


def test_the_run_time_note_states_the_last_first_build_and_the_last_cached_rebuild_on_one_machine():
    note = timing.run_time_note(RESOURCES, "02_x")
    assert note == (
        "**Run time.** On 2 CPU cores (x86_64), `offline` profile, two chapters at a time: 6 minutes in a first build "
        "of the book (2026-11-24), which before the chapters trains the model zoo (14 minutes) and captures the "
        "measurements and scores the perplexity passes the chapters share (22 minutes); 14 s in a rebuild that finds "
        "all of it cached (2026-11-25). "
        "On a GPU at the paper's model sizes (`shapes` profile, nothing downloaded): 2 minutes on one H100."
    )  # the last build of each kind (331.7 s, 14 s), not the earlier 400 s or 20 s; 124 s on the GPU
    assert note.count("CPU cores") == 1 and raw_myst(note) == []
    one = timing.run_time_note(RESOURCES, "03_y")  # in one cold build only: no rebuild to state
    assert "50 s in a first build of the book (2026-11-22)" in one and "rebuild" not in one
    assert "on a GPU at the paper's model sizes has not been measured" in one
    other = timing.run_time_note(RESOURCES, "04_z")  # measured only under another profile
    assert "time on a CPU (`offline` profile) has not been measured" in other
    elsewhere = {"builds": [*RESOURCES["builds"], {**RESOURCES["builds"][3], "machine": "16 CPU cores (x86_64)"}]}
    moved = timing.run_time_note(elsewhere, "02_x")  # the last machine's builds only: it has no first build
    assert (
        moved.startswith("**Run time.** On 16 CPU cores (x86_64)") and "first build" not in moved and "rebuild" in moved
    )


def test_a_page_whose_run_time_disagrees_with_the_build_s_own_is_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(timing.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(timing.platform, "machine", lambda: "x86_64")

    def executed(stem: str, note: str) -> None:
        cell = nbformat.v4.new_markdown_cell(f"# {stem}\n\n{note}\nText.")
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / f"{stem}.ipynb")

    def took(stem: str) -> list[str]:
        return [p for p in timing.stale_run_times(tmp_path, RESOURCES) if p.startswith(f"{stem}: this build took")]

    executed("02_x", timing.run_time_note(RESOURCES, "02_x"))  # states 6 minutes cold, 14 s cached
    executed("03_y", "**Run time.** On a CPU (`offline` profile): 5 minutes.")  # written before the last record
    timing.record_times(tmp_path, "offline", {"02_x": 330.0, "03_y": 50.0})  # a first build, as stated
    assert timing.stale_run_times(tmp_path, RESOURCES) == [
        "03_y: the page states another run time than book/resources.json: execute it again"
    ]
    timing.record_times(tmp_path, "offline", {"02_x": 15.0})  # a cached rebuild, as stated
    assert took("02_x") == []
    timing.record_times(tmp_path, "offline", {"02_x": 100.0})  # near neither: planted stale time
    (stale,) = took("02_x")
    assert stale.startswith(
        "02_x: this build took 100 s; the page states 6 minutes in a first build and 14 s in a cached rebuild"
    )
    assert "--record-build" in stale
    timing.record_times(tmp_path, "offline", {"02_x": 720.0})  # twice the first build's: also stale
    assert len(took("02_x")) == 1
    timing.record_times(tmp_path, "smoke", {"02_x": 1.0})  # another profile's times replace, and are not compared
    assert timing.load(tmp_path / timing.TIMINGS)["chapters"] == {"02_x": 1.0}
    assert took("02_x") == []
    monkeypatch.setattr(timing.os, "cpu_count", lambda: 16)  # another machine than the note names
    timing.record_times(tmp_path, "offline", {"02_x": 100.0})
    assert took("02_x") == []


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
    assert page[5].endswith(", warm | offline, " + trained["machine"] + ", " + trained["date"] + ", cold |")
    log.write_text("nothing\n")
    with pytest.raises(SystemExit, match="is it the log of a book build"):
        resources.build_record(log, "offline")
