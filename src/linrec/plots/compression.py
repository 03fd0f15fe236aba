"""Figures of chapter 5 (compression): what swapping blocks for cheaper maps costs in perplexity.

Every function takes a tidy table of :mod:`linrec.analysis.compression` (or
:func:`linrec.interventions.perplexity.compression_frontier`) and returns a matplotlib Figure with
labelled axes. ΔPPL spans orders of magnitude and may reach zero or below, so it is drawn on a
symmetric-log axis (:func:`linrec.plots._layout.symlog_axis`); where the table has ``delta_ppl_low`` and
``delta_ppl_high`` (the bootstrap interval over evaluation windows) they are drawn as error bars.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from linrec.plots._columns import R2_GLOBAL_LABEL, require
from linrec.plots._curves import LINESTYLES, MARKERS
from linrec.plots._layout import SMALL, WIDTH, block_ticks, legend_below, symlog_axis
from linrec.stats import Correlation

DELTA_LABEL = "ΔPPL (swapped − original)"


def delta_errors(rows: pd.DataFrame) -> np.ndarray | None:
    """The ΔPPL interval of ``rows`` as matplotlib's (2, n) error-bar lengths, None without interval columns."""
    if not {"delta_ppl_low", "delta_ppl_high"} <= set(rows.columns):
        return None
    return np.vstack([rows.delta_ppl - rows.delta_ppl_low, rows.delta_ppl_high - rows.delta_ppl]).clip(min=0)


def _span(table: pd.DataFrame) -> pd.Series:
    """Every ΔPPL value the axis must show: the points and, where present, their intervals' ends."""
    columns = [c for c in ("delta_ppl", "delta_ppl_low", "delta_ppl_high") if c in table.columns]
    return pd.concat([table[c] for c in columns], ignore_index=True)


def _errorbar(ax: Axes, x: pd.Series, rows: pd.DataFrame, **style: object) -> None:
    ax.errorbar(x, rows.delta_ppl, yerr=delta_errors(rows), capsize=3, elinewidth=1, **style)  # type: ignore[arg-type]


def swap_figure(swaps: pd.DataFrame) -> Figure:
    """ΔPPL of each block swapped alone with its 95% interval, one line per replacement kind (each with its own
    marker and line style; legend: its parameter ratio)."""
    require(swaps, ["kind", "block", "delta_ppl", "ratio"], "the swap figure")
    ratios = swaps.groupby("kind", sort=False).ratio.median()
    fig, ax = plt.subplots(figsize=(WIDTH, 5.0))
    kinds = list(ratios.index)
    shift = 0.06 * (np.arange(len(kinds)) - (len(kinds) - 1) / 2)  # kinds side by side, so their bars do not overlap
    for k, (kind, colour) in enumerate(zip(kinds, sns.color_palette(n_colors=len(kinds)))):
        rows = swaps[swaps.kind == kind].sort_values("block")
        r = ratios[kind]
        label = f"{kind} ({'removed' if np.isinf(r) else f'{r:.1f}× fewer numbers'})"
        _errorbar(ax, rows.block + shift[k], rows, color=colour, marker=MARKERS[k % len(MARKERS)],
                  ls=LINESTYLES[k % len(LINESTYLES)], ms=6, label=label)  # fmt: skip
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    symlog_axis(ax, _span(swaps))
    ax.set(
        xlabel="FFN block swapped (alone)",
        ylabel=DELTA_LABEL + ", symlog",
        title="One block at a time: what each replacement costs",
    )
    block_ticks(ax, swaps.block.unique())
    legend_below(ax, ncol=2)
    fig.tight_layout()
    return fig


def frontier_figure(frontier: pd.DataFrame) -> Figure:
    """Cumulative share of FFN numbers saved against ΔPPL (with its 95% interval), blocks swapped in order of
    R²_lin."""
    require(frontier, ["step", "block", "ffn_saved_fraction", "delta_ppl"], "the frontier figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.4))
    x = 100 * frontier.ffn_saved_fraction
    _errorbar(ax, x, frontier, marker="o")
    for xi, yi, block in zip(x, frontier.delta_ppl, frontier.block):
        if not pd.isna(block):
            ax.annotate(f"+{int(block)}", (xi, yi), textcoords="offset points", xytext=(5, 5), fontsize=SMALL)
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    symlog_axis(ax, _span(frontier))
    ax.set(
        xlabel="FFN numbers saved, cumulative (% of all FFN blocks)",
        ylabel=DELTA_LABEL + ", symlog",
        title="Greedy frontier: affine swaps added in order of R²_lin (+block)",
    )
    fig.tight_layout()
    return fig


def signal_figure(swaps: pd.DataFrame, rho: Correlation | None = None) -> Figure:
    """Affine-swap ΔPPL (with its 95% interval) against R²_lin, one point per (model, block); ``rho`` (the
    within-model combination of :func:`linrec.analysis.compression.signal_correlation`) in the title."""
    require(swaps, ["model", "r2_lin", "delta_ppl"], "the signal figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.8))
    models = list(dict.fromkeys(swaps.model))
    for k, (model, colour) in enumerate(zip(models, sns.color_palette(n_colors=len(models)))):
        rows = swaps[swaps.model == model]
        _errorbar(ax, rows.r2_lin, rows, color=colour, marker=MARKERS[k % len(MARKERS)], ls="none", ms=7, label=model)
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    symlog_axis(ax, _span(swaps))
    ax.set(
        xlabel=R2_GLOBAL_LABEL,
        ylabel=DELTA_LABEL + ", affine swap, symlog",
        title="Does R²_lin flag the unsafe swaps?"
        + (f"\nwithin models: Spearman ρ = {rho.r:+.2f} [{rho.low:+.2f}, {rho.high:+.2f}]" if rho else ""),
    )
    legend_below(ax)
    fig.tight_layout()
    return fig


def budget_figure(steps: pd.DataFrame, budget: float) -> Figure:
    """Greedy choice under a relative budget, one line per model: the joint ΔPPL as a share of the model's
    perplexity (with its 95% interval) against the share of the model's numbers saved, step by step: the line joins
    the kept steps, a step left out (over the budget) is a hollow marker, and the budget is dashed. The axis shows the
    budget's range (three budgets, or the kept steps' intervals if higher): a step left out above it is drawn at its
    top as a hollow triangle, so one costly block does not flatten every line."""
    require(steps, ["model", "step", "model_saved_fraction", "relative", "kept", "ppl"], "the budget figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.8))
    models = list(dict.fromkeys(steps.model))
    kept = steps[steps.kept.astype(bool)]
    top = 1.1 * max(
        300 * budget, float((100 * kept.delta_ppl_high / kept.groupby("model").ppl.transform("first")).max())
    )
    above = False
    for k, (model, colour) in enumerate(zip(models, sns.color_palette(n_colors=len(models)))):
        every = steps[steps.model == model]
        rows, out = every[every.kept.astype(bool)], every[~every.kept.astype(bool)]
        base = float(rows.ppl.iloc[0])
        x, y = 100 * rows.model_saved_fraction, 100 * rows.relative
        errors = 100 / base * np.vstack([rows.delta_ppl - rows.delta_ppl_low, rows.delta_ppl_high - rows.delta_ppl])
        marker = MARKERS[k % len(MARKERS)]
        ax.errorbar(x, y, yerr=errors.clip(min=0), color=colour, marker=marker, ms=6, capsize=3, elinewidth=1,
                    ls=LINESTYLES[k % len(LINESTYLES)], label=f"{model} ({int(rows.kept.sum()) - 1} kept)")  # fmt: skip
        within, beyond = out[100 * out.relative <= top], out[100 * out.relative > top]
        ax.plot(100 * within.model_saved_fraction, 100 * within.relative, marker, ms=11, mfc="white", mec=colour,
                ls="none")  # fmt: skip
        ax.plot(100 * beyond.model_saved_fraction, [0.97 * top] * len(beyond), "^", ms=9, mfc="white", mec=colour,
                ls="none")  # fmt: skip
        above = above or not beyond.empty
    ax.axhline(100 * budget, color="0.3", ls="--", lw=1, label=f"budget: {100 * budget:g} % of the perplexity")
    if above:
        ax.plot(
            [], [], "^", ms=9, mfc="white", mec="0.3", ls="none", label="left out, above the axis (drawn at its top)"
        )
    ax.set_ylim(top=top)
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.set(
        xlabel="numbers saved, cumulative (% of the model's)",
        ylabel="joint ΔPPL (% of the model's perplexity)",
        title="Blocks added cheapest first, every step scored jointly",
    )
    legend_below(ax, ncol=2)
    fig.tight_layout()
    return fig
