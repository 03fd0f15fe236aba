"""The residual across models: probe sweeps over measurements, the gate summary, and output-variance concentration."""

import pandas as pd
import pytest
import torch

from conftest import measurement_info
from linrec.analysis import bilinear
from linrec.analysis.bilinear import (
    bilinear_claims,
    controls_pass,
    gate_summary,
    output_concentration,
    output_dims,
    planted_residual,
    probe_controls,
    probe_sweep,
    residual_correlations,
    widest_gap,
)
from linrec.core.sample import Rows, RowSample
from linrec.errors import LinrecError
from linrec.experiment.measurement import Measurement
from linrec.experiment.profiles import ProbeSettings, get_profile
from linrec.experiment.resolve import probe_config
from linrec.interventions.probes import ProbeConfig, bilinear_probe, probe_table, sample_rows
from linrec.models.loading import pick_device
from linrec.report.claims import claims_table
from linrec.stats import captured_share

N, D, FOLDS = 3000, 8, 5


def fake_measurement(blocks: dict[int, Rows], model: str = "toy") -> Measurement:
    """A Measurement of planted rows: per-fold moments from the rows, the rows as the sample."""
    info = measurement_info(model, corpus="planted")
    return Measurement(info, {b: r.fold_moments(FOLDS) for b, r in blocks.items()}, dict(blocks))


def concentrated(seed: int = 0) -> Rows:
    """Output dim 0: an exact linear function with 100x the scale; dims 1..: an even function (R² ≈ 0)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g)
    y = torch.cat([100 * x[:, :1], x[:, 1:] ** 2], dim=1)
    return Rows(x, y, torch.arange(N) // 30 % FOLDS)


def linear(seed: int = 0) -> Rows:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g)
    return Rows(
        x, x @ torch.randn(D, D, generator=g) + 0.01 * torch.randn(N, D, generator=g), torch.arange(N) // 30 % FOLDS
    )


def test_output_concentration_finds_the_dim_that_carries_global_r2():
    table = output_concentration({"toy": fake_measurement({0: concentrated(), 1: linear()})}, top=1)
    hot, flat = table.set_index("block").loc[0], table.set_index("block").loc[1]
    var_even = 2.0  # Var(z²) for z ~ N(0, 1)
    assert hot.top_share == pytest.approx(100**2 / (100**2 + (D - 1) * var_even), rel=0.05)
    assert hot.r2_top > 0.9999 and abs(hot.r2_rest) < 0.02  # the hot dim is linear, the rest are not
    assert (
        hot.r2_lin > 0.99
        and abs(hot.r2_feature_median) < 0.02
        and hot.gap == pytest.approx(hot.r2_lin - hot.r2_feature_median)
    )
    assert hot.uniform_share == 1 / D and hot.effective_rank_out == pytest.approx(1.0, abs=0.01)
    assert flat.gap == pytest.approx(0.0, abs=0.01) and flat.r2_top > 0.99 and flat.r2_rest > 0.99
    assert widest_gap(table).block == 0
    with pytest.raises(LinrecError, match="between 1 and 7"):
        output_concentration({"toy": fake_measurement({0: linear()})}, top=D)


def test_output_dims_orders_by_variance_and_matches_the_report():
    m = fake_measurement({3: concentrated()})
    dims = output_dims(m, 3)
    assert dims.dim.iloc[0] == 0 and list(dims["rank"]) == list(range(1, D + 1))
    assert dims.variance.is_monotonic_decreasing and dims.share.sum() == pytest.approx(1.0)
    # the variance-weighted mean of per-feature R² is the global R² (up to fold averaging)
    weighted = float((dims.variance * dims.r2).sum() / dims.variance.sum())
    assert weighted == pytest.approx(m.table().r2_lin.iloc[0], abs=1e-3)
    with pytest.raises(LinrecError, match="blocks: \\[3\\]"):
        output_dims(m, 0)


def test_sample_rows_takes_a_row_sample_or_a_mapping():
    rows = linear()
    sample = RowSample(max_rows=N)
    sample.add(2, rows.x, rows.y, rows.fold)
    from_sample, from_mapping = sample_rows(sample), sample_rows({2: rows})
    assert list(from_sample) == list(from_mapping) == [2]
    assert torch.equal(from_sample[2].y, from_mapping[2].y)
    with pytest.raises(LinrecError, match="sampled blocks: \\[2\\]"):
        sample_rows({2: rows}, [0])
    config = ProbeConfig(rank=2, steps=20, eval_every=10)
    a, b = probe_table(sample, config=config, progress=False), probe_table({2: rows}, config=config, progress=False)
    pd.testing.assert_frame_equal(a, b)


def test_probe_config_takes_the_profile_budget():
    config = probe_config(ProbeSettings(rank=4, sample_rows=512, steps=20, lr=1e-3), seed=3)
    assert (config.rank, config.steps, config.seed, config.eval_every) == (4, 20, 3, 2)
    assert config.lr == ProbeConfig.lr  # the profile's lr is the Adam baseline's, not the probe's
    assert probe_config(ProbeSettings(steps=3000)).eval_every == ProbeConfig.eval_every
    assert probe_config(ProbeSettings(), rank=2, steps=5).rank == 2
    assert probe_config(ProbeSettings(), device="cpu").device == "cpu"
    assert probe_config(ProbeSettings()).device == str(pick_device(None))  # a profile's None: the best device here
    with pytest.raises(LinrecError, match="at least 1"):
        probe_config(ProbeSettings(), steps=0)


def test_probe_sweep_labels_models_and_gate_summary():
    measured = {
        "a": fake_measurement({0: linear(0), 1: linear(1)}),
        "b": fake_measurement({0: linear(2), 1: linear(3)}),
    }
    config = ProbeConfig(rank=2, steps=100, eval_every=10)
    sweep = probe_sweep(measured, config, progress=False)
    assert list(zip(sweep.model, sweep.block)) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert (sweep.nonlinearity == 1 - sweep.r2_lin).all()
    alone = probe_table(measured["b"].samples, measured["b"].moments, config=config, progress=False)
    assert sweep[sweep.model == "b"].gain.tolist() == alone.gain.tolist()
    summary = gate_summary(sweep, config.gate_init)
    assert summary["shrunk"] == 1.0 and summary["median_ratio"] < 1  # near-linear blocks: the gate de-recruits
    table = pd.DataFrame({"gate": [0.2, 0.05, 0.1, 0.3], "nonlinearity": [0.1, 0.4, 0.2, 0.05]})
    summary = gate_summary(table, 0.1)
    assert (
        summary["shrunk"] == 0.25
        and summary["median_ratio"] == pytest.approx(1.5)
        and summary["rho"].r == pytest.approx(-1.0)
    )
    assert gate_summary(table.iloc[:3], 0.1)["rho"] is None
    with pytest.raises(LinrecError, match="no measurements"):
        probe_sweep({}, config)


def test_cached_probe_sweeps_are_computed_once(monkeypatch, tmp_path):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    measured = {m: fake_measurement({0: linear(i)}, model=m) for i, m in enumerate(("a", "b"))}
    config = ProbeConfig(rank=2, steps=60, eval_every=10)
    first = probe_sweep(measured, config, progress=False, cache=True)
    pd.testing.assert_frame_equal(first, probe_sweep(measured, config, progress=False))
    monkeypatch.setattr(bilinear, "probe_table", lambda *a, **k: pytest.fail("probed again"))
    pd.testing.assert_frame_equal(probe_sweep(measured, config, progress=False, cache=True), first)


def test_bilinear_claims_read_the_tables():
    sweep = pd.DataFrame({"r2_lin": [0.99, 0.9, 0.97, 0.6, 0.8], "gate": [0.01, 0.2, 0.02, 0.5, 0.3]})
    sweep["nonlinearity"] = 1 - sweep.r2_lin
    sweep["gain"] = 0.05 * sweep.nonlinearity  # perfectly correlated: r = 1
    concentration = pd.DataFrame(
        {"model": "m", "block": [0, 1], "effective_rank_out": [1.1, 20.0], "gap": [0.2, 0.01], "top_share": [0.9, 0.1]}
    )
    claims = claims_table(bilinear_claims(sweep, concentration, gate_init=0.1)).set_index("claim")
    assert list(claims.reproduced) == ["yes", "no", "yes", "yes"]  # median gain 0.0015 ≤ 0.05; r = 1 excludes 0
    assert claims.loc["bilinear probe gain", "paper (reported)"].startswith("a few points")
    assert "2 blocks with R²_lin ≥ 0.95" in claims.loc["seeded-poly gate on near-linear blocks", "this run (measured)"]
    few = claims_table(
        bilinear_claims(sweep.iloc[:3], concentration.iloc[:1], gate_init=0.1, near_linear=0.999)
    ).set_index("claim")
    assert list(few.reproduced) == ["yes", "untestable", "untestable", "no"]
    sweep = sweep.assign(captured=[0.1, 0.3, 0.05, 0.2, 0.15], at_budget=[False, True, False, False, False])
    working = pd.DataFrame({"captured": [0.97, 0.01]})
    claims = claims_table(bilinear_claims(sweep, concentration, 0.1, controls=working)).set_index("claim")
    assert claims.loc["planted controls at this budget", "reproduced"] == "yes"
    share = claims.loc["share of the residual the probe captures"]
    assert share.reproduced == "yes" and "median 0.150" in share["this run (measured)"]
    assert "1 probes still improving" in share["this run (measured)"]
    broken = claims_table(bilinear_claims(sweep, concentration, 0.1, controls=pd.DataFrame({"captured": [0.5, 0.0]})))
    broken = broken.set_index("claim").reproduced
    assert broken["planted controls at this budget"] == "no"
    assert broken["share of the residual the probe captures"] == "untestable"  # a probe that cannot learn says nothing


def test_planted_controls_at_the_chapter_budget():
    """A quadratic residual is captured, an odd one with no quadratic part is not: at the offline chapter's budget
    (ten times the profile's steps as a cap, early stopping on validation)."""
    config = probe_config(get_profile("offline").probe, steps=10 * get_profile("offline").probe.steps)
    controls = probe_controls(config).set_index("control")
    quadratic, odd = controls.iloc[0], controls.iloc[1]
    assert quadratic.captured >= 0.9 and quadratic.captured_low <= quadratic.captured <= quadratic.captured_high
    assert abs(odd.captured) <= 0.05 and odd.captured_low <= 0 <= odd.captured_high + 1e-3
    assert not controls.at_budget.any()  # both stopped on patience: converged, not cut off
    assert 0.6 < quadratic.r2_lin < 0.8 and 0.6 < odd.r2_lin < 0.8  # the residual carries about 30 %
    assert controls_pass(controls.reset_index()) and not controls_pass(controls.reset_index().iloc[::-1])
    with pytest.raises(LinrecError, match="quadratic, odd"):
        planted_residual("even")


def test_captured_share_is_gain_over_what_the_closed_form_leaves():
    result = bilinear_probe(planted_residual("quadratic", n=3000, d=16, rank=4), config=ProbeConfig(rank=8, steps=400))
    assert result.captured.value == pytest.approx(result.gain / (1 - result.r2_lin), abs=1e-9)
    half = captured_share(torch.ones(100), torch.full((100,), 0.5))
    assert (half.value, half.low, half.high) == (0.5, 0.5, 0.5)
    with pytest.raises(LinrecError, match="no error to capture"):
        captured_share(torch.zeros(5), torch.zeros(5))


def test_pearson_of_gain_says_yes_to_any_residual_and_the_share_does_not():
    """Blocks that differ only in how much they leave over, each residual 10 % captured: the paper's Pearson r of
    gain against 1 - R²_lin is +1 although nothing about the residual changes; Spearman of the share sees noise."""
    g = torch.Generator().manual_seed(0)
    nonlinearity = torch.linspace(0.05, 0.6, 12)
    share = 0.1 + 0.01 * torch.randn(12, generator=g)
    sweep = pd.DataFrame({"model": ["a"] * 6 + ["b"] * 6, "nonlinearity": nonlinearity, "captured": share,
                          "gain": share * nonlinearity})  # fmt: skip
    table = residual_correlations(sweep).set_index(["statistic", "scope"])
    pearson = table.loc[("Pearson r(gain, 1 − R²_lin) (the paper's)", "all blocks")]
    assert pearson.r > 0.95 and pearson.low > 0
    spearman = table.xs("Spearman ρ(captured share, 1 − R²_lin)")
    assert list(spearman.index) == ["a", "b", "all blocks"] and (spearman.low < 0).all() and (spearman.high > 0).all()
    tiny = residual_correlations(sweep.iloc[:3])
    assert tiny.r.isna().all() and (tiny.n == 3).all()  # fewer than 4 blocks: no correlation claimed
