"""Bilinear probe and seeded-poly on planted targets; correlations against scipy."""

from __future__ import annotations

import copy
from dataclasses import replace

import pandas as pd
import pytest
import torch
from scipy import stats

from linrec.core.sample import Rows, closed_form
from linrec.errors import LinrecError
from linrec.interventions.probes import (
    PolyProbe,
    ProbeConfig,
    bilinear_probe,
    gain_correlation,
    probe_table,
    seeded_poly,
    train_probe,
    train_probes,
)
from linrec.stats import correlation

D, N = 24, 4000


def planted(kind: str, seed: int = 0) -> Rows:
    """Gaussian inputs; Y = P((Ux) ⊙ (Vx)) of rank 8 ("bilinear") or Y = xW + b ("affine"); 5 folds of 64-row runs."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g) * 2 + 1
    if kind == "bilinear":
        u, v, p = torch.randn(8, D, generator=g), torch.randn(8, D, generator=g), torch.randn(D, 8, generator=g)
        xc = x - 1  # the bilinear form of the centred input: no linear part left for the closed form
        y = ((xc @ u.T) * (xc @ v.T)) @ p.T
    else:
        y = x @ torch.randn(D, D, generator=g) + 3.0
    return Rows(x, y, torch.arange(N) // 64 % 5)


FAST = ProbeConfig(rank=8, steps=1500)


def test_probe_recovers_a_planted_bilinear_block_the_closed_form_cannot():
    result = bilinear_probe(planted("bilinear"), config=FAST)
    assert abs(result.r2_lin) < 0.05
    assert result.r2_poly >= 0.95
    assert result.gain == pytest.approx(result.r2_poly - result.r2_lin)
    assert result.n_train + result.n_val + result.n_test == N


def test_seeded_poly_gate_shrinks_on_an_affine_target():
    config = ProbeConfig(rank=8, steps=800, gate_init=0.1)
    result = seeded_poly(planted("affine"), config=config)
    assert result.r2_lin > 0.999999
    assert result.gate < 0.01  # de-recruited: from 0.1 to under a tenth of it
    assert result.r2_poly > 0.9999
    assert result.best_step > 0


def test_per_output_gate_recruits_on_a_bilinear_target():
    config = ProbeConfig(rank=8, steps=600, gate="output", gate_init=0.1)
    result = seeded_poly(planted("bilinear"), config=config)
    assert result.probe.gate.shape == (D,)
    assert result.gate > 0.3  # grown from 0.1
    assert result.r2_poly > 0.5 > result.r2_lin + 0.4


def test_probe_starts_at_the_closed_form():
    """With the gate at 0, the parametrisation is exactly ŷ = xW + b of the closed form."""
    rows = planted("bilinear")
    train, test = rows.split(0)
    fit = closed_form(train)
    probe = PolyProbe(fit, train, rank=4, gate="scalar", gate_init=0.0, seed=0)
    torch.testing.assert_close(probe(test.x).double(), fit(test.x), rtol=1e-4, atol=1e-3)
    n_stored = sum(t.numel() for t in probe.parameters()) + sum(t.numel() for t in probe.buffers())
    assert n_stored == D * D + D + 4 * (2 * D + D) + 1 + (2 * D + D + 1)
    with pytest.raises(LinrecError, match="scalar, output"):
        PolyProbe(fit, train, rank=4, gate="vector", gate_init=0.0, seed=0)


def test_probes_trained_together_are_each_the_probe_trained_alone():
    """Stacked, each probe's arithmetic is its own, to the bit, and each stops early on its own validation rows."""
    config = ProbeConfig(rank=4, steps=400, eval_every=10, patience=3)
    kinds = ("affine", "bilinear", "bilinear")
    parts = []
    for seed, kind in enumerate(kinds):
        train, _ = planted(kind, seed=seed).split(0)
        fit_rows, val = train.holdout(config.val_fraction, config.seed)
        parts.append((PolyProbe(closed_form(train), fit_rows, 4, "scalar", 0.1, seed), fit_rows, val))
    for train_linear in (False, True):
        alone = [copy.deepcopy(probe) for probe, _, _ in parts]
        steps_alone = [train_probe(a, f, v, config, train_linear) for a, (_, f, v) in zip(alone, parts, strict=True)]
        together = [copy.deepcopy(probe) for probe, _, _ in parts]
        steps = train_probes(together, [f for _, f, _ in parts], [v for _, _, v in parts], config, train_linear)
        assert steps == steps_alone
        assert len({s for s, _ in steps}) > 1  # they stopped at different steps
        for a, t in zip(alone, together, strict=True):
            assert all(torch.equal(a.state_dict()[k], t.state_dict()[k]) for k in a.state_dict())
    _, fit_rows, val = parts[0]
    with pytest.raises(LinrecError, match="of one length"):
        train_probes([parts[0][0]] * 2, [fit_rows, fit_rows.select(torch.arange(100))], [val, val], config, False)


@pytest.mark.slow
def test_probe_table_over_blocks():
    sample = {block: planted(kind, seed=block) for block, kind in enumerate(("affine", "bilinear"))}
    table = probe_table(sample, config=ProbeConfig(rank=8, steps=300), progress=False)
    assert list(table.block) == [0, 1]
    assert (table.gain == table.r2_poly - table.r2_lin).all()
    assert table.r2_lin[0] > 0.999 and table.r2_lin[1] < 0.1
    assert table.gain[1] > 0.3 > abs(table.gain[0])
    short = ProbeConfig(rank=8, steps=40)
    split = probe_table(sample, config=ProbeConfig(rank=8, steps=300), progress=False, seeded=short)
    assert split.gain.tolist() == table.gain.tolist()  # the bilinear probe keeps its own settings
    direct = seeded_poly(sample[1], config=short, block=1)
    assert split.gain_seeded[1] == direct.gain and split.gain_seeded[1] != table.gain_seeded[1]


def test_correlations_match_scipy():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(12, generator=g).tolist()
    b = (torch.tensor(a) * 0.5 + torch.randn(12, generator=g)).tolist()
    mine = correlation(a, b)
    theirs = stats.pearsonr(a, b)
    ci = theirs.confidence_interval(0.95)
    assert (mine.r, mine.low, mine.high) == pytest.approx((theirs.statistic, ci.low, ci.high), abs=1e-10)
    assert correlation(a, b, "spearman").r == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert mine.n == 12 and "pearson r" in str(mine)


def test_gain_correlation_and_errors():
    table = pd.DataFrame({"r2_lin": [0.9, 0.5, 0.3, 0.99, 0.7], "gain": [0.2, 1.0, 1.4, 0.02, 0.6]})
    assert gain_correlation(table).r == pytest.approx(1.0)  # gain = 2 (1 - R²_lin)
    with pytest.raises(LinrecError, match="at least 4"):
        correlation([1, 2, 3], [1, 2, 3])
    with pytest.raises(LinrecError, match="constant"):
        correlation([1, 1, 1, 1], [1, 2, 3, 4])
    with pytest.raises(LinrecError, match="pearson or spearman"):
        correlation([1, 2, 3, 4], [1, 2, 3, 4], "kendall")
    with pytest.raises(LinrecError, match="columns: r2_lin, gain"):
        gain_correlation(table, "gain_seeded")


def test_a_probe_trained_on_an_explicit_device_is_the_default_one_and_comes_back_home():
    rows = planted("bilinear")
    small = ProbeConfig(rank=4, steps=60, eval_every=10)
    default, explicit = bilinear_probe(rows, config=small), bilinear_probe(rows, config=replace(small, device="cpu"))
    assert (default.r2_poly, default.steps, default.best_step) == (explicit.r2_poly, explicit.steps, explicit.best_step)
    assert explicit.probe.u.device.type == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_probe_trains_on_the_gpu_and_agrees_with_the_cpu():
    rows = planted("bilinear")
    cpu, gpu = bilinear_probe(rows, config=FAST), bilinear_probe(rows, config=replace(FAST, device="cuda"))
    assert gpu.probe.u.device.type == "cpu"  # handed back where the rows are
    assert gpu.r2_poly >= 0.95 and gpu.r2_poly == pytest.approx(cpu.r2_poly, abs=0.02)
