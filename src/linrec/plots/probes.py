"""Figures of what lies beyond the closed form: bilinear probes, compression by swaps, and trained baselines.

Every function takes a tidy table of :mod:`linrec.analysis.residual`, :mod:`linrec.analysis.compression` or
:mod:`linrec.analysis.pitfall` and returns a matplotlib Figure with labelled axes. Quantities that span
orders of magnitude and may reach zero or below (ΔPPL) use a symmetric-log axis; gaps to the
closed-form ceiling use a log axis with values below ``floor`` drawn at the floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from linrec.errors import LinrecError
from linrec.stats import Correlation

NONLINEARITY_LABEL = "residual nonlinearity 1 − R²_lin (held-out)"
R2_LABEL = "global R²_lin (held-out, variance-weighted)"
DELTA_LABEL = "ΔPPL (swapped − original perplexity)"
PROBES = {"gain": "bilinear probe (closed form frozen)", "gain_seeded": "seeded-poly (all trained)"}
INPUTS = {False: "raw inputs", True: "whitened inputs"}
AREA = 400.0  # marker area (points²) of the largest effective rank in the per-feature figure


def _require(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise LinrecError(f"{what} needs the columns {missing}; the table has {', '.join(map(str, table.columns))}")
    if table.empty:
        raise LinrecError(f"{what} needs at least one row; the table is empty")


def _symlog(ax, values: pd.Series) -> None:
    """A symmetric-log y axis, linear within the smallest non-zero |value| (at least 1e-3), spanning
    the values with a factor-of-two margin (no empty negative half when every value is ≥ 0)."""
    nonzero = values.abs()[values.abs() > 0]
    linthresh = max(1e-3, float(nonzero.min())) if len(nonzero) else 1e-3
    ax.set_yscale("symlog", linthresh=linthresh)
    low, high = float(values.min()), float(values.max())
    ax.set_ylim(2 * low if low < 0 else -linthresh / 2, 2 * high if high > 0 else linthresh / 2)


def gain_figure(table: pd.DataFrame, correlations: Mapping[str, Correlation] | None = None) -> Figure:
    """Both probes' R² gain over the closed form against 1 - R²_lin, one point per (model, block).

    ``table``: :func:`linrec.analysis.residual.probe_sweep`; ``correlations``: {"gain" / "gain_seeded":
    Pearson r with CI}, printed in the legend.
    """
    _require(table, ["model", "block", "nonlinearity", *PROBES], "the gain figure")
    long = table.melt(id_vars=["model", "block", "nonlinearity"], value_vars=list(PROBES), var_name="column",
                      value_name="R² gain")
    labels = {c: name + (f"\n{correlations[c]}" if correlations and c in correlations else "") for c, name in PROBES.items()}
    long["probe"] = long.column.map(labels)
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    sns.scatterplot(data=long, x="nonlinearity", y="R² gain", hue="model", style="probe", s=60, ax=ax)
    ax.axhline(0, color="0.4", lw=1, ls="--", zorder=0)
    ax.set(xlabel=NONLINEARITY_LABEL, ylabel="R² gain over the closed form (same test rows)",
           title="What a rank-r bilinear term adds, block by block")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def gate_figure(table: pd.DataFrame, gate_init: float) -> Figure:
    """Seeded-poly's fitted |g| against R²_lin (log scale), with the value it started from."""
    _require(table, ["model", "r2_lin", "gate"], "the gate figure")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    sns.scatterplot(data=table, x="r2_lin", y="gate", hue="model", s=60, ax=ax)
    ax.axhline(gate_init, color="0.4", lw=1, ls="--", zorder=0)
    ax.text(0.01, gate_init, f" initial |g| = {gate_init:g}", transform=ax.get_yaxis_transform(), va="bottom",
            fontsize=8, color="0.35")
    ax.set(yscale="log", xlabel="R²_lin of the block (probe test rows)", ylabel="seeded-poly gate |g| after fitting",
           title="Is the bilinear term recruited or de-recruited?")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def feature_figure(concentration: pd.DataFrame) -> Figure:
    """Median per-feature R² against global R²_lin, point area ∝ effective rank of the outputs."""
    _require(concentration, ["model", "r2_lin", "r2_feature_median", "effective_rank_out"], "the per-feature figure")
    data = concentration.rename(columns={"effective_rank_out": "effective rank"})
    fig, ax = plt.subplots(figsize=(7.5, 5))
    top = float(data["effective rank"].max())
    sns.scatterplot(data=data, x="r2_lin", y="r2_feature_median", hue="model", size="effective rank",
                    sizes=(0, AREA), size_norm=(0, top), alpha=0.75, ax=ax)  # area ∝ effective rank
    low = float(min(data.r2_lin.min(), data.r2_feature_median.min()))
    ax.plot([low, 1], [low, 1], color="0.4", lw=1, ls="--", zorder=0, label="median = global")
    ax.set(xlabel=R2_LABEL, ylabel="median per-feature R² (equal weight per output dim)",
           title="Global against per-feature recoverability")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def dims_figure(dims: pd.DataFrame, top: int, title: str = "") -> Figure:
    """Each output dim of one block: its per-feature R² against its share of the output variance,
    the ``top`` highest-variance dims marked."""
    _require(dims, ["share", "r2", "rank"], "the output-dims figure")
    data = dims.assign(group=np.where(dims["rank"] <= top, f"top {top} by variance", "other dims"))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    sns.scatterplot(data=data, x="share", y="r2", hue="group", hue_order=[f"top {top} by variance", "other dims"],
                    s=45, ax=ax)
    ax.set(xscale="log", xlabel="share of the block's output variance (log)", ylabel="per-feature held-out R²",
           title=title or "Which output dims carry the variance, and how linear they are")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def swap_figure(swaps: pd.DataFrame) -> Figure:
    """ΔPPL of each block swapped alone, one line per replacement kind (legend: its parameter ratio)."""
    _require(swaps, ["kind", "block", "delta_ppl", "ratio"], "the swap figure")
    ratios = swaps.groupby("kind", sort=False).ratio.median()
    label = {k: f"{k} ({'removed' if np.isinf(r) else f'{r:.1f}× fewer numbers'})" for k, r in ratios.items()}
    data = swaps.assign(replacement=swaps.kind.map(label))
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    sns.lineplot(data=data, x="block", y="delta_ppl", hue="replacement", style="replacement", markers=True,
                 dashes=False, ax=ax)
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    _symlog(ax, data.delta_ppl)
    ax.set(xlabel="FFN block swapped (alone)", ylabel=DELTA_LABEL + " (symlog)", xticks=sorted(data.block.unique()),
           title="One block at a time: what each replacement costs")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def frontier_figure(frontier: pd.DataFrame) -> Figure:
    """Cumulative share of FFN numbers saved against ΔPPL, blocks swapped in order of R²_lin."""
    _require(frontier, ["step", "block", "ffn_saved_fraction", "delta_ppl"], "the frontier figure")
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    x = 100 * frontier.ffn_saved_fraction
    ax.plot(x, frontier.delta_ppl, marker="o")
    for xi, yi, block in zip(x, frontier.delta_ppl, frontier.block):
        if not pd.isna(block):
            ax.annotate(f"+{int(block)}", (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=8)
    _symlog(ax, frontier.delta_ppl)
    ax.set(xlabel="FFN numbers saved, cumulative (% of all FFN blocks)", ylabel=DELTA_LABEL + " (symlog)",
           title="Greedy frontier: affine swaps added in order of R²_lin (+block)")
    fig.tight_layout()
    return fig


def signal_figure(swaps: pd.DataFrame, rho: Correlation | None = None) -> Figure:
    """Affine-swap ΔPPL against R²_lin, one point per (model, block); ``rho`` in the title."""
    _require(swaps, ["model", "r2_lin", "delta_ppl"], "the signal figure")
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    sns.scatterplot(data=swaps, x="r2_lin", y="delta_ppl", hue="model", s=60, ax=ax)
    ax.axhline(0, color="0.4", lw=1, zorder=0)
    _symlog(ax, swaps.delta_ppl)
    ax.set(xlabel=R2_LABEL, ylabel=DELTA_LABEL + ", affine swap (symlog)",
           title="Does R²_lin flag the unsafe swaps?" + (f"\nSpearman ρ = {rho.r:+.2f} [{rho.low:+.2f}, {rho.high:+.2f}]" if rho else ""))
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _gap(values: pd.Series, floor: float) -> pd.Series:
    return values.clip(lower=floor)


def curve_figure(curves: pd.DataFrame, tolerance: float = 0.01, floor: float = 1e-4) -> Figure:
    """Learning curves of the trained baselines: gap to the ceiling against steps (top) and seconds
    (bottom), one column per (model, block)."""
    _require(curves, ["model", "block", "optimizer", "whitened", "step", "seconds", "gap"], "the curve figure")
    panels = list(dict.fromkeys(zip(curves.model, curves.block)))
    data = curves.assign(inputs=curves.whitened.map(INPUTS), gap_shown=_gap(curves.gap, floor))
    fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels), 7), squeeze=False, sharey=True)
    for col, (model, block) in enumerate(panels):
        panel = data[(data.model == model) & (data.block == block)]
        condition = f", κ = {panel.input_condition.iloc[0]:.3g}" if "input_condition" in panel else ""
        for row, x in enumerate(("step", "seconds")):
            ax = axes[row, col]
            sns.lineplot(data=panel, x=x, y="gap_shown", hue="optimizer", style="inputs", ax=ax,
                         legend=(row == 0 and col == len(panels) - 1))
            ax.axhline(tolerance, color="0.4", lw=1, ls="--", zorder=0)
            ax.set(yscale="log", xlabel="optimiser steps" if x == "step" else "training wall time (s)",
                   ylabel=f"ceiling − held-out R² (log, ≥ {floor:g})", title=f"{model}, block {block}{condition}")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"Trained linear maps against the closed-form ceiling (dashed: tolerance {tolerance:g})")
    fig.tight_layout()
    return fig


def condition_figure(runs: pd.DataFrame, tolerance: float = 0.01, floor: float = 1e-4) -> Figure:
    """Final gap to the ceiling against the block's input condition number, per optimiser and inputs."""
    _require(runs, ["input_condition", "gap_final", "optimizer", "whitened"], "the condition figure")
    data = runs.assign(inputs=runs.whitened.map(INPUTS), gap_shown=_gap(runs.gap_final, floor))
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    sns.scatterplot(data=data, x="input_condition", y="gap_shown", hue="optimizer", style="inputs", s=70, ax=ax)
    ax.axhline(tolerance, color="0.4", lw=1, ls="--", zorder=0)
    ax.set(xscale="log", yscale="log", xlabel="condition number of the input covariance κ (log)",
           ylabel=f"ceiling − final held-out R² (log, ≥ {floor:g})",
           title=f"Where the trained map falls short (dashed: tolerance {tolerance:g})")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
