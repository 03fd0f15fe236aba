"""Figures of chapter 6 (the pitfall): trained linear baselines against the closed-form ceiling.

Every function takes a tidy table of :mod:`linrec.analysis.pitfall` and returns a matplotlib Figure
with labelled axes. Gaps to the closed-form ceiling use a log axis with values below ``floor``
drawn at the floor.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from linrec.analysis.pitfall import tuned_only
from linrec.plots._columns import require
from linrec.plots._layout import WIDTH, figure_legend, legend_below


def _gap(values: pd.Series, floor: float) -> pd.Series:
    return values.clip(lower=floor)


def curve_figure(curves: pd.DataFrame, tolerance: float = 0.01, floor: float = 1e-4) -> Figure:
    """Learning curves of the tuned baselines: gap to the ceiling against steps (top) and seconds
    (bottom), one column per (model, block)."""
    require(curves, ["model", "block", "optimizer", "inputs", "step", "seconds", "gap"], "the curve figure")
    curves = tuned_only(curves)
    panels = list(dict.fromkeys(zip(curves.model, curves.block)))
    data = curves.assign(gap_shown=_gap(curves.gap, floor))
    fig, axes = plt.subplots(2, len(panels), figsize=(WIDTH, 7.5), squeeze=False, sharey=True, layout="constrained")
    for col, (model, block) in enumerate(panels):
        panel = data[(data.model == model) & (data.block == block)]
        condition = f"\nκ = {panel.input_condition.iloc[0]:.3g}" if "input_condition" in panel else ""  # own line: fits
        for row, x in enumerate(("step", "seconds")):
            ax = axes[row, col]
            sns.lineplot(
                data=panel,
                x=x,
                y="gap_shown",
                hue="optimizer",
                style="inputs",
                ax=ax,
                legend=(row == 0 and col == len(panels) - 1),
            )
            ax.axhline(tolerance, color="0.4", lw=1, ls="--", zorder=0)
            ax.set(
                yscale="log",
                xlabel="optimiser steps" if x == "step" else "training wall time (s)",
                ylabel=f"ceiling − held-out R²\n(log, ≥ {floor:g})" if col == 0 else "",
                title=f"{model}, block {block}{condition}",
            )
    figure_legend(fig, axes[0, -1], ncol=4)
    fig.suptitle(f"Trained linear maps against the closed-form ceiling\n(dashed: tolerance {tolerance:g})")
    return fig


def condition_figure(runs: pd.DataFrame, tolerance: float = 0.01, floor: float = 1e-4) -> Figure:
    """Final gap of the tuned runs to the ceiling against the block's input condition number, per optimiser and
    inputs."""
    require(runs, ["input_condition", "gap_final", "optimizer", "inputs"], "the condition figure")
    tuned = tuned_only(runs)
    data = tuned.assign(gap_shown=_gap(tuned.gap_final, floor))
    fig, ax = plt.subplots(figsize=(WIDTH, 5.0))
    sns.scatterplot(data=data, x="input_condition", y="gap_shown", hue="optimizer", style="inputs", s=70, ax=ax)
    ax.axhline(tolerance, color="0.4", lw=1, ls="--", zorder=0)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="condition number of the input covariance κ (log)",
        ylabel=f"ceiling − final held-out R² (log, ≥ {floor:g})",
        title=f"Where the trained map falls short (dashed: tolerance {tolerance:g})",
    )
    legend_below(ax, ncol=4)
    fig.tight_layout()
    return fig
