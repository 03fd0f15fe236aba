"""Trained linear baselines: same rows as the ceiling, standardised targets, tuned rates; short of the ceiling only
when the inputs are ill-conditioned, and whitening closes that gap."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from linrec.analysis.pitfall_controls import planted_rows, target_control
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import baseline_config
from linrec.interventions.baseline import (
    NOT_WITHIN_BUDGET,
    VALIDATION,
    BaselineConfig,
    baseline_runs,
    curves,
    largest_curvature,
    summary,
    train_linear,
    tuned_runs,
)
from linrec.stats import r2

CONFIG = BaselineConfig(steps=1000, lr_factors=(1.0, 10.0))


def tuned(runs):
    (run,) = [r for r in runs if r.tuned]
    return run


def test_the_ceiling_is_the_least_squares_map_of_the_rows_the_runs_train_on():
    rows = planted_rows(1, offset=3.0)
    run = train_linear(rows, optimizer="sgd", config=replace(CONFIG, steps=10))
    fit, _ = rows.split(0)[0].holdout(VALIDATION, CONFIG.seed)
    test = rows.split(0)[1]
    ones = lambda x: torch.cat([x.double(), torch.ones(len(x), 1, dtype=torch.float64)], 1)  # noqa: E731
    solution = torch.linalg.lstsq(ones(fit.x), fit.y.double()).solution  # independent of linrec's solver
    assert run.ceiling == pytest.approx(r2(test.y, ones(test.x) @ solution), abs=1e-9)
    assert len(fit) == round(len(rows.split(0)[0]) * (1 - VALIDATION))


def test_tuned_runs_reach_the_ceiling_on_a_well_conditioned_toy():
    for optimizer in ("sgd", "adam"):
        runs = tuned_runs(planted_rows(0), optimizer=optimizer, config=CONFIG)
        best = tuned(runs)
        assert best.val_r2 == max(r.val_r2 for r in runs)
        assert best.status == "reached" and best.ceiling > 0.99, (optimizer, best.log.r2.iloc[-1], best.ceiling)
        assert 0 < best.steps_to_ceiling <= CONFIG.steps and best.seconds_to_ceiling > 0


@pytest.mark.slow
def test_at_the_paper_settings_an_offset_or_scaled_target_defeats_usual_adam_not_the_tuned_standardised_one():
    """Condition number 1: whatever stops Adam at lr 1e-3 on a raw target is the target, not the inputs."""
    config = baseline_config(get_profile("paper").probe)
    assert (config.steps, config.lr_adam, config.batch_size, config.schedule) == (2000, 1e-3, 256, "cosine")
    table = target_control(config).set_index(["target", "training"])
    usual, fixed = table.xs("base rate, raw target", level=1), table.xs("tuned, standardised target", level=1)
    assert (fixed.status == "reached").all() and (fixed.gap_final < 1e-3).all()
    assert (usual.loc[["shifted by 30", "scaled by 30"], "status"] == NOT_WITHIN_BUDGET).all()
    assert (usual.loc[["shifted by 30", "scaled by 30"], "gap_final"] > 0.5).all()
    assert (table.ceiling > 0.99).all() and table.ceiling.max() - table.ceiling.min() < 1e-6  # one map, moved


def test_standardised_training_does_not_see_a_target_s_offset_or_scale():
    plain = train_linear(planted_rows(1), optimizer="adam", config=CONFIG)
    moved = train_linear(planted_rows(1, offset=-7.0, scale=40.0), optimizer="adam", config=CONFIG)
    torch.testing.assert_close(torch.tensor(moved.log.r2.values), torch.tensor(plain.log.r2.values), atol=1e-4, rtol=0)
    assert moved.ceiling == pytest.approx(plain.ceiling, abs=1e-6)


@pytest.mark.slow
def test_tuned_runs_lag_on_an_ill_conditioned_toy_and_whitening_closes_the_gap():
    rows = planted_rows(3)
    table = summary(
        [r for o in ("sgd", "adam") for i in ("raw", "whitened") for r in tuned_runs(rows, 0, o, i, CONFIG)]
    )
    assert len(table) == 2 * 2 * 2 and table.groupby(["optimizer", "inputs"]).tuned.sum().eq(1).all()
    best = table[table.tuned]
    raw, white = best[best.inputs == "raw"], best[best.inputs == "whitened"]
    assert (raw.status == NOT_WITHIN_BUDGET).all() and raw.steps_to_ceiling.isna().all()
    assert (raw.gap_final > 0.1).all()
    assert (white.status == "reached").all() and (white.gap_final < 0.01).all()
    assert table.ceiling.nunique() == 1 and table.ceiling.iloc[0] > 0.99


def test_largest_curvature_is_that_of_the_loss():
    """Against the top eigenvalue of the loss's Hessian in (W, b), formed by autograd."""
    rows = planted_rows(1)
    x, y, d = rows.x[:500].double(), rows.y[:500, :3].double(), rows.x.shape[1]
    mse = lambda p: ((x @ p[: d * 3].reshape(d, 3) + p[d * 3 :] - y) ** 2).mean()  # noqa: E731
    hessian = torch.autograd.functional.hessian(mse, torch.zeros(d * 3 + 3, dtype=torch.float64))
    assert largest_curvature(Moments.from_rows(x, y)) == pytest.approx(
        float(torch.linalg.eigvalsh(hessian)[-1]), rel=1e-9
    )


def test_divergence_is_reported_and_never_tuned():
    run = train_linear(planted_rows(0), optimizer="sgd", config=BaselineConfig(steps=200), lr=1e4)
    assert run.diverged and run.status == "diverged" and run.steps_to_ceiling is None and run.val_r2 == -float("inf")
    runs = tuned_runs(planted_rows(0), optimizer="sgd", config=BaselineConfig(steps=200, lr_factors=(1.0, 1e5)))
    assert runs[1].diverged and runs[0].tuned


def test_runs_over_blocks_and_curves():
    sample = {block: planted_rows(block) for block in (0, 1)}
    config = BaselineConfig(steps=100, log_every=20, lr_factors=(1.0,))
    runs = baseline_runs(sample, optimizers=("adam",), inputs=("standardised",), config=config, progress=False)
    assert [(r.block, r.optimizer, r.inputs, r.tuned) for r in runs] == [
        (0, "adam", "standardised", True),
        (1, "adam", "standardised", True),
    ]
    long = curves(runs)
    assert list(long.step[long.block == 0]) == [0, 20, 40, 60, 80, 100]
    assert (long.gap == [r.ceiling for r in runs for _ in range(6)] - long.r2).all()
    assert long.groupby("block").seconds.apply(lambda s: s.is_monotonic_increasing).all()
    for bad, message in (
        (dict(optimizer="lbfgs"), "sgd, adam"),
        (dict(inputs="sphered"), "raw, standardised, whitened"),
        (dict(config=BaselineConfig(schedule="step")), "cosine, constant"),
    ):
        with pytest.raises(LinrecError, match=message):
            tuned_runs(planted_rows(0), **bad)
    with pytest.raises(LinrecError, match="lr_factors"):
        BaselineConfig(lr_factors=(0.0,))  # refused when the settings are made


def test_a_run_on_an_explicit_device_is_the_default_one():
    rows, config = planted_rows(1, offset=3.0), replace(CONFIG, steps=50)
    default, explicit = train_linear(rows, config=config), train_linear(rows, config=replace(config, device="cpu"))
    assert default.log.r2.tolist() == explicit.log.r2.tolist() and default.val_r2 == explicit.val_r2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_runs_train_on_the_gpu_and_reach_the_ceiling_there_too():
    for optimizer in ("sgd", "adam"):
        best = tuned(tuned_runs(planted_rows(0), optimizer=optimizer, config=replace(CONFIG, device="cuda")))
        assert best.status == "reached" and best.seconds_to_ceiling > 0, (optimizer, best.log.r2.iloc[-1])
