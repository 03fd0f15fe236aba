"""Figures of chapter 5: ΔPPL per swap and kind, the frontier and the signal, on symlog axes."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.plots import compression as figures
from linrec.stats import correlation
from support.budget_steps import budget_steps


def swaps() -> pd.DataFrame:
    rows = [
        {"kind": k, "block": b, "delta_ppl": d, "ratio": r}
        for k, r, deltas in [("affine", 7.9, [0.1, -0.01, 2.0]), ("zero", float("inf"), [30.0, 0.0, 5.0])]
        for b, d in enumerate(deltas)
    ]
    return pd.DataFrame(rows)


def test_swap_figure_labels_ratios_and_uses_symlog():
    ax = figures.swap_figure(swaps()).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["affine (7.9× fewer numbers)", "zero (removed)"]
    assert ax.get_yscale() == "symlog" and "ΔPPL" in ax.get_ylabel()
    assert ax.get_ylim() == pytest.approx((-0.015, 45.0))  # the extremes with a margin, no empty decades beyond
    linthresh = ax.yaxis.get_transform().linthresh
    ticks = [t for t in ax.get_yticks() if -0.015 <= t <= 45]
    assert linthresh == 0.01 and ticks == [-0.01, 0.0, 0.01, 0.1, 1.0, 10.0]  # none inside the linear part but 0
    drawn = sorted(y for line in ax.get_lines() for y in line.get_ydata() if len(line.get_xdata()) == 3)
    assert drawn == sorted(swaps().delta_ppl)


def test_frontier_and_signal_figures():
    frontier = pd.DataFrame(
        {
            "step": [0, 1, 2],
            "block": pd.array([None, 2, 0], dtype="Int64"),
            "ffn_saved_fraction": [0.0, 0.4, 0.8],
            "delta_ppl": [0.0, 0.1, 3.0],
        }
    )
    ax = figures.frontier_figure(frontier).axes[0]
    assert [t.get_text() for t in ax.texts] == ["+2", "+0"]
    assert list(ax.get_lines()[0].get_xdata()) == [0.0, 40.0, 80.0]
    signal = pd.DataFrame({"model": ["a"] * 4, "r2_lin": [0.9, 0.5, 0.99, 0.7], "delta_ppl": [0.3, 2.0, 0.1, 0.5]})
    signal = signal.assign(delta_ppl_low=signal.delta_ppl - 0.05, delta_ppl_high=signal.delta_ppl * 2)
    rho = correlation(signal.r2_lin, signal.delta_ppl, "spearman")
    ax = figures.signal_figure(signal, rho).axes[0]
    assert "ρ = -1.00" in ax.get_title()
    assert list(ax.get_lines()[0].get_ydata()) == list(signal.delta_ppl)
    bars = [v for seg in ax.collections[0].get_segments() for v in (seg[0][1], seg[1][1])]  # each interval, drawn
    assert bars == pytest.approx([v for pair in zip(signal.delta_ppl_low, signal.delta_ppl_high) for v in pair])
    assert ax.get_ylim()[1] >= 4.0  # the axis spans the intervals, not only the points


def test_budget_figure_draws_each_model_its_left_out_step_and_the_budget():
    fig = figures.budget_figure(budget_steps(), 0.05)
    ax = fig.axes[0]
    assert "% of the model's perplexity" in ax.get_ylabel() and "numbers saved" in ax.get_xlabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(labels) == ["a (3 kept)", "b (1 kept)", "budget: 5 % of the perplexity"]
    hollow = [line for line in ax.lines if line.get_markerfacecolor() == "white" and len(line.get_xdata())]
    assert [list(line.get_xdata()) for line in hollow] == [[30.0, 35.0]]  # model a's steps over the budget
    assert [0.0, 10.0, 20.0, 25.0] in [list(line.get_xdata()) for line in ax.lines]  # the line joins the kept ones
    assert any(list(line.get_ydata()) == [5.0, 5.0] for line in ax.lines)  # the budget, in percent


def test_a_step_left_out_far_above_the_budget_is_drawn_at_the_top_of_the_axis():
    steps = budget_steps()
    steps.loc[5, ["delta_ppl", "relative"]] = [40.0, 4.0]  # model a's last step: +400 % of its perplexity
    ax = figures.budget_figure(steps, 0.05).axes[0]
    top = ax.get_ylim()[1]
    assert top < 50  # the budget's range, not the outlier's
    tops = [line for line in ax.lines if line.get_marker() == "^" and len(line.get_xdata())]
    assert [list(line.get_xdata()) for line in tops] == [[35.0]] and list(tops[0].get_ydata()) == [0.97 * top]
    assert "left out, above the axis (drawn at its top)" in [t.get_text() for t in ax.get_legend().get_texts()]
