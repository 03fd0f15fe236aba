"""Figures of the pruning chapter: the ρ heat map, scores against a cost, blocks dropped within the budget."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from linrec.errors import LinrecError
from linrec.plots import pruning as figures


def correlations() -> pd.DataFrame:
    return pd.DataFrame([
        {"score": s, "cost": c, "group": g, "rho": r}
        for g in ("combined", "m")
        for s, c, r in [("r2_lin", "affine", 0.4), ("r2_lin", "layer", 0.1), ("block_influence", "affine", 0.2),
                        ("block_influence", "layer", 0.9)]
    ])  # fmt: skip


def test_the_heat_map_shows_every_rho_of_its_group_with_the_scores_named():
    fig = figures.correlation_figure(correlations())
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["R²_lin", "Block Influence, layer"]
    assert sorted(t.get_text() for t in ax.texts) == ["0.10", "0.20", "0.40", "0.90"]
    assert "ρ" in fig.axes[1].get_ylabel() and "ΔPPL" in ax.get_xlabel()
    with pytest.raises(LinrecError, match="group 'other'"):
        figures.correlation_figure(correlations(), group="other")


def test_scores_against_a_cost_one_panel_per_score():
    blocks = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "block": [0, 1, 2] * 2, "affine": [0.1, 2.0, 30.0] * 2,
                           "r2_lin": [0.9, 0.8, 0.5] * 2, "output_energy": [0.1, 0.2, 3.0] * 2})  # fmt: skip
    fig = figures.scores_figure(blocks, "affine", ["r2_lin", "output_energy"])
    panels = [ax for ax in fig.axes if ax.collections]
    assert [ax.get_xlabel() for ax in panels] == ["R²_lin", "output energy"]
    assert panels[0].get_yscale() == "symlog" and "ΔPPL" in panels[0].get_ylabel()
    assert "affine map" in fig._suptitle.get_text()


def test_the_budget_panels_count_the_blocks_of_each_order_and_model():
    budget = pd.DataFrame({"model": ["a", "a", "b", "b"] * 2, "mechanism": ["affine"] * 4 + ["layer"] * 4,
                           "order": ["measured", "r2_lin"] * 4, "blocks": [3, 1, 2, 2, 1, 0, 1, 1]})  # fmt: skip
    fig = figures.budget_figure(budget)
    left, right = [ax for ax in fig.axes if ax.texts]
    assert [t.get_text() for t in left.get_yticklabels()] == ["measured", "R²_lin"]
    assert [t.get_text() for t in left.get_xticklabels()] == ["a", "b"]
    assert [t.get_text() for t in left.texts] == ["3", "2", "1", "2"] and left.get_title() == "affine swap"
    assert [t.get_text() for t in right.texts] == ["1", "1", "0", "1"] and right.get_title() == "whole block removed"


def test_the_scores_by_block_break_where_the_table_skips_blocks():
    """Every score's line, for each model, has NaN on the blocks that model's rows skip: no segment crosses them."""
    table = pd.concat([
        pd.DataFrame({"model": "a", "block": [0, 1, 4], "r2_lin": [0.9, 0.8, 0.2], "output_energy": [1.0, 2.0, 3.0]}),
        pd.DataFrame({"model": "b", "block": [0, 1, 2, 3], "r2_lin": 0.5, "output_energy": 1.0}),
    ])  # fmt: skip
    fig = figures.scores_by_block(table)
    for ax, score in zip(fig.axes, ["r2_lin", "output_energy"], strict=True):
        a, b = ax.lines
        assert list(a.get_xdata()) == [0, 1, 2, 3, 4] and np.isnan(a.get_ydata()[[2, 3]]).all()
        assert list(a.get_ydata()[[0, 1, 4]]) == list(table[table.model == "a"][score])
        assert list(b.get_xdata()) == [0, 1, 2, 3] and not np.isnan(b.get_ydata()).any()
