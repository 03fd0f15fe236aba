"""linrec.analysis.depth: Chapters 2 and 8: depth curves of R²_lin across models and checkpoints, compared."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest

from linrec.analysis.depth import (
    curve_distance,
    depth_summary,
    depth_table,
    drift_table,
    heterogeneity_claims,
    swap_range,
    training_checkpoints,
    training_claims,
    training_losses,
    training_summary,
)
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import get_profile
from linrec.report.claims import claims_table
from support import tiny_captures
from support.tiny_captures import planted

FOLDS = 4


@pytest.fixture(scope="module")
def two_models(tokenizer, text):
    return tiny_captures.two_models(tokenizer, text, FOLDS)


def test_depth_summary_finds_range_jump_and_shape():
    table = planted({("up-down", "final"): [0.99, 0.2, 0.95, 0.5], ("rising", "final"): [0.5, 0.6, 0.7, 0.8]})
    s = depth_summary(table).set_index("model")
    assert s.loc["up-down", "r2_range"] == pytest.approx(0.79)
    assert s.loc["up-down", "max_jump"] == pytest.approx(0.79) and s.loc["up-down", "jump"] == "0→1"
    assert s.loc["up-down", "jump_sigma"] == pytest.approx(0.79 / math.sqrt(2e-6))
    assert (s.loc["up-down", "rises"], s.loc["up-down", "falls"]) == (1, 2)
    assert s.loc["up-down", "non_monotone"] and not s.loc["rising", "non_monotone"]
    assert (s.loc["rising", "block_min"], s.loc["rising", "block_max"]) == (0, 3)
    noisy = depth_summary(planted({("up-down", "final"): [0.99, 0.2, 0.95, 0.5]}, std=0.5)).iloc[0]
    assert (noisy["rises"], noisy["falls"], noisy["non_monotone"]) == (0, 0, False)  # steps within the noise
    with pytest.raises(LinrecError, match="more than once"):
        depth_summary(pd.concat([table, table]))


def test_heterogeneity_claims_judge_each_part():
    paper_like = claims_table(heterogeneity_claims(planted({("m", "final"): [0.995, 0.25, 0.9, 0.6]}))).set_index(
        "claim"
    )
    assert (paper_like["reproduced"] == "yes").all()
    flat = claims_table(heterogeneity_claims(planted({("m", "final"): [0.98, 0.97, 0.96]}))).set_index("claim")[
        "reproduced"
    ]
    assert flat.tolist() == ["no", "no", "no", "no"]
    apart = claims_table(heterogeneity_claims(planted({("m", "final"): [0.995, 0.6, 0.25]}))).set_index("claim")[
        "reproduced"
    ]
    assert apart.tolist() == ["yes", "yes", "no", "no"]  # both extremes, but not adjacent; monotone


def test_curve_distance_is_the_rms_difference():
    a = planted({("a", "final"): [0.9, 0.8, 0.7]})
    b = planted({("b", "final"): [0.9, 0.5, 0.3]})
    assert curve_distance(a, b) == pytest.approx(math.sqrt((0.3**2 + 0.4**2) / 3))
    assert curve_distance(a, a) == 0
    with pytest.raises(LinrecError, match="same depth"):
        curve_distance(a, planted({("c", "final"): [0.9, 0.8]}))


def test_drift_and_training_summary():
    table = planted(
        {
            ("m", "init"): [0.1, 0.1],
            ("m", "step10"): [0.3, 0.5],
            ("m", "step20"): [0.5, 0.8],
            ("m", "final"): [0.6, 0.9],
        }
    )
    table["step"] = table["checkpoint"].map({"init": 0, "step10": 10, "step20": 20, "final": 30})
    drift = drift_table(table).set_index("checkpoint")
    assert drift.loc["final", "distance_to_final"] == 0
    start = math.sqrt((0.5**2 + 0.8**2) / 2)
    assert drift.loc["init", "distance_to_final"] == pytest.approx(start)
    s = training_summary(table).iloc[0]
    assert (s["first"], s["last"], s["halfway_step"]) == ("init", "final", 20)  # step10 is 0.32 away, > start / 2
    assert s["mean_first"] == pytest.approx(0.1) and s["range_last"] == pytest.approx(0.3)
    with pytest.raises(LinrecError, match="no 'final'"):
        drift_table(table[table["checkpoint"] != "final"])


def test_training_claims_and_swap_range_report_numbers_without_verdicts():
    table = planted({("m", "init"): [0.1, 0.3], ("m", "final"): [0.6, 0.9]})
    table["step"] = table["checkpoint"].map({"init": 0, "final": 30})
    first, last = training_claims(training_summary(table))
    assert (first.claim, first.value, first.verdict) == ("mean R²_lin at init (m)", pytest.approx(0.2), None)
    assert last.value == pytest.approx(0.75) and "range 0.300" in last.note
    swaps = pd.DataFrame({"model": ["a", "a", "b"], "delta_ppl": [0.5, -0.1, 2.0]})
    claim = swap_range(swaps)
    assert claim.measured == "-0.100 to +2.000" and claim.verdict is None and "b: +2.000 to +2.000" in claim.note


def test_heterogeneity_claims_carry_their_numbers():
    claims = heterogeneity_claims(planted({("m", "final"): [0.995, 0.25, 0.9, 0.6]}))
    tested = [c for c in claims if c.tested]
    assert [c.value for c in tested[:3]] == [pytest.approx(0.995), pytest.approx(0.25), pytest.approx(0.745)]
    (numbers,) = [c for c in claims if c.claim == "R²_lin range across blocks"]
    assert numbers.measured == "0.250 to 0.995" and numbers.reported.startswith("from > 0.99")


def test_checkpoints():
    entry = get_profile("smoke").zoo.entry("zoo-neox")
    points = training_checkpoints(get_profile("smoke"), "zoo-neox")
    assert [s for _, s in points] == list(entry.checkpoints)
    assert points[0][0] == "init" and points[-1][0] == "final" and points[1][0] == f"step{entry.checkpoints[1]}"
    pythia = training_checkpoints(get_profile("paper"), "EleutherAI/pythia-160m")
    assert pythia[0] == ("init", 0) and pythia[-1] == ("final", 143000)  # step143000 is main: the reference
    pinned = get_profile("paper", revisions={"EleutherAI/pythia-160m": "step64000"})
    assert training_checkpoints(pinned, "EleutherAI/pythia-160m")[-1] == ("step143000", 143000)
    assert training_checkpoints(get_profile("paper"), "openai-community/gpt2") == [("final", None)]
    assert training_losses(get_profile("paper"), "EleutherAI/pythia-160m").empty


def test_depth_table_adds_steps(two_models):
    _, captured = two_models
    m = captured["gelu"]
    renamed = [
        ProfileMeasurement.assembled(replace(m.info, model="zoo-gpt2", checkpoint=c), m.moments, m.samples)
        for c in ("init", "final")
    ]
    table = depth_table(renamed, get_profile("smoke"))
    steps = dict(zip(table["checkpoint"], table["step"]))
    assert steps == {"init": 0, "final": get_profile("smoke").zoo.entry("zoo-gpt2").steps}
    assert len(table) == 4 and "step" not in depth_table(renamed).columns
    with pytest.raises(LinrecError, match="no measurements"):
        depth_table([])
