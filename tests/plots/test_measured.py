"""linrec.plots.measured: The figure of `linrec plot`: a measured table's depth profile, one panel per model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from linrec.errors import LinrecError
from linrec.plots.measured import measured_figure


def test_the_measured_figure_labels_its_axes():
    trained = pd.DataFrame({"block": [0, 1, 2], "r2_lin": [0.9, 0.5, 0.7], "r2_lin_std": 0.01,
                            "r2_feature_median": [0.2, 0.1, 0.3]})  # fmt: skip
    ax = measured_figure(trained, "t").axes[0]
    assert ax.get_xlabel() == "FFN block (depth)" and "fraction of variance" in ax.get_ylabel()
    assert len(ax.get_legend().get_texts()) == 2
    with pytest.raises(LinrecError, match="r2_feature_median"):
        measured_figure(trained.drop(columns="r2_feature_median"), "t")


def test_the_measured_figure_draws_one_panel_per_model_in_the_tables_order():
    one = pd.DataFrame({"block": [1, 0], "r2_lin": [0.5, 0.9], "r2_lin_std": 0.01, "r2_feature_median": [0.1, 0.2]})
    both = pd.concat([one.assign(model="b"), one.assign(model="a", r2_lin=[0.3, 0.4])])
    axes = measured_figure(both).axes
    assert [ax.get_title() for ax in axes] == ["b", "a"]
    assert list(axes[1].lines[0].get_ydata()) == [0.4, 0.3]  # block order, this model's rows only


def test_the_positions_after_the_first_are_drawn_where_the_table_has_them():
    trained = pd.DataFrame({"block": [0, 1], "r2_lin": [0.9, 0.2], "r2_lin_std": 0.01, "r2_feature_median": [0.2, 0.1],
                            "r2_lin_after_first": [0.9, 0.95]})  # fmt: skip
    ax = measured_figure(trained).axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "R²_lin after each sequence's first position" in texts and len(texts) == 3
    (after,) = [line for line in ax.lines if line.get_label().startswith("R²_lin after")]
    assert list(after.get_ydata()) == [0.9, 0.95]
    assert len(measured_figure(trained.assign(r2_lin_after_first=float("nan"))).axes[0].get_legend().get_texts()) == 2


MEASURED = [0, 5, 11, 12, 20, 28]
"""A subset of a 30-block model's blocks, as ``linrec measure --blocks`` measures: one pair of neighbours (11, 12)."""


def joined(line) -> list[tuple[float, float]]:
    """The (block, next block) pairs a line draws a segment between: both of its points finite."""
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    return [(x[i], x[i + 1]) for i in range(len(x) - 1) if np.isfinite(y[i]) and np.isfinite(y[i + 1])]


def test_blocks_a_table_skips_are_gaps_in_every_line_not_crossed():
    """A subset of blocks: each line (R²_lin with its error bars, the feature median, after the first position) has a
    point on every block from the first to the last, NaN where a block was not measured, so only the neighbours 11
    and 12 are joined; the markers are the measured values, the block axis its integer indices."""
    values = np.random.default_rng(0).uniform(size=(3, 6))
    table = pd.DataFrame({"block": MEASURED, "r2_lin": values[0], "r2_lin_std": 0.01, "r2_feature_median": values[1],
                          "r2_lin_after_first": values[2]})  # fmt: skip
    ax = measured_figure(table.sample(frac=1, random_state=0)).axes[0]  # rows in any order
    lines = [ax.containers[0].lines[0], *(line for line in ax.lines if not line.get_label().startswith("_"))]
    assert len(lines) == 3
    for line, column in zip(lines, ["r2_lin", "r2_feature_median", "r2_lin_after_first"], strict=True):
        assert list(line.get_xdata()) == list(range(29)) and joined(line) == [(11, 12)]
        y = np.asarray(line.get_ydata(), float)
        assert np.isnan(np.delete(y, MEASURED)).all() and list(y[MEASURED]) == list(table[column])
    bars = ax.containers[0].lines[2][0].get_segments()  # the error bars: one per measured block only
    assert [segment[0][0] for segment in bars if len(segment)] == MEASURED
    assert all(float(tick).is_integer() for tick in ax.get_xticks())


def test_a_table_of_every_block_is_drawn_as_one_unbroken_line():
    table = pd.DataFrame({"block": [2, 0, 1, 3], "r2_lin": [0.7, 0.9, 0.5, 0.6], "r2_lin_std": 0.01,
                          "r2_feature_median": [0.3, 0.2, 0.1, 0.4]})  # fmt: skip
    ax = measured_figure(table).axes[0]
    line = ax.containers[0].lines[0]
    assert list(line.get_xdata()) == [0, 1, 2, 3] and list(line.get_ydata()) == [0.9, 0.5, 0.7, 0.6]
    assert joined(line) == [(0, 1), (1, 2), (2, 3)]
