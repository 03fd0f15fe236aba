"""Figures of chapter 6 (the pitfall): trained linear baselines against the closed-form ceiling.

Every function takes a tidy table of :mod:`linrec.analysis.pitfall` and returns a matplotlib Figure
with labelled axes. Gaps to the closed-form fit use a symmetric-log axis, linear within ``floor`` of zero, so a
negative gap (a trained map that scores above the closed form on held-out rows: the closed form is the best fit
to the *training* rows, not a held-out ceiling) is drawn below zero, never clipped.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from linrec.analysis.pitfall import tuned_only
from linrec.plots._columns import require
from linrec.plots._layout import WIDTH, figure_legend, legend_below


def curve_figure(curves: pd.DataFrame, tolerance: float = 0.01, floor: float = 1e-4) -> Figure:
    """Learning curves of the tuned baselines: gap to the ceiling against steps (top) and seconds
    (bottom), one column per (model, block)."""
    require(curves, ["model", "block", "optimizer", "inputs", "step", "seconds", "gap"], "the curve figure")
    curves = tuned_only(curves)
    panels = list(dict.fromkeys(zip(curves.model, curves.block)))
    data = curves
    fig, axes = plt.subplots(2, len(panels), figsize=(WIDTH, 7.5), squeeze=False, sharey=True, layout="constrained")
    for col, (model, block) in enumerate(panels):
        panel = data[(data.model == model) & (data.block == block)]
        condition = f"\nκ = {panel.input_condition.iloc[0]:.3g}" if "input_condition" in panel else ""  # own line: fits
        for row, x in enumerate(("step", "seconds")):
            ax = axes[row, col]
            sns.lineplot(
                data=panel,
                x=x,
                y="gap",
                hue="optimizer",
                style="inputs",
                ax=ax,
                legend=(row == 0 and col == len(panels) - 1),
            )
            ax.axhline(tolerance, color="0.4", lw=1, ls="--", zorder=0)
            ax.axhline(0, color="0.6", lw=0.8, zorder=0)
            ax.set_yscale("symlog", linthresh=floor)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # a quarter of the column: room for four numbers
            ax.set(
                xlabel="optimiser steps" if x == "step" else "training wall time (s)",
                ylabel="",
                title=f"{model}, block {block}{condition}",
            )
    fig.supylabel(f"closed form − held-out R² (symmetric log, linear within ±{floor:g})")  # once, for both rows
    figure_legend(fig, axes[0, -1], ncol=4)
    fig.suptitle(f"Trained linear maps against the closed-form ceiling\n(dashed: tolerance {tolerance:g})")
    return fig


def condition_figure(runs: pd.DataFrame, tolerance: float = 0.01, floor: float = 1e-4) -> Figure:
    """Final gap of the tuned runs to the ceiling against the block's input condition number, per optimiser and
    inputs."""
    require(runs, ["input_condition", "gap_final", "optimizer", "inputs"], "the condition figure")
    tuned = tuned_only(runs)
    fig, ax = plt.subplots(figsize=(WIDTH, 5.0))
    sns.scatterplot(data=tuned, x="input_condition", y="gap_final", hue="optimizer", style="inputs", s=70, ax=ax)
    ax.axhline(tolerance, color="0.4", lw=1, ls="--", zorder=0)
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.set_yscale("symlog", linthresh=floor)
    ax.set(
        xscale="log",
        xlabel="condition number of the input covariance κ (log)",
        ylabel=f"closed form − final held-out R²\n(symmetric log, linear within ±{floor:g})",
        title=f"Where the trained map falls short (dashed: tolerance {tolerance:g})",
    )
    legend_below(ax, ncol=4)
    fig.tight_layout()
    return fig
