"""Figures of the real pretrained model (:mod:`linrec.analysis.pretrained`): its depth profile and its controls."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from linrec.plots._columns import require
from linrec.plots.depth import BLOCK_LABEL


def profile_figure(table: pd.DataFrame, title: str) -> Figure:
    """One model's R²_lin per block, variance-weighted with its k-fold std, beside the median over output
    features: a block whose variance sits in a few channels can score high on the first and low on the second."""
    require(table, ["block", "r2_lin", "r2_lin_std", "r2_feature_median"], "a depth profile")
    table = table.sort_values("block")
    blue, orange = sns.color_palette(n_colors=2)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.errorbar(table["block"], table["r2_lin"], yerr=table["r2_lin_std"], capsize=3, marker="o", ms=4, color=blue,
                label="R²_lin, variance-weighted (k-fold mean ± std)")  # fmt: skip
    ax.plot(table["block"], table["r2_feature_median"], marker="s", ms=4, ls="--", color=orange,
            label="median over output features of their R²")  # fmt: skip
    ax.axhline(0, color="0.5", lw=0.8, zorder=0)
    ax.set(xlabel=BLOCK_LABEL, ylabel="held-out R² (fraction of variance)", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def controls_figure(table: pd.DataFrame, title: str) -> Figure:
    """R²_lin per block of trained weights (k-fold mean ± std) against each control at each seed (one thin line
    each), from :func:`linrec.analysis.pretrained.control_profiles`."""
    require(table, ["block", "r2_lin", "r2_lin_std", "weights", "seed"], "a control table")
    kinds = list(dict.fromkeys(table["weights"]))
    colours = dict(zip(kinds, sns.color_palette(n_colors=len(kinds)), strict=True))
    fig, ax = plt.subplots(figsize=(10.5, 4.4))
    for kind in kinds:
        rows = table[table["weights"] == kind]
        for i, (_, run) in enumerate(rows.groupby(rows["seed"].fillna(-1), sort=True)):
            run = run.sort_values("block")
            ax.errorbar(run["block"], run["r2_lin"], yerr=run["r2_lin_std"], capsize=2, marker="o", ms=3,
                        lw=1.8 if kind == kinds[0] else 1, color=colours[kind],
                        label=kind if i == 0 else None)  # fmt: skip
    ax.axhline(0, color="0.5", lw=0.8, zorder=0)
    ax.set(xlabel=BLOCK_LABEL, ylabel="held-out R²_lin (k-fold mean ± std)", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title="weights\n(one line per seed)",
              title_fontsize=8)  # fmt: skip
    fig.tight_layout()
    return fig
