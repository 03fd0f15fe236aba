"""Figures of chapter 6: learning curves and final gaps of the trained baselines, negative gaps included."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.analysis.pitfall import tuned_only
from linrec.errors import LinrecError
from linrec.plots import pitfall as figures
from support.drawn import points


def baseline_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    curves = pd.DataFrame(
        [
            {
                "model": "m",
                "block": b,
                "input_condition": k,
                "optimizer": o,
                "inputs": w,
                "tuned": tuned,
                "step": s,
                "seconds": s / 100,
                "gap": (g / (1 + s) - (0.05 if w == "whitened" else 0)) if tuned else 5.0,
            }
            for b, k in [(0, 10.0), (3, 1e4)]
            for o in ("sgd", "adam")
            for w in ("raw", "standardised", "whitened")
            for tuned in (True, False)
            for s, g in [(0, 1.0), (10, 1.0), (20, 1.0)]
        ]
    )
    runs = curves[curves.step == 20].rename(columns={"gap": "gap_final"})
    return curves, runs


@pytest.mark.slow
def test_curve_figure_has_steps_and_seconds_for_each_block_and_shows_negative_gaps():
    curves, _ = baseline_tables()
    fig = figures.curve_figure(curves, tolerance=0.01, floor=1e-4)
    axes = fig.axes
    assert len(axes) == 4 and all(ax.get_yscale() == "symlog" for ax in axes)
    assert [ax.get_xlabel() for ax in axes] == [
        "optimiser steps",
        "optimiser steps",
        "training wall time (s)",
        "training wall time (s)",
    ]
    assert "κ = 1e+04" in axes[1].get_title()
    lowest = min(min(line.get_ydata()) for ax in axes for line in ax.get_lines() if len(line.get_ydata()) > 2)
    assert lowest == pytest.approx(tuned_only(curves).gap.min()) and lowest < 0  # drawn where they are, not clipped
    highest = max(max(line.get_ydata()) for ax in axes for line in ax.get_lines() if len(line.get_ydata()) > 2)
    assert highest < 5.0  # runs at rates the tuning did not choose are not drawn
    quick = curves.assign(seconds=curves.seconds * 0.0625)  # a smoke run's milliseconds: "0.0125" labels
    assert all(len(ax.get_xticks()) <= 6 for ax in figures.curve_figure(quick).axes[2:])  # and legible (conftest)


def test_condition_figure():
    _, runs = baseline_tables()
    ax = figures.condition_figure(runs).axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "symlog") and len(points(ax)) == runs.tuned.sum()
    with pytest.raises(LinrecError, match="empty"):
        figures.condition_figure(runs.iloc[:0])
