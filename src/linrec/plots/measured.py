"""The figure of `linrec plot`: a measured table's depth profile, one panel per model."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from linrec.plots._columns import require
from linrec.plots._curves import BLOCK_LABEL, every_block
from linrec.plots._layout import WIDTH, legend_below


def measured_figure(table: pd.DataFrame, title: str | None = None) -> Figure:
    """R²_lin per block, variance-weighted with its k-fold std, beside the median over output features: a block
    whose variance sits in a few channels can score high on the first and low on the second. Where the table has
    it, R²_lin of the positions after each sequence's first (``r2_lin_after_first``) too: far from R²_lin where the
    first position's rows (the attention sink) dominate a block's variance, a block to swap only with that position
    kept apart. Blocks the table skips (a subset measured, ``--blocks 0,5,11``) are gaps in the lines, not crossed.

    A table of several models (a ``model`` column, as ``linrec measure`` writes) gets one panel per model, titled
    by the model; ``title`` heads the figure."""
    require(table, ["block", "r2_lin", "r2_lin_std", "r2_feature_median"], "a depth profile")
    models = list(dict.fromkeys(table["model"])) if "model" in table else [None]
    blue, orange, green = sns.color_palette(n_colors=3)
    after = "r2_lin_after_first" in table and bool(table["r2_lin_after_first"].notna().any())
    height = (4.6 if len(models) == 1 else 2.6 * len(models) + 1.2) + 0.35 * after  # (a third line in the legend)
    fig, axes = plt.subplots(len(models), 1, figsize=(WIDTH, height), sharey=True, squeeze=False)
    for ax, model in zip(axes[:, 0], models, strict=True):
        rows = every_block(table if model is None else table[table["model"] == model])  # gaps left open
        ax.errorbar(rows["block"], rows["r2_lin"], yerr=rows["r2_lin_std"], capsize=3, marker="o", ms=4, color=blue,
                    label="R²_lin, variance-weighted (k-fold mean ± std)")  # fmt: skip
        ax.plot(rows["block"], rows["r2_feature_median"], marker="s", ms=4, ls="--", color=orange,
                label="median over output features of their R²")  # fmt: skip
        if after:
            ax.plot(rows["block"], rows["r2_lin_after_first"], marker="^", ms=4, ls=":", color=green,
                    label="R²_lin after each sequence's first position")  # fmt: skip
        ax.axhline(0, color="0.5", lw=0.8, zorder=0)
        ax.set(xlabel=BLOCK_LABEL, ylabel="held-out R² (fraction of variance)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if model is not None and len(models) > 1:
            ax.set_title(str(model))
    legend_below(axes[-1, 0], ncol=1)
    if title is not None:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
