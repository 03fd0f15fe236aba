"""Figures of chapter 4: what each draws is what its table holds (points, sizes, scales, labels)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from linrec.errors import LinrecError
from linrec.plots import bilinear as figures
from linrec.stats import correlation
from support.drawn import points


def sweep() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["a", "a", "b", "b", "b"],
            "block": [0, 1, 0, 1, 2],
            "r2_lin": [0.99, 0.8, 0.95, 0.6, 0.9],
            "gain": [0.001, 0.01, 0.002, 0.03, 0.004],
            "gain_seeded": [0.002, 0.02, 0.001, 0.04, 0.005],
            "gate": [0.01, 0.2, 0.02, 0.5, 0.08],
        }
    ).assign(nonlinearity=lambda t: 1 - t.r2_lin)


def test_gain_figure_draws_both_probes_and_the_correlations():
    table = sweep()
    corr = {"gain": correlation(table.gain, table.nonlinearity)}
    ax = figures.gain_figure(table, corr).axes[0]
    drawn = points(ax)
    assert len(drawn) == 2 * len(table)
    assert sorted(map(tuple, drawn)) == sorted(zip([*table.nonlinearity] * 2, [*table.gain, *table.gain_seeded]))
    assert ax.get_xlabel().startswith("residual nonlinearity") and "gain" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(str(corr["gain"]) in t for t in legend) and any(t.startswith("seeded-poly") for t in legend)
    with pytest.raises(LinrecError, match="gain_seeded"):
        figures.gain_figure(table.drop(columns="gain_seeded"))


def test_gate_figure_is_log_scaled_with_the_initial_gate():
    ax = figures.gate_figure(sweep(), 0.1).axes[0]
    assert ax.get_yscale() == "log" and len(points(ax)) == 5
    assert any(np.allclose(line.get_ydata(), 0.1) for line in ax.get_lines())


def test_feature_figure_marker_area_is_proportional_to_effective_rank():
    table = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "r2_lin": [0.99, 0.9, 0.7],
            "r2_feature_median": [0.5, 0.88, 0.69],
            "effective_rank_out": [1.0, 8.0, 4.0],
        }
    )
    ax = figures.feature_figure(table).axes[0]
    scatter = next(c for c in ax.collections if len(c.get_offsets()) == 3)
    sizes = scatter.get_sizes()
    assert sizes == pytest.approx(figures.AREA * table.effective_rank_out / 8.0)
    assert ax.get_xlabel().startswith("global R²_lin") and "median per-feature" in ax.get_ylabel()


def test_dims_figure_marks_the_top_dims():
    dims = pd.DataFrame(
        {
            "dim": range(6),
            "share": [0.5, 0.2, 0.1, 0.1, 0.05, 0.05],
            "r2": [0.99, 0.9, 0.3, 0.2, 0.1, 0.0],
            "rank": range(1, 7),
        }
    )
    ax = figures.dims_figure(dims, top=2).axes[0]
    assert ax.get_xscale() == "log" and len(points(ax)) == 6
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["top 2 by variance", "other dims"]


def test_captured_figure_draws_intervals_and_controls():
    table = pd.DataFrame({"model": ["a", "a", "b"], "nonlinearity": [0.1, 0.3, 0.2], "captured": [0.1, 0.2, 0.05],
                          "captured_low": [0.05, 0.15, 0.0], "captured_high": [0.15, 0.25, 0.1]})  # fmt: skip
    controls = pd.DataFrame(
        {"control": ["quadratic residual (rank 8)", "odd residual (rank 8)"], "captured": [0.97, 0.0]}
    )
    ax = figures.captured_figure(table, controls).axes[0]
    assert ax.get_xlabel() and "share of the residual" in ax.get_ylabel()
    assert sorted(t.get_text().strip() for t in ax.texts) == sorted(controls.control)
    near = pd.DataFrame({"control": ["gelu", "swiglu", "odd", "quadratic"], "captured": [1e-4, -2e-4, 0.0, 0.97]})
    crowded = figures.captured_figure(table, near).axes[0]  # three lines at 0: one label, not three over each other
    assert sorted(t.get_text().strip() for t in crowded.texts) == ["quadratic", "swiglu, odd, gelu"]
    assert sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == ":") == [0.0, 0.97]
    kinds = ["quadratic", "gelu-mlp", "swiglu-mlp", "odd"]
    bracket = pd.DataFrame(
        {
            "control": kinds,
            "kind": kinds,
            "captured": [0.97, 0.4, 0.3, 0.0],
            "captured_low": [0.95, 0.35, 0.25, -0.01],
            "captured_high": [0.99, 0.45, 0.33, 0.01],
        }
    )
    shaded = figures.captured_figure(table, bracket).axes[0]
    (band,) = [p for p in shaded.patches if p.get_label() == "random FFNs at this width"]
    # from the lowest FFN low end to the highest FFN high end
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx((0.25, 0.45))
    with pytest.raises(LinrecError, match="captured"):
        figures.captured_figure(table.drop(columns="captured"))
