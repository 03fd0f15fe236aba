"""linrec.plots.measured: The figure of `linrec plot`: a measured table's depth profile, one panel per model."""

from __future__ import annotations

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
