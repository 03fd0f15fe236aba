"""The pitfall across models: representative blocks, runs with their conditioning, reach table and claims."""

from dataclasses import replace

import pandas as pd
import pytest

from conftest import measurement_info
from linrec.analysis import pitfall
from linrec.analysis.pitfall import (
    closed_form_time,
    pitfall_claims,
    pitfall_runs,
    planted_rows,
    reach_table,
    representative_blocks,
    tuning_table,
)
from linrec.core.sample import Rows
from linrec.errors import LinrecError
from linrec.experiment.measurement import Measurement
from linrec.experiment.profiles import ProbeSettings
from linrec.experiment.resolve import baseline_config
from linrec.interventions.baseline import BaselineConfig, baseline_runs, summary
from linrec.models.loading import pick_device
from linrec.report.claims import claims_table

FOLDS = 5


def toy(decades: float, seed: int = 0) -> Rows:
    """Inputs of condition number 10^(2·decades) along rotated directions; an exact linear target plus noise."""
    return planted_rows(decades, n=2000, d=8, seed=seed)


def fake_measurement(blocks: dict[int, Rows], model: str) -> Measurement:
    return Measurement(
        measurement_info(model, corpus="planted"), {b: r.fold_moments(FOLDS) for b, r in blocks.items()}, dict(blocks)
    )


@pytest.fixture(scope="module")
def measured() -> dict[str, Measurement]:
    return {"a": fake_measurement({0: toy(0), 1: toy(2), 2: toy(1)}, "a"), "b": fake_measurement({0: toy(0.5, 1)}, "b")}


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


def test_pitfall_runs_join_the_conditioning_and_whitening_helps(measured):
    table = pd.concat([m.table() for m in measured.values()], ignore_index=True)
    chosen = representative_blocks(table)
    config = BaselineConfig(steps=300, log_every=50, lr_factors=(1.0, 10.0))
    runs, curves = pitfall_runs(measured, chosen, config, optimizers=("sgd",), progress=False)
    assert len(runs) == 3 * 3 * 2 and set(runs.columns) >= {
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
    assert runs[runs.model == "a"].gap_final.tolist() == pytest.approx(direct.gap_final.tolist(), abs=1e-12)
    assert list(curves[(curves.model == "a") & (curves.block == 1)].step.unique()) == [0, 50, 100, 150, 200, 250, 300]
    best = runs[runs.tuned & (runs.role == "worst-conditioned")].set_index(["model", "inputs"])
    assert best.loc[("a", "raw"), "gap_final"] > 0.05 > best.loc[("a", "whitened"), "gap_final"]
    claims = claims_table(pitfall_claims(runs, 0.01)).set_index("claim")
    assert claims.loc["trained linear baselines", "reproduced"] == "yes"
    assert claims.loc["whitening closes the gap (sgd)", "reproduced"] == "yes"
    reach = reach_table(runs)
    assert list(reach.columns) == [
        "model",
        "block",
        "role",
        "input_condition",
        "sgd, raw",
        "sgd, standardised",
        "sgd, whitened",
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


def test_reach_table_cells_and_claims_without_best_blocks():
    runs = pd.DataFrame(
        {
            "model": ["m"] * 3,
            "block": [3, 3, 3],
            "role": ["worst-conditioned"] * 3,
            "input_condition": [1e4] * 3,
            "optimizer": ["adam"] * 3,
            "inputs": ["raw", "whitened", "whitened"],
            "tuned": [True, True, False],
            "gap_final": [0.3, 0.4, 0.0],
            "status": ["diverged", "reached", "reached"],
            "steps_to_ceiling": [None, 125, 5],
            "seconds_to_ceiling": [None, 0.5, 0.01],
        }
    )
    reach = reach_table(runs).iloc[0]
    assert reach["adam, raw"] == "diverged (gap 0.3)" and reach["adam, whitened"] == "125 steps, 0.50 s"
    claims = claims_table(pitfall_claims(runs)).set_index("claim")
    assert claims.loc["trained linear baselines", "reproduced"] == "yes"  # 0.3 > tolerance, no best block to compare
    assert claims.loc["whitening closes the gap (adam)", "reproduced"] == "no"  # the tuned 0.4 is not below 0.3


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
