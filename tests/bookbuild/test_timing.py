"""bookbuild.timing: How long a chapter takes, stated at its top from the measurements in ``book/resources.json``."""

from __future__ import annotations

import nbformat
import pytest

from bookbuild import timing
from bookbuild.colab import raw_myst
from conftest import book_script

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
    assert page[4].endswith(", warm | offline, " + trained["machine"] + ", " + trained["date"] + ", cold |")
    log.write_text("nothing\n")
    with pytest.raises(SystemExit, match="is it the log of a book build"):
        resources.build_record(log, "offline")
