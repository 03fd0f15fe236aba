"""Figures of the real pretrained model (:mod:`linrec.analysis.pretrained`): its depth profile."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from linrec.plots._columns import require
from linrec.plots._layout import WIDTH, legend_below
from linrec.plots.depth import BLOCK_LABEL


def profile_figure(table: pd.DataFrame, title: str) -> Figure:
    """One model's R²_lin per block, variance-weighted with its k-fold std, beside the median over output
    features: a block whose variance sits in a few channels can score high on the first and low on the second."""
    require(table, ["block", "r2_lin", "r2_lin_std", "r2_feature_median"], "a depth profile")
    table = table.sort_values("block")
    blue, orange = sns.color_palette(n_colors=2)
    fig, ax = plt.subplots(figsize=(WIDTH, 4.6))
    ax.errorbar(table["block"], table["r2_lin"], yerr=table["r2_lin_std"], capsize=3, marker="o", ms=4, color=blue,
                label="R²_lin, variance-weighted (k-fold mean ± std)")  # fmt: skip
    ax.plot(table["block"], table["r2_feature_median"], marker="s", ms=4, ls="--", color=orange,
            label="median over output features of their R²")  # fmt: skip
    ax.axhline(0, color="0.5", lw=0.8, zorder=0)
    ax.set(xlabel=BLOCK_LABEL, ylabel="held-out R² (fraction of variance)", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    legend_below(ax, ncol=1)
    fig.tight_layout()
    return fig
