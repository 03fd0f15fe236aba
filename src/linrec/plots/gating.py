"""Figures of the section "The map for the many, the FFN for the few": what a gated block costs as more of its rows
go to the affine map, and how far a gate gets against what the measurement says of the block.

Every function takes a table of :mod:`linrec.experiment.gating` or :mod:`linrec.analysis.gating` and returns a
matplotlib Figure with labelled axes. The share routed to the map is drawn on an axis of a power of the share
left to the FFN (:func:`routed_axis`), so that 90 %, 99 % and 100 % stand apart; ΔPPL on a symmetric-log axis.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, NullLocator, PercentFormatter

from linrec.analysis.gating import BUDGET, family_name
from linrec.plots._columns import require
from linrec.plots._layout import SMALL, WIDTH, symlog_axis

RULES = {"norm": "norm gate", "logistic": "logistic gate (d + 1 numbers)"}
"""How each gate is named in a legend."""

FIRST = "first position apart"
"""The legend's name for the first-position rule (``first-apart:own``)."""

ROUTED_TICKS = (0.25, 0.5, 0.9, 0.99, 1.0)
"""The shares routed to the map the axis labels (in %)."""

RELATED = {
    "r2_lin": "R²_lin (every row)",
    "r2_lin_after_first": "R²_lin, first position out",
    "top_rows_share_after_first": "share of variance in the top rows, first position out",
    "first_position_share": "share of variance at the first position",
}
"""The measurement's columns the largest share is drawn against, with their axis labels."""


POWER = 0.4
"""The x axis draws the share left to the FFN raised to this power: 25 % and 50 % routed, and 99 % and 100 %, about
as far apart."""


def _forward(left: np.ndarray) -> np.ndarray:
    return np.power(np.clip(left, 0, None), POWER)


def _inverse(x: np.ndarray) -> np.ndarray:
    return np.power(np.clip(x, 0, None), 1 / POWER)


def routed_axis(ax: Axes) -> None:
    """``ax``'s x axis as the share of rows routed to the map, drawn by the share left to the FFN to the power
    :data:`POWER`
    and reversed, so that more rows go to the map to the right and 90 %, 99 % and 100 % stand apart; ticks at
    :data:`ROUTED_TICKS`."""
    ax.set_xscale("function", functions=(_forward, _inverse))
    ax.set_xlim(0.78, 0)
    ax.xaxis.set_major_locator(FixedLocator([1 - s for s in ROUTED_TICKS]))
    ax.xaxis.set_major_formatter(lambda value, _: f"{100 * (1 - value):.0f}")
    ax.xaxis.set_minor_locator(NullLocator())


def delta_axis(ax: Axes, values: pd.Series, budget: float) -> None:
    """A symmetric-log ΔPPL axis over ``values`` that is linear within about a tenth of ``budget`` (its nearest power
    of ten): a ΔPPL far inside the budget is noise around zero, not decades worth a tick each."""
    floor = 10.0 ** round(math.log10(budget / 10)) if budget > 0 else 1e-3
    v = values.to_numpy(dtype=float)
    v = np.where(np.abs(v) < floor, np.sign(v) * floor, v)  # (zero stays zero)
    symlog_axis(ax, np.append(v, floor))


def curve_figure(curve: pd.DataFrame, blocks: pd.DataFrame | None = None, columns: int = 3) -> Figure:
    """ΔPPL of each gated block (a panel per model and block) against the share of its rows routed to the map, a line
    per rule with its 95 % interval as a band, the budget of :data:`~linrec.analysis.gating.BUDGET` of perplexity as
    a dashed line, and, from ``blocks`` (:func:`~linrec.experiment.gating.gating_study`'s), the first position apart
    as a point with its interval."""
    require(curve, ["model", "block", "rule", "routed", "delta_ppl", "delta_ppl_low", "delta_ppl_high", "base_ppl"],
            "the gating curve")  # fmt: skip
    panels = list(dict.fromkeys(zip(curve.model, curve.block, strict=True)))
    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    height = 2.3 * rows + 1.0
    fig, axes = plt.subplots(rows, columns, figsize=(WIDTH, height), squeeze=False)
    rules = list(dict.fromkeys(curve.rule))
    colours = dict(zip(rules, sns.color_palette(n_colors=len(rules) + 1), strict=False))
    first_colour = sns.color_palette(n_colors=len(rules) + 1)[len(rules)]
    for ax, (model, block) in zip(axes.flat, panels, strict=False):
        part = curve[(curve.model == model) & (curve.block == block)]
        drawn = [part.delta_ppl_low, part.delta_ppl_high]
        for rule in rules:
            line = part[part.rule == rule].sort_values("routed")
            left = 1 - line.routed
            ax.fill_between(left, line.delta_ppl_low, line.delta_ppl_high, color=colours[rule], alpha=0.2, lw=0)
            ax.plot(left, line.delta_ppl, marker="o", ms=4, color=colours[rule], label=RULES.get(rule, rule))
        budget = BUDGET * float(part.base_ppl.iloc[0])
        ax.axhline(budget, color="0.4", ls="--", lw=1, label=f"{BUDGET:.0%} of perplexity")
        if blocks is not None:
            require(blocks, ["model", "block", "first_apart", "first_apart_low", "first_apart_high",
                             "first_apart_routed"], "the first position apart")  # fmt: skip
            own = blocks[(blocks.model == model) & (blocks.block == block)]
            for routed, cost, low, high in zip(own.first_apart_routed, own.first_apart, own.first_apart_low,
                                               own.first_apart_high, strict=True):  # fmt: skip
                below, above = max(0.0, float(cost) - float(low)), max(0.0, float(high) - float(cost))
                ax.errorbar([1 - float(routed)], [float(cost)], yerr=[[below], [above]], fmt="D", ms=5,
                            color=first_colour, capsize=2, label=FIRST)  # fmt: skip
            drawn += [own.first_apart_low, own.first_apart_high]
        delta_axis(ax, pd.concat([*drawn, pd.Series([budget])]), budget)
        routed_axis(ax)
        ax.set_title(f"{model}, block {int(block)}", fontsize=SMALL)
        ax.tick_params(labelsize=SMALL)
    for ax in axes.flat[len(panels) :]:
        ax.remove()
    for ax in axes[:, 0]:
        ax.set_ylabel("ΔPPL, symlog", fontsize=SMALL)
    for k, ax in enumerate(axes.flat[: len(panels)]):
        if k + columns >= len(panels):  # the lowest panel of its column
            ax.set_xlabel("% of rows routed to the map", fontsize=SMALL)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=SMALL, frameon=False)
    fig.suptitle("What a gated block costs as more of its rows go to the affine map")
    fig.tight_layout(rect=(0, 0.45 / height, 1, 1))
    return fig


def relation_figure(summary: pd.DataFrame) -> Figure:
    """The better gate's largest share routed within the budget against each measurement column of :data:`RELATED`
    (a panel each), a point per gated block, colour by model, hollow where the plain affine swap is within the
    budget already."""
    require(summary, ["model", "block", "largest_share", "hard", "family", *RELATED], "the relation figure")
    fig, axes = plt.subplots(2, 2, figsize=(WIDTH, 6.2), sharey=True, squeeze=False)
    models = list(dict.fromkeys(summary.model))
    colours = dict(zip(models, sns.color_palette(n_colors=len(models)), strict=True))
    for ax, (column, label) in zip(axes.flat, RELATED.items(), strict=True):
        for model in models:
            part = summary[summary.model == model]
            hard, easy = part[part.hard], part[~part.hard]
            ax.scatter(hard[column], hard.largest_share, s=30, color=colours[model])
            ax.scatter(easy[column], easy.largest_share, s=30, facecolors="none", edgecolors=colours[model])
        ax.set_xlabel(label, fontsize=SMALL)
        ax.set_ylim(-0.05, 1.05)
        ax.yaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
        if not column.startswith("r2_"):
            ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.tick_params(labelsize=SMALL)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"largest share routed, ΔPPL < {BUDGET:.0%}", fontsize=SMALL)
    families = summary.groupby("model", sort=False).family.first()
    handles = [Line2D([], [], ls="", marker="o", color=colours[m], label=f"{m} ({family_name(str(families[m]))})")
               for m in models]  # fmt: skip
    handles += [
        Line2D([], [], ls="", marker="o", color="0.3", label=f"plain swap over {BUDGET:.0%} of perplexity"),
        Line2D([], [], ls="", marker="o", markerfacecolor="none", color="0.3", label="plain swap within it"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=SMALL, frameon=False)
    fig.suptitle("How far a gate gets, against what the measurement says of the block")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig
