"""linrec.analysis.pitfall: Chapter 6 (the pitfall): trained linear baselines on the best- and worst-conditioned
blocks of a profile's models."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
import torch

from linrec.analysis import pitfall
from linrec.analysis.pitfall import (
    ARMS,
    centred_rows,
    closed_form_time,
    pitfall_runs,
    reach_table,
    representative_blocks,
    tuning_table,
)
from linrec.analysis.pitfall_claims import pitfall_claims
from linrec.analysis.pitfall_controls import planted_rows
from linrec.core.sample import Rows
from linrec.errors import LinrecError
from linrec.experiment.budgets import ProbeSettings
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import baseline_config
from linrec.interventions.baseline import BaselineConfig, baseline_runs, summary
from linrec.models.loading import pick_device
from linrec.report.claims import claims_table
from support.pitfall import fake_measurement


def test_representative_blocks_are_the_extremes(measured):
    table = pd.concat([m.table() for m in measured.values()], ignore_index=True)
    chosen = representative_blocks(table)
    assert list(zip(chosen.model, chosen.block, chosen.role)) == [
        ("a", 0, "best-conditioned"),
        ("a", 1, "worst-conditioned"),
        ("b", 0, "worst-conditioned"),
    ]
    a = table[table.model == "a"].set_index("block").input_condition
    assert chosen.input_condition[1] == a.max() == pytest.approx(1e4, rel=0.3)  # two decades of scale: κ ≈ 10⁴
    with pytest.raises(LinrecError, match="input_condition"):
        representative_blocks(table.drop(columns="input_condition"))


@pytest.mark.slow
def test_pitfall_runs_join_the_conditioning_and_whitening_helps(measured):
    table = pd.concat([m.table() for m in measured.values()], ignore_index=True)
    chosen = representative_blocks(table)
    config = BaselineConfig(steps=300, log_every=50, lr_factors=(1.0, 10.0))
    runs, curves = pitfall_runs(measured, chosen, config, optimizers=("sgd",), progress=False)
    assert len(runs) == 3 * 4 * 2 and set(runs.columns) >= {
        "model",
        "block",
        "role",
        "input_condition",
        "inputs",
        "lr",
        "tuned",
        "gap_final",
        "status",
    }
    assert runs.groupby(["model", "block", "inputs"]).tuned.sum().eq(1).all()
    direct = summary(baseline_runs(measured["a"].samples, [0, 1], ("sgd",), config=config, progress=False))
    a = runs[(runs.model == "a") & (runs.inputs != "centred")]
    assert a.gap_final.tolist() == pytest.approx(direct.gap_final.tolist(), abs=1e-12)
    centred = {1: centred_rows(measured["a"].samples[1], 0, config)}
    direct = summary(baseline_runs(centred, [1], ("sgd",), ["raw"], config=config, progress=False))
    a = runs[(runs.model == "a") & (runs.block == 1) & (runs.inputs == "centred")]
    assert a.gap_final.tolist() == pytest.approx(direct.gap_final.tolist(), abs=1e-12)
    assert list(curves[(curves.model == "a") & (curves.block == 1)].step.unique()) == [0, 50, 100, 150, 200, 250, 300]
    best = runs[runs.tuned & (runs.role == "worst-conditioned")].set_index(["model", "inputs"])
    assert best.loc[("a", "raw"), "gap_final"] > 0.05 > best.loc[("a", "whitened"), "gap_final"]
    # the planted true case, at the chapter's step budget: rotated conditioning (κ 1 against κ 10⁴, model a)
    verdicts = claims_table(pitfall_claims(runs[runs.model == "a"], 0.01)).set_index("claim").reproduced
    assert verdicts.to_dict() == {
        "raw baselines fall short (sgd)": "yes",
        "the conditioning causes the gap (sgd)": "yes",
        "whitening closes the gap (sgd)": "yes",
        "standardising does not close it (sgd)": "yes",
    }
    # a single well-conditioned block (κ 10, model b): no shortfall, nothing to compare, no gap to close
    verdicts = claims_table(pitfall_claims(runs[runs.model == "b"], 0.01)).set_index("claim").reproduced
    assert list(verdicts) == ["no", "untestable", "untestable", "untestable"]
    reach = reach_table(runs)
    assert list(reach.columns) == [
        "model",
        "block",
        "role",
        "input_condition",
        "sgd, raw",
        "sgd, standardised",
        "sgd, whitened",
        "sgd, centred",
    ]
    row = reach.set_index(["model", "block"]).loc[("a", 1)]
    gap = best.loc[("a", "raw"), "gap_final"]
    assert row["sgd, raw"] == f"not within budget (gap {gap:.3g})" and row["sgd, whitened"].endswith(" s")
    tuning = tuning_table(runs).set_index("inputs")
    assert tuning.loc["raw", "at grid edge"] == "3 of 3"  # a grid of two rates: every choice is an end of it
    timing = closed_form_time(measured, chosen)
    assert list(timing.block) == [0, 1, 0] and (timing.closed_form_s > 0).all()
    with pytest.raises(LinrecError, match="no measurement for models \\['c'\\]"):
        pitfall_runs(measured, chosen.assign(model="c"), config)


def test_centred_rows_keep_the_conditioning_and_the_closed_form():
    rows = planted_rows(1, n=2000, d=8, input_offset=30, input_scale=1e-3)
    config = BaselineConfig()
    centred = centred_rows(rows, 0, config)
    fit = centred.split(0)[0].holdout(0.2, config.seed)[0]
    assert fit.x.mean(0).abs().max() < 1e-5 and float(fit.x.pow(2).mean()) == pytest.approx(1.0, rel=1e-4)
    raw, new = fake_measurement({0: rows}, "r").table(), fake_measurement({0: centred}, "c").table()
    assert new.input_condition[0] == pytest.approx(raw.input_condition[0], rel=1e-3)
    assert new.r2_lin[0] == pytest.approx(raw.r2_lin[0], abs=1e-5)
    assert set(ARMS) == {"raw", "centred", "standardised", "whitened"}
    with pytest.raises(LinrecError, match="constant"):
        centred_rows(Rows(torch.ones(2000, 8), rows.y, rows.fold), 0, config)


def test_baseline_config_takes_the_profile_budget():
    config = baseline_config(ProbeSettings(steps=20, lr=3e-3), seed=2)
    assert (config.steps, config.lr_adam, config.log_every, config.seed) == (20, 3e-3, 1, 2)
    assert baseline_config(ProbeSettings(steps=2000)).log_every == BaselineConfig.log_every
    assert baseline_config(ProbeSettings(), steps=40).steps == 40
    assert baseline_config(ProbeSettings(), device="cpu").device == "cpu"
    assert baseline_config(ProbeSettings()).device == str(pick_device(None))  # a profile's None: the best here
    with pytest.raises(LinrecError, match="at least 1"):
        baseline_config(ProbeSettings(), steps=0)


def test_cached_runs_are_computed_once(measured, monkeypatch, tmp_path):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    table = pd.concat([m.table() for m in measured.values()], ignore_index=True)
    chosen = representative_blocks(table)
    config = BaselineConfig(steps=40, log_every=20, lr_factors=(1.0,))
    first = pitfall_runs(measured, chosen, config, optimizers=("adam",), progress=False, cache=True)
    direct = pitfall_runs(measured, chosen, config, optimizers=("adam",), progress=False)
    pd.testing.assert_frame_equal(
        first[0].drop(columns="seconds_to_ceiling"), direct[0].drop(columns="seconds_to_ceiling")
    )

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(pitfall, "_all_runs", no_training)
    again = pitfall_runs(measured, chosen, config, optimizers=("adam",), progress=False, cache=True)
    pd.testing.assert_frame_equal(again[0], first[0])
    pd.testing.assert_frame_equal(again[1], first[1])
    with pytest.raises(AssertionError, match="trained again"):  # another setting is another entry
        pitfall_runs(measured, chosen, replace(config, steps=60), optimizers=("adam",), progress=False, cache=True)


def test_the_chapters_configuration_and_settings_table():
    from linrec.analysis.pitfall import chapter_config, run_settings

    smoke = get_profile("smoke")
    config = chapter_config(smoke, seed=1, steps=7, tolerance=0.02)
    assert (config.steps, config.tolerance) == (7, 0.02)
    table = run_settings(config, 123)
    assert table.loc["steps per run", "setting"] == 7 and table.loc["sampled rows per block", "setting"] == 123
    assert table.loc["targets", "setting"] == ("standardised" if config.standardise_targets else "raw")
    flipped = run_settings(replace(config, standardise_targets=not config.standardise_targets), 1)
    assert {table.loc["targets", "setting"], flipped.loc["targets", "setting"]} == {"standardised", "raw"}
