"""Figures of the chapter "Which score says which block to drop?": the scores against what dropping a block costs.

Every function takes a table of :mod:`linrec.analysis.pruning` and returns a matplotlib Figure with labelled axes;
ΔPPL is drawn on a symmetric-log axis (:func:`linrec.plots._layout.symlog_axis`). What each replacement costs block
by block is :func:`linrec.plots.compression.swap_figure`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from linrec.analysis.pruning import TRUTHS
from linrec.errors import LinrecError
from linrec.plots._columns import require
from linrec.plots._curves import every_block
from linrec.plots._layout import SMALL, WIDTH, symlog_axis

LABELS = {
    "r2_lin": "R²_lin",
    "r2_lin_after_first": "R²_lin, first position out",
    "unexplained_energy": "unexplained energy",
    "output_energy": "output energy",
    "ffn_block_influence": "Block Influence, FFN",
    "ffn_angular_distance": "angular distance, FFN",
    "block_influence": "Block Influence, layer",
    "angular_distance": "angular distance, layer",
    "layer_linearity": "layer linearity",
}
"""How each score is named on an axis."""


def correlation_figure(correlations: pd.DataFrame, group: str | None = "combined") -> Figure:
    """Spearman's ρ of every score (read as a cost) with every cost, for one ``group`` (a model, or the within-model
    combination), as an annotated heat map: ρ near 1 where the score orders the blocks as their cost does; a note
    where there is no ρ (no model of four blocks or more)."""
    require(correlations, ["score", "cost", "group", "rho"], "the correlation figure", rows=False)
    rows = correlations[correlations.group == group]
    if correlations.empty:
        fig, ax = plt.subplots(figsize=(WIDTH, 2.0))
        ax.text(0.5, 0.5, "no model has the four blocks a rank correlation needs", ha="center", va="center")
        ax.set_axis_off()
        return fig
    require(rows, ["rho"], f"the correlation figure of group '{group}'")
    grid = rows.pivot(index="score", columns="cost", values="rho")
    grid = grid.reindex(index=[s for s in LABELS if s in grid.index], columns=[c for c in TRUTHS if c in grid.columns])
    fig, ax = plt.subplots(figsize=(WIDTH, 0.45 * len(grid) + 2.4))
    bar = {"label": "Spearman ρ (score read as a cost, ΔPPL)"}
    sns.heatmap(grid.rename(index=LABELS), vmin=-1, vmax=1, center=0, cmap="vlag", annot=True, fmt=".2f",
                annot_kws={"fontsize": SMALL}, cbar_kws=bar, ax=ax)  # fmt: skip
    ax.set(xlabel="cost of dropping the block alone (ΔPPL of …)", ylabel="score",
           title=f"Which score orders the blocks by cost ({group})")  # fmt: skip
    ax.tick_params(axis="x", rotation=90)
    ax.tick_params(axis="y", rotation=0)
    fig.tight_layout()
    return fig


def scores_figure(blocks: pd.DataFrame, cost: str, scores: Sequence[str]) -> Figure:
    """Each of ``scores`` (one panel each) against one ``cost`` (ΔPPL of each block dropped alone, symlog), one
    point per block, colour by model."""
    require(blocks, ["model", "block", cost, *scores], "the scores figure")
    columns = 3
    rows = math.ceil(len(scores) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(WIDTH, 2.5 * rows + 0.8), sharey=True, squeeze=False)
    models = list(dict.fromkeys(blocks.model))
    colours = dict(zip(models, sns.color_palette(n_colors=len(models)), strict=True))
    for ax, score in zip(axes.flat, scores):
        for model in models:
            part = blocks[blocks.model == model]
            ax.scatter(part[score], part[cost], s=18, color=colours[model], label=model, alpha=0.85)
        symlog_axis(ax, blocks[cost])
        ax.set_xlabel(LABELS.get(score, score), fontsize=SMALL)
        ax.tick_params(labelsize=SMALL)
    for ax in axes.flat[len(scores) :]:
        ax.remove()
    for ax in axes[:, 0]:
        ax.set_ylabel("ΔPPL, symlog", fontsize=SMALL)
    fig.suptitle(f"Scores against the cost of {TRUTHS.get(cost, cost)}")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(models), 4), fontsize=SMALL, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def budget_figure(budget: pd.DataFrame) -> Figure:
    """Blocks each order drops before the joint ΔPPL passes the budget: one annotated panel per mechanism (the FFN
    swapped for its affine map, the whole block removed), orders in rows, models in columns; the order that measures
    each block's own cost first is the reference."""
    require(budget, ["model", "mechanism", "order", "blocks"], "the budget figure")
    mechanisms = [m for m in TRUTHS if m in set(budget.mechanism)]
    models = list(dict.fromkeys(budget.model))
    orders = list(dict.fromkeys(budget.order))
    fig, axes = plt.subplots(1, len(mechanisms), figsize=(WIDTH, 0.36 * len(orders) + 2.6), sharey=True,
                             squeeze=False)  # fmt: skip
    top = max(1, int(budget.blocks.max()))
    for ax, mechanism in zip(axes[0], mechanisms, strict=True):
        grid = budget[budget.mechanism == mechanism].pivot(index="order", columns="model", values="blocks")
        grid = grid.reindex(index=orders, columns=models).rename(index=lambda o: LABELS.get(o, o))
        sns.heatmap(grid, vmin=0, vmax=top, cmap="Blues", annot=True, fmt=".0f", cbar=False, ax=ax,
                    annot_kws={"fontsize": SMALL}, linewidths=0.5)  # fmt: skip
        ax.set(xlabel="", ylabel="", title="affine swap" if mechanism == "affine" else "whole block removed")
        ax.tick_params(axis="x", rotation=90, labelsize=SMALL)
        ax.tick_params(axis="y", rotation=0)
    axes[0][0].set_ylabel("order of the blocks (cheapest first)")
    fig.suptitle("Blocks dropped before the joint ΔPPL passes the budget")
    fig.tight_layout()
    return fig


def scores_by_block(table: pd.DataFrame, title: str | None = None) -> Figure:
    """Every score a measurement table holds (:data:`LABELS`), one panel each, against the block, one line per model
    (``linrec plot --scores``), broken where the table skips blocks. A LinrecError where the table holds none (a
    table measured before them, or of a stream the library cannot see)."""
    require(table, ["block"], "the scores figure")
    scores = [s for s in LABELS if s in table and table[s].notna().any()]
    if not scores:
        raise LinrecError("the table holds no scores: measure it again with this linrec (linrec measure --out)")
    models = list(dict.fromkeys(table.model)) if "model" in table else [""]
    columns = 3
    rows = math.ceil(len(scores) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(WIDTH, 2.3 * rows + 0.9), sharex=True, squeeze=False)
    for ax, score in zip(axes.flat, scores):
        for model, colour in zip(models, sns.color_palette(n_colors=len(models)), strict=True):
            part = every_block(table if model == "" else table[table.model == model])  # gaps left open
            ax.plot(part.block, part[score], marker="o", ms=3, color=colour, label=model or None)
        ax.set_title(LABELS[score], fontsize=SMALL)
        ax.tick_params(labelsize=SMALL)
    for ax in axes.flat[len(scores) :]:
        ax.remove()
    for ax in axes[-1]:
        ax.set_xlabel("FFN block", fontsize=SMALL)
    if title:
        fig.suptitle(title)
    if models != [""]:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(len(models), 4), fontsize=SMALL, frameon=False)
    fig.tight_layout(rect=(0, 0.06 if models != [""] else 0, 1, 1))
    return fig
