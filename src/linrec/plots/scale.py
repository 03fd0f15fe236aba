"""Figures of the chapter across scale (``10_scale``): R²_lin profiles at relative depth, one panel per model by
size, and the profiles' statistics against parameters (:mod:`linrec.analysis.scale`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from linrec.plots._columns import require
from linrec.plots._layout import SMALL, WIDTH, legend_below, symlog_axis

PARAMS_LABEL = "parameters (log scale)"


def _size(parameters: float) -> str:
    return f"{parameters / 1e9:.1f}B" if parameters >= 1e9 else f"{parameters / 1e6:.0f}M"


def depth_curves_figure(table: pd.DataFrame, summary: pd.DataFrame) -> Figure:
    """Held-out R²_lin of every block against its relative depth, one panel per model, smallest first (k-fold mean
    ± std; dashed: without the first position). ``table``: :func:`~linrec.analysis.scale.with_depth` rows;
    ``summary``: :func:`~linrec.analysis.scale.scale_summary` (the order and the sizes in the titles)."""
    require(table, ["model", "depth", "r2_lin", "r2_lin_std", "r2_lin_after_first"], "the profiles figure")
    models = list(summary["model"])
    cols = min(3, len(models))
    rows = -(-len(models) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 2.6 * rows + 0.8), sharex=True, sharey=True,
                             layout="constrained", squeeze=False)  # fmt: skip
    colours = sns.color_palette(n_colors=2)
    low = min(0.0, float(table["r2_lin"].min()))
    for ax, (_, row) in zip(axes.flat, summary.iterrows(), strict=False):
        g = table[table.model == row["model"]].sort_values("depth")
        ax.errorbar(g["depth"], g["r2_lin"], yerr=g["r2_lin_std"], color=colours[0], marker="o", markersize=3,
                    label="all rows")  # fmt: skip
        if g["r2_lin_after_first"].notna().any():
            ax.plot(g["depth"], g["r2_lin_after_first"].clip(lower=low), color=colours[1], linestyle="--",
                    marker=".", label="without the first position")  # fmt: skip
        ax.set_title(f"{row['model']} ({_size(row['parameters'])}, {row['blocks']} blocks)", fontsize=9)
        ax.set(ylim=(low - 0.05, 1.05))
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    fig.supxlabel("relative depth (block / last block)", fontsize=SMALL + 1)
    fig.supylabel("held-out R²_lin", fontsize=SMALL + 1)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncol=2, fontsize=SMALL, frameon=False)
    return fig


def trends_figure(summary: pd.DataFrame, swaps: pd.DataFrame) -> Figure:
    """Against parameters (log scale), one marker per model: left, the spread of R²_lin over blocks (range, IQR,
    standard deviation, largest adjacent jump); middle, the first position's share (mean over blocks and largest
    block) and the median R²_lin without the first position; right, the relative ΔPPL of swapping the block at each
    fixed relative depth (symmetric-log axis)."""
    require(summary, ["model", "parameters", "r2_range", "r2_iqr", "r2_sd", "max_jump"], "the trends figure")
    fig, axes = plt.subplots(1, 3, figsize=(WIDTH, 4.6), layout="constrained")
    line = {"marker": "o", "estimator": None, "errorbar": None}  # every model its own point, even at equal sizes
    spread = summary.melt(id_vars=["model", "parameters"], value_vars=["r2_range", "r2_iqr", "r2_sd", "max_jump"],
                          var_name="statistic", value_name="value")  # fmt: skip
    names = {"r2_range": "range", "r2_iqr": "interquartile range", "r2_sd": "standard deviation",
             "max_jump": "largest adjacent jump"}  # fmt: skip
    spread["statistic"] = spread["statistic"].map(names)
    sns.lineplot(data=spread, x="parameters", y="value", hue="statistic", ax=axes[0], **line)
    axes[0].set(xscale="log", xlabel=PARAMS_LABEL, ylabel="spread of R²_lin over blocks", title="spread")
    names = {"first_share_mean": "first position's share (mean over blocks)",
             "first_share_max": "first position's share (largest block)",
             "r2_after_first_median": "R²_lin without it (median block)"}  # fmt: skip
    sinks = summary.melt(id_vars=["model", "parameters"], value_vars=list(names), var_name="statistic",
                         value_name="value")  # fmt: skip
    sinks["statistic"] = sinks["statistic"].map(names)
    sns.lineplot(data=sinks.dropna(), x="parameters", y="value", hue="statistic", ax=axes[1], **line)
    axes[1].set(xscale="log", xlabel=PARAMS_LABEL, ylabel="share / R²_lin", title="the first position")
    if not swaps.empty:
        require(swaps, ["model", "depth", "relative"], "the trends figure")
        shown = swaps.merge(summary[["model", "parameters"]], on="model").assign(
            percent=lambda t: 100 * t["relative"], at=lambda t: t["depth"].map(lambda d: f"depth {d:.2f}")
        )
        sns.lineplot(data=shown, x="parameters", y="percent", hue="at", ax=axes[2], **line)
        symlog_axis(axes[2], shown["percent"])
    axes[2].set(xscale="log", xlabel=PARAMS_LABEL, ylabel="ΔPPL of the swap (% of PPL)", title="one block swapped")
    for ax in axes:  # powers of ten only, as 10M, 100M, 1.0B, at most three: a narrow panel has room for no more
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,), numticks=3))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _size(value)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        legend_below(ax, ncol=1)
    return fig
