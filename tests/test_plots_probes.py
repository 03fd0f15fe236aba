"""Figures of chapters 4-6: what each draws is what its table holds (points, sizes, scales, labels)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from linrec.errors import LinrecError  # noqa: E402
from linrec.plots import probes as figures  # noqa: E402
from linrec.stats import correlation


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def sweep() -> pd.DataFrame:
    return pd.DataFrame({"model": ["a", "a", "b", "b", "b"], "block": [0, 1, 0, 1, 2],
                         "r2_lin": [0.99, 0.8, 0.95, 0.6, 0.9], "gain": [0.001, 0.01, 0.002, 0.03, 0.004],
                         "gain_seeded": [0.002, 0.02, 0.001, 0.04, 0.005], "gate": [0.01, 0.2, 0.02, 0.5, 0.08]}
                        ).assign(nonlinearity=lambda t: 1 - t.r2_lin)


def points(ax) -> np.ndarray:
    return np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets())])


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
    table = pd.DataFrame({"model": ["a", "a", "b"], "r2_lin": [0.99, 0.9, 0.7], "r2_feature_median": [0.5, 0.88, 0.69],
                          "effective_rank_out": [1.0, 8.0, 4.0]})
    ax = figures.feature_figure(table).axes[0]
    scatter = next(c for c in ax.collections if len(c.get_offsets()) == 3)
    sizes = scatter.get_sizes()
    assert sizes == pytest.approx(figures.AREA * table.effective_rank_out / 8.0)
    assert ax.get_xlabel().startswith("global R²_lin") and "median per-feature" in ax.get_ylabel()


def test_dims_figure_marks_the_top_dims():
    dims = pd.DataFrame({"dim": range(6), "share": [0.5, 0.2, 0.1, 0.1, 0.05, 0.05], "r2": [0.99, 0.9, 0.3, 0.2, 0.1, 0.0],
                         "rank": range(1, 7)})
    ax = figures.dims_figure(dims, top=2).axes[0]
    assert ax.get_xscale() == "log" and len(points(ax)) == 6
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["top 2 by variance", "other dims"]


def swaps() -> pd.DataFrame:
    rows = [{"kind": k, "block": b, "delta_ppl": d, "ratio": r}
            for k, r, deltas in [("affine", 7.9, [0.1, -0.01, 2.0]), ("zero", float("inf"), [30.0, 0.0, 5.0])]
            for b, d in enumerate(deltas)]
    return pd.DataFrame(rows)


def test_swap_figure_labels_ratios_and_uses_symlog():
    ax = figures.swap_figure(swaps()).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["affine (7.9× fewer numbers)", "zero (removed)"]
    assert ax.get_yscale() == "symlog" and "ΔPPL" in ax.get_ylabel()
    assert ax.get_ylim() == pytest.approx((-0.02, 60.0))  # twice the extremes, no empty decades beyond
    drawn = sorted(y for line in ax.get_lines() for y in line.get_ydata() if len(line.get_xdata()) == 3)
    assert drawn == sorted(swaps().delta_ppl)


def test_frontier_and_signal_figures():
    frontier = pd.DataFrame({"step": [0, 1, 2], "block": pd.array([None, 2, 0], dtype="Int64"),
                             "ffn_saved_fraction": [0.0, 0.4, 0.8], "delta_ppl": [0.0, 0.1, 3.0]})
    ax = figures.frontier_figure(frontier).axes[0]
    assert [t.get_text() for t in ax.texts] == ["+2", "+0"]
    assert list(ax.get_lines()[0].get_xdata()) == [0.0, 40.0, 80.0]
    signal = pd.DataFrame({"model": ["a"] * 4, "r2_lin": [0.9, 0.5, 0.99, 0.7], "delta_ppl": [0.3, 2.0, 0.1, 0.5]})
    rho = correlation(signal.r2_lin, signal.delta_ppl, "spearman")
    ax = figures.signal_figure(signal, rho).axes[0]
    assert "ρ = -1.00" in ax.get_title() and len(points(ax)) == 4


def baseline_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    curves = pd.DataFrame([{"model": "m", "block": b, "input_condition": k, "optimizer": o, "whitened": w,
                            "step": s, "seconds": s / 100, "gap": g / (1 + s) - (0.05 if w else 0)}
                           for b, k in [(0, 10.0), (3, 1e4)] for o in ("sgd", "adam") for w in (False, True)
                           for s, g in [(0, 1.0), (10, 1.0), (20, 1.0)]])
    runs = curves[curves.step == 20].rename(columns={"gap": "gap_final"})
    return curves, runs


def test_curve_figure_has_steps_and_seconds_for_each_block_with_a_floor():
    curves, _ = baseline_tables()
    fig = figures.curve_figure(curves, tolerance=0.01, floor=1e-4)
    axes = fig.axes
    assert len(axes) == 4 and all(ax.get_yscale() == "log" for ax in axes)
    assert [ax.get_xlabel() for ax in axes] == ["optimiser steps", "optimiser steps", "training wall time (s)",
                                                "training wall time (s)"]
    assert "κ = 1e+04" in axes[1].get_title()
    lowest = min(min(line.get_ydata()) for ax in axes for line in ax.get_lines() if len(line.get_ydata()) > 2)
    assert lowest == pytest.approx(1e-4)  # negative gaps (beyond the ceiling) sit on the floor


def test_condition_figure():
    _, runs = baseline_tables()
    ax = figures.condition_figure(runs).axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log") and len(points(ax)) == len(runs)
    with pytest.raises(LinrecError, match="empty"):
        figures.condition_figure(runs.iloc[:0])
