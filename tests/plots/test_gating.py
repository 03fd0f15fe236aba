"""Figures of the gated blocks: ΔPPL against the share routed to the map, a panel per block with a band per rule and
the first position apart beside it; the largest share against the measurement's columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from linrec.errors import LinrecError
from linrec.plots import gating as figures
from linrec.plots.legibility import problems

SHARES = (0.25, 0.5, 0.9, 0.99, 1.0)


def curve(models=("a", "b"), blocks=(3, 11)) -> pd.DataFrame:
    return pd.DataFrame([
        {"model": m, "block": b, "rule": rule, "share": s, "routed": s, "base_ppl": 20.0,
         "delta_ppl": (k + 1) * s**8 * (2 if rule == "norm" else 1), "delta_ppl_low": 0.0,
         "delta_ppl_high": 3 * (k + 1) * s**8}
        for m in models for k, b in enumerate(blocks) for rule in ("norm", "logistic") for s in SHARES
    ])  # fmt: skip


def blocks(models=("a", "b"), which=(3, 11)) -> pd.DataFrame:
    return pd.DataFrame([
        {"model": m, "block": b, "first_apart": 0.4, "first_apart_low": 0.1, "first_apart_high": 0.9,
         "first_apart_routed": 1 - 1 / 128}
        for m in models for b in which
    ])  # fmt: skip


def test_the_curve_has_a_panel_per_block_a_line_and_band_per_rule_and_the_first_position_beside():
    fig = figures.curve_figure(curve(), blocks())
    panels = [ax for ax in fig.axes if ax.lines]
    assert [ax.get_title() for ax in panels] == ["a, block 3", "a, block 11", "b, block 3", "b, block 11"]
    ax = panels[1]
    norm, logistic = ax.lines[:2]
    assert list(norm.get_xdata()) == pytest.approx([1 - s for s in SHARES])  # drawn by the share left to the FFN
    assert list(norm.get_ydata()) == pytest.approx([2 * 2 * s**8 for s in SHARES])
    assert list(logistic.get_ydata()) == pytest.approx([2 * s**8 for s in SHARES])
    assert len(ax.collections) >= 2 and ax.get_yscale() == "symlog"  # a band per rule
    budget = [line for line in ax.lines if list(line.get_ydata()) == [0.2, 0.2]]
    assert budget and budget[0].get_linestyle() == "--"  # 1 % of perplexity 20
    first = [line for line in ax.lines if line.get_marker() == "D"]
    assert first and list(first[0].get_xdata()) == pytest.approx([1 / 128])
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["25", "50", "90", "99", "100"]
    low, high = ax.get_xlim()
    assert low > high  # more rows to the map to the right
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "norm gate",
        "logistic gate (d + 1 numbers)",
        "1% of perplexity",
        "first position apart",
    ]
    assert "% of rows routed to the map" in panels[-1].get_xlabel() and "ΔPPL" in panels[0].get_ylabel()
    assert problems(fig) == []


def test_the_curve_draws_without_the_first_position_and_refuses_a_table_without_its_columns():
    fig = figures.curve_figure(curve(models=("a",), blocks=(0,)))
    (ax,) = [ax for ax in fig.axes if ax.lines]
    assert not [line for line in ax.lines if line.get_marker() == "D"]
    with pytest.raises(LinrecError, match="delta_ppl_low"):
        figures.curve_figure(curve().drop(columns="delta_ppl_low"))


def test_the_delta_axis_is_linear_within_a_tenth_of_the_budget():
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    figures.delta_axis(ax, pd.Series([1e-6, -1e-5, 0.5, 80.0]), budget=0.2)
    assert ax.yaxis.get_transform().linthresh == pytest.approx(0.01)


def test_the_relation_figure_has_a_panel_per_measured_column_hollow_where_the_plain_swap_was_cheap():
    summary = pd.DataFrame({
        "model": ["a", "a", "b"], "block": [0, 1, 0], "family": ["gpt2", "gpt2", "llama"],
        "largest_share": [0.9, 1.0, 0.25], "hard": [True, False, True], "r2_lin": [0.5, 0.99, 0.7],
        "r2_lin_after_first": [0.4, 0.99, 0.6], "top_rows_share_after_first": [0.9, 0.01, 0.3],
        "first_position_share": [0.95, 0.01, 0.2],
    })  # fmt: skip
    fig = figures.relation_figure(summary)
    panels = [ax for ax in fig.axes if ax.collections]
    assert [ax.get_xlabel() for ax in panels] == list(figures.RELATED.values())
    filled = [np.asarray(c.get_offsets()) for c in panels[0].collections if len(c.get_offsets())]
    assert sorted(float(p[0, 0]) for p in filled) == [0.5, 0.7, 0.99]
    hollow = [c for c in panels[0].collections if len(c.get_offsets()) and not c.get_facecolor().any()]
    assert [float(c.get_offsets()[0, 0]) for c in hollow] == [0.99]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[:2] == ["a (GPT-2)", "b (Llama)"] and "plain swap within it" in texts
    assert "largest share routed" in panels[0].get_ylabel()
    assert problems(fig) == []
