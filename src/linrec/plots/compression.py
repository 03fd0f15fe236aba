"""Figures of chapter 5 (compression): what swapping blocks for cheaper maps costs in perplexity.

Every function takes a tidy table of :mod:`linrec.analysis.compression` (or
:func:`linrec.interventions.perplexity.compression_frontier`) and returns a matplotlib Figure with
labelled axes. ΔPPL spans orders of magnitude and may reach zero or below, so it is drawn on a
symmetric-log axis.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from linrec.plots._columns import R2_GLOBAL_LABEL, require
from linrec.stats import Correlation

DELTA_LABEL = "ΔPPL (swapped − original perplexity)"


def _symlog(ax: Axes, values: pd.Series) -> None:
    """A symmetric-log y axis, linear within the smallest non-zero |value| (at least 1e-3), spanning
    the values with a factor-of-two margin (no empty negative half when every value is ≥ 0)."""
    nonzero = values.abs()[values.abs() > 0]
    linthresh = max(1e-3, float(nonzero.min())) if len(nonzero) else 1e-3
    ax.set_yscale("symlog", linthresh=linthresh)
    low, high = float(values.min()), float(values.max())
    ax.set_ylim(2 * low if low < 0 else -linthresh / 2, 2 * high if high > 0 else linthresh / 2)


def swap_figure(swaps: pd.DataFrame) -> Figure:
    """ΔPPL of each block swapped alone, one line per replacement kind (legend: its parameter ratio)."""
    require(swaps, ["kind", "block", "delta_ppl", "ratio"], "the swap figure")
    ratios = swaps.groupby("kind", sort=False).ratio.median()
    label = {k: f"{k} ({'removed' if np.isinf(r) else f'{r:.1f}× fewer numbers'})" for k, r in ratios.items()}
    data = swaps.assign(replacement=swaps.kind.map(label))
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    sns.lineplot(
        data=data, x="block", y="delta_ppl", hue="replacement", style="replacement", markers=True, dashes=False, ax=ax
    )
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    _symlog(ax, data.delta_ppl)
    ax.set(
        xlabel="FFN block swapped (alone)",
        ylabel=DELTA_LABEL + " (symlog)",
        xticks=sorted(data.block.unique()),
        title="One block at a time: what each replacement costs",
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def frontier_figure(frontier: pd.DataFrame) -> Figure:
    """Cumulative share of FFN numbers saved against ΔPPL, blocks swapped in order of R²_lin."""
    require(frontier, ["step", "block", "ffn_saved_fraction", "delta_ppl"], "the frontier figure")
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    x = 100 * frontier.ffn_saved_fraction
    ax.plot(x, frontier.delta_ppl, marker="o")
    for xi, yi, block in zip(x, frontier.delta_ppl, frontier.block):
        if not pd.isna(block):
            ax.annotate(f"+{int(block)}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=8)
    _symlog(ax, frontier.delta_ppl)
    ax.set(
        xlabel="FFN numbers saved, cumulative (% of all FFN blocks)",
        ylabel=DELTA_LABEL + " (symlog)",
        title="Greedy frontier: affine swaps added in order of R²_lin (+block)",
    )
    fig.tight_layout()
    return fig


def signal_figure(swaps: pd.DataFrame, rho: Correlation | None = None) -> Figure:
    """Affine-swap ΔPPL against R²_lin, one point per (model, block); ``rho`` (the within-model combination of
    :func:`linrec.analysis.compression.signal_correlation`) in the title."""
    require(swaps, ["model", "r2_lin", "delta_ppl"], "the signal figure")
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    sns.scatterplot(data=swaps, x="r2_lin", y="delta_ppl", hue="model", s=60, ax=ax)
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    _symlog(ax, swaps.delta_ppl)
    ax.set(
        xlabel=R2_GLOBAL_LABEL,
        ylabel=DELTA_LABEL + ", affine swap (symlog)",
        title="Does R²_lin flag the unsafe swaps?"
        + (f"\nwithin models: Spearman ρ = {rho.r:+.2f} [{rho.low:+.2f}, {rho.high:+.2f}]" if rho else ""),
    )
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig
