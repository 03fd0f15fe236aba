"""Chapter 1's figures: they draw exactly the numbers they are given, on labelled axes."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from linrec.errors import LinrecError
from linrec.plots import method
from support.drawn import points


def test_pipeline_draws_eight_steps_joined_by_seven_arrows():
    ax = method.draw_pipeline().axes[0]
    assert len([t for t in ax.texts if t.get_bbox_patch() is not None]) == 8
    assert len([c for c in ax.get_children() if isinstance(c, matplotlib.text.Annotation)]) == 7


def test_mixture_figure_draws_the_measured_points_over_the_exact_curve():
    measured = pd.DataFrame({"alpha": [0.0, 0.5, 1.0], "r2_lin": [1.0, 0.6, -0.01], "r2_lin_std": [0.0, 0.02, 0.01]})
    exact = pd.DataFrame({"alpha": np.linspace(0, 1, 5), "r2_lin": [1.0, 0.9, 0.6, 0.3, 0.0]})
    ax = method.mixture_figure(measured, exact, folds=5, rows=6000).axes[0]
    curve = ax.get_lines()[0]
    assert np.allclose(curve.get_xdata(), exact.alpha) and np.allclose(curve.get_ydata(), exact.r2_lin)
    bars = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))
    assert np.allclose(bars.lines[0].get_ydata(), measured.r2_lin)
    assert "5-fold mean ± std, 6,000 rows" in [t.get_text() for t in ax.get_legend().get_texts()][1]
    assert ax.get_xlabel().startswith("α") and ax.get_ylabel() == "held-out R²_lin"
    with pytest.raises(LinrecError, match="r2_lin_std"):
        method.mixture_figure(measured.drop(columns="r2_lin_std"), exact, 5, 6000)


def test_gelu_map_colours_the_grid_and_marks_the_measured_points():
    scales, offsets = np.logspace(-1, 1, 4), np.linspace(-4, 2, 3)
    grid = np.arange(12.0).reshape(3, 4) / 12
    marked = pd.DataFrame({"scale": [0.2, 4.0], "offset": [-1.0, 1.5]})
    fig = method.gelu_map_figure(scales, offsets, grid, marked)
    ax = fig.axes[0]
    assert np.allclose(ax.collections[0].get_array().reshape(3, 4), grid)
    assert np.allclose(ax.collections[1].get_offsets(), marked.to_numpy())
    assert ax.get_xscale() == "log" and fig.axes[1].get_ylabel() == "R²_lin"  # the colour bar


def test_gelu_check_plots_measured_against_exact_with_the_diagonal():
    table = pd.DataFrame(
        {"scale": [0.2, 4.0, 1.5], "offset": [-1.0, 1.5, 0.0], "exact": [0.1, 0.9, 0.5], "measured": [0.09, 0.91, 0.5]}
    )
    ax = method.gelu_check_figure(table, rows=6000).axes[0]
    assert sorted(map(tuple, points(ax))) == sorted(zip(table.exact, table.measured))
    assert any(list(line.get_xdata()) == [0, 1] == list(line.get_ydata()) for line in ax.get_lines())
    assert "6,000 rows" in ax.get_ylabel()


def test_untrained_figure_keeps_the_full_scale():
    table = pd.DataFrame({"block": [0, 1, 2], "r2_lin": [0.974, 0.975, 0.973], "r2_lin_std": [1e-4, 2e-4, 1e-4]})
    ax = method.untrained_figure(table, "random init", title="T").axes[0]
    assert ax.get_ylim() == (0, 1.05) and ax.get_title() == "T"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["random init"]
    assert np.allclose(ax.get_lines()[0].get_ydata(), table.r2_lin)
