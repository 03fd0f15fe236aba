"""linrec.analysis.activation: Chapter 3: is the depth profile learned or set by the architecture (activation, inputs,
weights)?"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import measurement_info
from linrec.analysis.activation import conditioning_table, grid_shares, normalisation_table, predictor_table
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import get_profile
from linrec.report import paper
from support import tiny_captures

FOLDS = 4


def grid_of(values: np.ndarray, models=("A", "B")) -> pd.DataFrame:
    keys = [(m, b) for m in models for b in range(values.shape[0] // len(models))]
    return pd.DataFrame(
        [
            {
                "input_model": ki[0],
                "input_block": ki[1],
                "weight_model": kj[0],
                "weight_block": kj[1],
                "r2_lin": values[i, j],
                "r2_lin_std": 0.0,
            }
            for i, ki in enumerate(keys)
            for j, kj in enumerate(keys)
        ]
    )


@pytest.fixture(scope="module")
def two_models(tokenizer, text):
    return tiny_captures.two_models(tokenizer, text, FOLDS)


def test_grid_shares_of_planted_grids():
    rng = np.random.default_rng(0)
    columns = np.tile(rng.uniform(0, 1, 6), (6, 1))  # R² set by the FFN alone
    s = grid_shares(grid_of(columns))
    assert (s.weights, s.inputs) == (pytest.approx(1), pytest.approx(0, abs=1e-12))
    assert s.own_gap == pytest.approx(0, abs=1e-12)
    assert grid_shares(grid_of(columns - 0.2 * np.eye(6))).own_gap == pytest.approx(-0.2)  # less linear on own inputs
    assert s.follows_weights.r == pytest.approx(1) and s.cells == 36
    rows = columns.T  # R² set by the inputs alone
    s = grid_shares(grid_of(rows))
    assert (s.weights, s.inputs) == (pytest.approx(0, abs=1e-12), pytest.approx(1))
    assert s.follows_inputs.r == pytest.approx(1)
    additive = columns + 2 * rows
    s = grid_shares(grid_of(additive))
    assert s.inputs / s.weights == pytest.approx(4) and s.interaction == pytest.approx(0, abs=1e-12)
    three = grid_of(rng.uniform(0, 1, (9, 9)), models=("A", "B", "C"))
    assert grid_shares(three, models=["A", "B"]).cells == 36
    with pytest.raises(LinrecError, match="not complete"):
        grid_shares(grid_of(columns).iloc[:-1])
    with pytest.raises(LinrecError, match="no model"):
        grid_shares(three, models=["A", "Z"])


def test_normalisation_table_keeps_an_affine_block_linear(two_models):
    models, captured = two_models
    table = normalisation_table(models["affine"], captured["affine"])
    assert set(table["normalisation"]) == {"standardise", "whiten"} and (table["model"] == "affine").all()
    block1 = table[table["block"] == 1]
    assert (block1["r2_lin_norm"] > 1 - 1e-6).all() and (block1["change"].abs() < 1e-6).all()
    torch.testing.assert_close(
        torch.tensor(table["change"].to_numpy()), torch.tensor((table["r2_lin_norm"] - table["r2_lin"]).to_numpy())
    )


def test_measured_normalisation_is_the_table_computed_once_and_cached(two_models, tmp_path, monkeypatch):
    import linrec.analysis.activation as activation

    models, captured = two_models
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    loads = []

    def load(profile, model, checkpoint, progress):
        loads.append(model)
        return models["affine"], None

    monkeypatch.setattr(activation, "load_profile_model", load)
    first = activation.measured_normalisation(get_profile("smoke"), captured["affine"], progress=False)
    again = activation.measured_normalisation(get_profile("smoke"), captured["affine"], progress=False)
    pd.testing.assert_frame_equal(first, normalisation_table(models["affine"], captured["affine"]))
    pd.testing.assert_frame_equal(again, first)
    assert loads == ["affine"]  # the model is loaded once, to compute; the second call reads the cache


def test_conditioning_table_of_planted_inputs():
    g = torch.Generator().manual_seed(0)
    d, n = 8, 4000
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x[:, 0] *= 10  # one outlier dimension: variance 100 against 1
    y = x @ torch.randn(d, d, generator=g, dtype=torch.float64) + 0.1 * torch.randn(
        n, d, generator=g, dtype=torch.float64
    )
    fold = torch.arange(n) % FOLDS
    moments = {0: [Moments.from_rows(x[fold == f], y[fold == f]) for f in range(FOLDS)]}
    m = ProfileMeasurement.assembled(measurement_info("p", corpus="c"), moments, {})
    row = conditioning_table(m).iloc[0]
    assert row["outlier_ratio"] == pytest.approx(100, rel=0.15)
    assert row["effective_rank_in"] == pytest.approx(
        (100 + 7) ** 2 / (100**2 + 7), rel=0.1
    )  # ≈ 1.1: one dominant direction
    assert row["input_rms"] == pytest.approx(math.sqrt(107 / 8), rel=0.05)
    assert row["log10_condition"] == pytest.approx(math.log10(row["input_condition"]))


def test_activation_claims_report_distances_and_shares_without_a_verdict():
    from linrec.analysis.activation import activation_claims

    distances = pd.DataFrame(
        {
            "kind": ["family, same activation", "seed", "family, other activation"],
            "a": ["gpt2", "gpt2", "gpt2"],
            "b": ["neox", "gpt2-seed1", "llama"],
            "distance": [0.2, 0.05, 0.4],
        }
    )
    shares = {"GELU": grid_shares(grid_of(np.tile(np.linspace(0.2, 1, 6), (6, 1))))}
    families, seeds, weights = activation_claims(distances, shares)
    assert families.claim == "profile distance between two families of one activation"  # not named after GPT-2
    assert families.value == pytest.approx(0.2) and families.reported == paper.GPT2_VS_PYTHIA.value
    assert "two seeds of one architecture: 0.050" in families.note and seeds.value == pytest.approx(0.05)
    assert weights.claim == "cross-feeding: variance share of the weights (GELU)" and weights.value == pytest.approx(1)
    assert all(c.verdict is None for c in (families, seeds, weights))


def test_predictors_are_correlated_within_models_not_pooled():
    """A planted Simpson case: within each model R²_lin rises with the statistic, but the model with the larger
    values has the lower R²_lin, so the pooled correlation is negative."""
    rank = np.arange(6.0)
    table = pd.DataFrame(
        {
            "model": ["A"] * 6 + ["B"] * 6,
            "r2_lin": np.r_[0.8 + 0.02 * rank, 0.3 + 0.02 * rank],
            "input_rms": np.r_[rank, 10 + rank],
        }
    )
    row = predictor_table(table, columns=["input_rms"]).loc["input_rms"]
    assert row["spearman r within models"] == pytest.approx(np.tanh(np.arctanh(1 - 6 / (6**3 - 6))))
    assert row["pooled r (not used)"] < -0.4 and row["per model"] == "A +1.00, B +1.00" and row["blocks"] == 12
    with pytest.raises(LinrecError, match="at least 4 blocks"):
        predictor_table(table.groupby("model").head(3), columns=["input_rms"])
