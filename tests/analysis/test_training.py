"""Chapter 8's readings of the training summary: the reference table and the note on when the profile forms."""

from __future__ import annotations

import dataclasses

import pandas as pd

from linrec.analysis.training import REFERENCE, formation_note, reference_table
from linrec.experiment.profiles import get_profile

SUMMARY = pd.DataFrame({
    "model": ["a", "b"], "mean_first": [0.95, 0.1], "range_first": [0.01, 0.2], "first": ["init", "init"],
    "non_monotone_last": [True, False], "last": ["final", "final"], "range_last": [0.5, 0.25],
    "distance_first": [0.3, 0.4], "halfway_step": [100, None],
})  # fmt: skip


def test_the_reference_table_sets_the_issues_reference_beside_this_runs_profile():
    hub = dataclasses.replace(get_profile("smoke"), zoo=None)  # no zoo: families are not looked up
    table = reference_table(SUMMARY, hub)
    assert list(table.model) == ["a", "b"] and table.family.isna().all() and (table.activation == "?").all()
    assert (table["reference (issue, not the paper)"] == "—").all()
    assert list(table["this run (measured)"]) == [
        "0.950 ± range 0.010 at init; non-monotone at final (range 0.500)",
        "0.100 ± range 0.200 at init; monotone at final (range 0.250)",
    ]
    assert set(REFERENCE) == {"gpt2", "llama"}


def test_the_formation_note_leaves_out_models_that_never_come_within_half_the_distance():
    note = formation_note(SUMMARY, "smoke")
    assert note.startswith("**When the profile forms** (profile `smoke`; a description, not a verdict")
    assert "a's profile lies 0.300 (RMS) from its final one at init and first comes within half that distance" in note
    assert "b's" not in note and note.endswith(".")
