"""Trained linear baselines: near the ceiling when well conditioned, short of it when not, unless whitened."""

import pytest
import torch

from linrec.core.moments import Moments
from linrec.core.sample import Rows, RowSample
from linrec.errors import LinrecError
from linrec.interventions.baseline import (
    NOT_WITHIN_BUDGET,
    BaselineConfig,
    baseline_runs,
    curves,
    largest_curvature,
    summary,
    train_linear,
)

D, N = 16, 4000
CONFIG = BaselineConfig(steps=1000, lr_adam=1e-2)


def toy(decades: float, seed: int = 0) -> Rows:
    """x = z diag(s) Qᵀ with s from 1 down to 10^-decades (condition 10^(2·decades)), y = z W + noise.

    Every latent direction carries the same output variance, so the small-variance input
    directions matter as much as the large ones.
    """
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(N, D, generator=g)
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=g))
    x = (z * torch.logspace(0, -decades, D)) @ q.T
    y = z @ torch.randn(D, D, generator=g) + 0.1 * torch.randn(N, D, generator=g)
    return Rows(x, y, torch.arange(N) // 40 % 5)


def test_optimisers_reach_the_ceiling_on_a_well_conditioned_toy():
    rows = toy(0)
    for optimizer in ("sgd", "adam"):
        run = train_linear(rows, optimizer=optimizer, config=CONFIG)
        assert run.status == "reached", (optimizer, run.log.r2.iloc[-1], run.ceiling)
        assert run.ceiling > 0.99
        assert run.log.r2.iloc[-1] > run.ceiling - 0.01
        assert 0 < run.steps_to_ceiling <= CONFIG.steps and run.seconds_to_ceiling > 0


def test_optimisers_lag_on_an_ill_conditioned_toy_and_whitening_closes_the_gap():
    rows = toy(3)
    table = summary(
        [train_linear(rows, optimizer=o, whiten=w, config=CONFIG) for o in ("sgd", "adam") for w in (False, True)]
    )
    raw, white = table[~table.whitened], table[table.whitened]
    assert (raw.status == NOT_WITHIN_BUDGET).all() and raw.steps_to_ceiling.isna().all()
    assert (raw.gap_final > 0.1).all()
    assert (white.status == "reached").all() and (white.gap_final < 0.01).all()
    assert table.ceiling.nunique() == 1 and table.ceiling.iloc[0] > 0.99


def test_largest_curvature_is_that_of_the_loss():
    """Against the top eigenvalue of the loss's Hessian in (W, b), formed by autograd."""
    x, y = toy(1).x[:500].double(), toy(1).y[:500, :3].double()
    mse = lambda p: ((x @ p[: D * 3].reshape(D, 3) + p[D * 3 :] - y) ** 2).mean()  # noqa: E731
    hessian = torch.autograd.functional.hessian(mse, torch.zeros(D * 3 + 3, dtype=torch.float64))
    assert largest_curvature(Moments.from_rows(x, y)) == pytest.approx(
        float(torch.linalg.eigvalsh(hessian)[-1]), rel=1e-9
    )


def test_divergence_is_reported():
    run = train_linear(toy(0), optimizer="sgd", config=BaselineConfig(steps=200, lr_sgd=100.0))
    assert run.diverged and run.status == "diverged" and run.steps_to_ceiling is None


def test_runs_over_blocks_and_curves():
    sample = RowSample(max_rows=N)
    for block in (0, 1):
        rows = toy(block)
        sample.add(block, rows.x, rows.y, rows.fold)
    config = BaselineConfig(steps=100, log_every=20)
    runs = baseline_runs(sample, optimizers=("adam",), whiten=(True,), config=config, progress=False)
    assert [(r.block, r.optimizer, r.whitened) for r in runs] == [(0, "adam", True), (1, "adam", True)]
    long = curves(runs)
    assert list(long.step[long.block == 0]) == [0, 20, 40, 60, 80, 100]
    assert (long.gap == [r.ceiling for r in runs for _ in range(6)] - long.r2).all()
    assert long.groupby("block").seconds.apply(lambda s: s.is_monotonic_increasing).all()
    with pytest.raises(LinrecError, match="sgd, adam"):
        train_linear(toy(0), optimizer="lbfgs")
    with pytest.raises(LinrecError, match="cosine, constant"):
        train_linear(toy(0), config=BaselineConfig(schedule="step"))
