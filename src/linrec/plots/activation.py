"""Figures of chapter 3: how far apart profiles are, the inputs each block sees, and cross-feeding.

Every function takes the tidy tables of :mod:`linrec.analysis.identity`, :mod:`linrec.analysis.activation`
or :func:`linrec.interventions.crossfeed.crossfeed_grid` (one row per block, pair or cell) and returns a
matplotlib Figure with labelled axes, laid out and coloured as the depth figures of :mod:`linrec.plots.depth`
(:mod:`linrec.plots._curves`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from linrec.analysis.activation import NORMALISED
from linrec.analysis.learned import MATCHED, WEIGHTS
from linrec.plots._columns import require
from linrec.plots._curves import BLOCK_LABEL, LINESTYLES, MARKERS, ordered, outer_ylabels, panel_grid
from linrec.plots._layout import SMALL, WIDTH, block_ticks, figure_legend


def crossfeed_heatmap(grid: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """R²_lin of every FFN (columns: model, block) on every block's inputs (rows), with model boundaries."""
    require(grid, ["input_model", "input_block", "weight_model", "weight_block", "r2_lin"], "the cross-feeding heatmap")
    models = ordered(grid, "input_model", order)
    wide = grid.pivot_table(
        index=["input_model", "input_block"], columns=["weight_model", "weight_block"], values="r2_lin", aggfunc="first"
    )
    keys = [(m, b) for m in models for b in sorted(grid.loc[grid["input_model"] == m, "input_block"].unique())]
    wide = wide.loc[keys, keys]
    size = min(WIDTH - 1.0, 0.3 * len(keys) + 3)  # square cells; past the column's width the labels get smaller
    fig, ax = plt.subplots(figsize=(size + 1.0, size + 0.6))
    labels = [f"{m} · {b}" for m, b in keys]
    sns.heatmap(
        wide.to_numpy(),
        ax=ax,
        cmap="viridis",
        vmin=min(0.0, float(np.nanmin(wide.to_numpy()))),
        vmax=1,
        xticklabels=labels,
        yticklabels=labels,
        cbar_kws={"label": "cross-fed R²_lin"},
        square=True,
    )
    edges = np.cumsum([sum(1 for k in keys if k[0] == m) for m in models])[:-1]
    for e in edges:
        ax.axhline(e, color="white", lw=2)
        ax.axvline(e, color="white", lw=2)
    ax.set(
        xlabel="FFN that runs (model · block): the weights",
        ylabel="whose captured inputs (model · block)",
        title="Cross-feeding: block j's FFN on block i's inputs\n(diagonal: a block on its own inputs)",
    )
    ax.tick_params(labelsize=SMALL if len(keys) <= 24 else 6)
    fig.tight_layout()
    return fig


def distance_figure(distances: pd.DataFrame, kinds: Sequence[str] | None = None) -> Figure:
    """RMS distance between pairs of depth profiles, by what separates them (one dot per pair, bar = mean)."""
    require(distances, ["kind", "distance"], "the distance figure")
    order = ordered(distances, "kind", kinds)
    fig, ax = plt.subplots(figsize=(WIDTH, 0.55 * len(order) + 1.6))
    sns.barplot(data=distances, y="kind", x="distance", order=order, color="0.85", errorbar=None, ax=ax)
    sns.stripplot(
        data=distances,
        y="kind",
        x="distance",
        order=order,
        hue="kind",
        hue_order=order,
        size=7,
        ax=ax,
        legend=False,
        jitter=0.15,
    )
    ax.set(
        xlabel="RMS difference of R²_lin over blocks",
        ylabel="what separates the two profiles",
        title="How far apart are two depth profiles?",
    )
    fig.tight_layout()
    return fig


def normalisation_figure(table: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """One panel per model: R²_lin per block on its own inputs and on them standardised / whitened."""
    require(
        table,
        ["model", "block", "normalisation", "r2_lin", "r2_lin_norm", "r2_lin_norm_std"],
        "the normalisation figure",
    )
    models = ordered(table, "model", order)
    fig, axes = panel_grid(len(models), height=4.2)
    for ax, model in zip(axes, models):
        g = table[table["model"] == model]
        own = g.drop_duplicates("block").sort_values("block")
        ax.plot(own["block"], own["r2_lin"], color="0.2", marker="o", lw=2, label="own inputs")
        for k, (kind, h) in enumerate(g.groupby("normalisation", sort=False), start=1):
            h = h.sort_values("block")
            ax.errorbar(
                h["block"],
                h["r2_lin_norm"],
                yerr=h["r2_lin_norm_std"],
                ls=LINESTYLES[k % 4],
                marker=MARKERS[k],
                capsize=3,
                label=f"inputs {NORMALISED.get(kind, kind)}",
            )
        ax.set(title=model, xlabel=BLOCK_LABEL, ylabel="R²_lin (k-fold mean ± std)")
        block_ticks(ax, g["block"].unique())
    outer_ylabels(axes)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=SMALL, loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.tight_layout(rect=(0, 0.06 if len(models) > 2 else 0.1, 1, 1))
    return fig


def conditioning_figure(table: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """R²_lin of every block against its input conditioning (log10 condition number) and effective rank."""
    require(table, ["model", "checkpoint", "r2_lin", "log10_condition", "effective_rank_in"], "the conditioning figure")
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 4.8), sharey=True, layout="constrained")
    hue_order = ordered(table, "model", order)
    for ax, x, label in zip(
        axes,
        ("log10_condition", "effective_rank_in"),
        ("log10 condition number\nof the input covariance", "effective rank of the inputs\n(participation ratio)"),
    ):
        sns.scatterplot(
            data=table,
            x=x,
            y="r2_lin",
            hue="model",
            hue_order=hue_order,
            style="checkpoint",
            s=60,
            ax=ax,
            legend=ax is axes[-1],
        )
        ax.set(xlabel=label, ylabel="held-out R²_lin")
    figure_legend(fig, axes[-1], ncol=5)
    fig.suptitle("Does the shape of a block's inputs predict its recoverability?")
    return fig


def controls_figure(table: pd.DataFrame, bands: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """One panel per model: R²_lin per block of the trained weights (k-fold mean ± std) against each control at
    each seed (one thin line each), with the scale-matched control's prediction band shaded and the blocks whose
    trained value leaves it ringed. ``table``: :func:`linrec.analysis.learned.control_tables` of each model
    (with a ``model`` column); ``bands``: their :func:`linrec.analysis.learned.control_bands`."""
    require(table, ["model", "block", "r2_lin", "r2_lin_std", "weights", "seed"], "a control table")
    require(bands, ["model", "block", "trained", "low", "high", "departs"], "the control bands")
    models = ordered(table, "model", order)
    kinds = [k for k in WEIGHTS.values() if k in set(table["weights"])]
    colours = dict(zip(kinds, sns.color_palette(n_colors=len(kinds)), strict=True))
    wide = table["block"].nunique() > 12
    fig, axes = panel_grid(len(models), height=3.8 if wide else 3.4, cols=1 if wide else 2, sharey=False)
    for ax, model in zip(axes, models):
        rows, band = table[table["model"] == model], bands[bands["model"] == model].sort_values("block")
        ax.fill_between(band["block"], band["low"], band["high"], color=colours[MATCHED], alpha=0.2, lw=0,
                        label=f"{MATCHED}: 95% band for one more seed")  # fmt: skip
        for kind in kinds:
            runs = rows[rows["weights"] == kind]
            for i, (_, run) in enumerate(runs.groupby(runs["seed"].fillna(-1), sort=True)):
                run = run.sort_values("block")
                ax.errorbar(run["block"], run["r2_lin"], yerr=run["r2_lin_std"], capsize=2, marker="o", ms=3,
                            lw=2 if kind == WEIGHTS["final"] else 0.8, color=colours[kind],
                            label=kind if i == 0 else None)  # fmt: skip
        out = band[band["departs"]]
        ax.scatter(out["block"], out["trained"], s=110, facecolors="none", edgecolors="k", lw=1.2, zorder=5,
                   label="trained outside the band")  # fmt: skip
        if (rows["r2_lin"] < 0).any():  # only where a value is negative: elsewhere 0 would squash the curves
            ax.axhline(0, color="0.5", lw=0.8, zorder=0)
        ax.set(title=model, xlabel=BLOCK_LABEL, ylabel="R²_lin (k-fold mean ± std)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    outer_ylabels(axes, cols=1 if wide else 2)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=SMALL, loc="lower center", ncol=2, bbox_to_anchor=(0.5, 0.0),
               title="weights (one thin line per seed)", title_fontsize=SMALL, frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.1 if len(models) > 2 else 0.2, 1, 1))
    return fig
