"""The recorded run of chapter 12's walk: written with when, where and how it ran, read back to the last digit, and
refused where the file was changed or damaged."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from linrec.analysis.tasks import recorded_note, steps_table
from linrec.errors import LinrecError
from linrec.experiment import task_record
from linrec.experiment.task_record import check_recording, record_command, record_walk, recorded_walk


def study(model: str, walked: bool = True) -> dict[str, pd.DataFrame]:
    """One model's tables as task_study returns them, with numbers that do not round-trip through a short format."""
    walk = pd.DataFrame([{"model": model, "mechanism": m, "kind": k, "step": s, "blocks": ", ".join(map(str, range(s))),
                          "numbers_saved": 10 * s, "base_ppl": 20.0 + 1 / 3, "ppl": 20.0 + s / 7,
                          "delta_ppl": s / 7, "delta_ppl_low": s / 7 - 0.1, "delta_ppl_high": s / 7 + 0.1}
                         for m, k in (("affine", "swapped"), ("layer", "removed")) for s in (0, 1, 2)])  # fmt: skip
    changes = pd.DataFrame([{"model": model, "mechanism": "affine", "kind": "swapped", "step": s,
                             "task": "linrec_prose", "metric": "acc", "before": 0.6, "after": 0.6 - s / 30,
                             "change": -s / 30, "change_low": -s / 30 - 0.1, "change_high": -s / 30 + 0.1}
                            for s in (1, 2)])  # fmt: skip
    scores = pd.DataFrame([{"model": model, "task": "linrec_prose", "metric": "acc", "value": 0.6, "stderr": 0.04,
                            "low": 0.52, "high": 0.68, "n": 150}])  # fmt: skip
    run = pd.DataFrame([{"model": model, "items": 150, "humaneval_seconds": float("nan"), "walk": walked,
                         "tasks_seconds": 209.5}])  # fmt: skip
    return {"walk": walk, "changes": changes if walked else changes.iloc[:0], "scores": scores, "run": run}


def test_a_recorded_walk_reads_back_every_table_to_the_last_digit_with_its_run(tmp_path):
    studies = {"a": study("a"), "b": study("b")}
    path = record_walk(studies, "offline", record_command("offline"), tmp_path / "walk.json")
    back = recorded_walk(path)
    for name in task_record.TABLES:
        assert back.tables[name].equals(pd.concat([s[name] for s in studies.values()], ignore_index=True)), name
    assert back.profile == "offline" and back.command.endswith("--param TASK_WALK=true --param RECORD_WALK=true")
    assert back.machine == task_record.machine() and "CPU cores" in back.machine and "torch" in back.versions
    assert back.date in back.label() and back.machine in back.label() and "`offline` profile" in back.label()
    assert len(steps_table([back.tables["walk"]], [back.tables["changes"]])) == 8  # both models' steps, readable


def test_nothing_is_recorded_without_the_walk_and_a_missing_record_is_none(tmp_path):
    with pytest.raises(LinrecError, match="set TASK_WALK = True"):
        record_walk({"a": study("a", walked=False)}, "offline", "cmd", tmp_path / "walk.json")
    assert not (tmp_path / "walk.json").exists() and recorded_walk(tmp_path / "walk.json") is None
    with pytest.raises(LinrecError, match="set TASK_WALK = True"):
        check_recording(True, False)
    check_recording(True, True)
    check_recording(False, False)


def test_a_changed_or_damaged_record_is_refused(tmp_path):
    path = record_walk({"a": study("a")}, "offline", "cmd", tmp_path / "walk.json")
    text = path.read_text()
    stored = json.loads(text)
    stored["tables"]["changes"]["data"][0][8] = 0.99  # an "after" retouched
    path.write_text(json.dumps(stored))
    with pytest.raises(LinrecError, match="do not match its sha256"):
        recorded_walk(path)
    path.write_text(text[: len(text) // 2])
    with pytest.raises(LinrecError, match="is not a recorded walk"):
        recorded_walk(path)
    path.write_text(json.dumps({k: v for k, v in json.loads(text).items() if k != "machine"}))
    with pytest.raises(LinrecError, match="is not a recorded walk"):
        recorded_walk(path)


def test_the_packaged_record_where_there_is_one_is_intact_and_of_a_walk():
    recorded = recorded_walk()
    if recorded is None:
        assert not task_record.RECORD.exists()
        return
    assert len(recorded.tables["changes"]) and recorded.command.startswith("python book/build.py execute")
    assert (steps_table([recorded.tables["walk"]], [recorded.tables["changes"]]).reading != "").any()


def test_the_chapter_says_which_figures_to_read():
    assert recorded_note(None, True, "cmd").startswith("This build scored the tasks along the walk itself")
    assert recorded_note(None, False, "cmd").startswith("No run of the full walk is recorded yet")
    said = recorded_note("the run of 2026-12-03 on 2 CPU cores", False, "cmd")
    assert said.startswith("The figures below are those of the run of 2026-12-03") and "cmd" not in said
