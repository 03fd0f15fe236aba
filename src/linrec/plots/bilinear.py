"""Figures of chapter 4 (bilinear): what the closed form leaves over, per block and per output dim.

Every function takes a tidy table of :mod:`linrec.analysis.bilinear` and returns a matplotlib Figure
with labelled axes.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from linrec.analysis.bilinear_controls import FFN_CONTROLS
from linrec.plots._columns import R2_GLOBAL_LABEL, require
from linrec.plots._layout import SMALL, WIDTH, legend_below, line_labels, log_ticks
from linrec.stats import Correlation

NONLINEARITY_LABEL = "residual nonlinearity 1 − R²_lin (held-out)"
PROBES = {"gain": "bilinear probe (closed form frozen)", "gain_seeded": "seeded-poly (all trained)"}
AREA = 400.0  # marker area (points²) of the largest effective rank in the per-feature figure


def _against_nonlinearity(fig: Figure, ax: plt.Axes, ylabel: str, title: str) -> Figure:
    """The common frame of a per-block quantity against 1 - R²_lin: a zero line, labels, the legend outside."""
    ax.axhline(0, color="0.4", lw=1, ls="--", zorder=0)
    ax.set(xlabel=NONLINEARITY_LABEL, ylabel=ylabel, title=title)
    legend_below(ax, ncol=2)
    fig.tight_layout()
    return fig


def gain_figure(table: pd.DataFrame, correlations: Mapping[str, Correlation] | None = None) -> Figure:
    """Both probes' R² gain over the closed form against 1 - R²_lin, one point per (model, block).

    ``table``: :func:`linrec.analysis.bilinear.probe_sweep`; ``correlations``: {"gain" / "gain_seeded":
    Pearson r with CI}, printed in the legend.
    """
    require(table, ["model", "block", "nonlinearity", *PROBES], "the gain figure")
    long = table.melt(
        id_vars=["model", "block", "nonlinearity"], value_vars=list(PROBES), var_name="column", value_name="R² gain"
    )
    labels = {
        c: name + (f"\n{correlations[c]}" if correlations and c in correlations else "") for c, name in PROBES.items()
    }
    long["probe"] = long.column.map(labels)
    fig, ax = plt.subplots(figsize=(WIDTH, 5.6))
    sns.scatterplot(data=long, x="nonlinearity", y="R² gain", hue="model", style="probe", s=60, ax=ax)
    return _against_nonlinearity(
        fig, ax, "R² gain over the closed form (same test rows)", "What a rank-r bilinear term adds, block by block"
    )


def captured_figure(table: pd.DataFrame, controls: pd.DataFrame | None = None) -> Figure:
    """The share of the closed form's residual the bilinear probe captures, with its bootstrap interval, against
    1 - R²_lin, one point per (model, block); dotted lines: the planted controls' shares; shaded: the interval of
    the random-FFN controls, the reference each block is read against.

    ``table``: :func:`linrec.analysis.bilinear.probe_sweep`; ``controls``: its ``probe_controls``.
    """
    require(table, ["model", "nonlinearity", "captured", "captured_low", "captured_high"], "the captured figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 5.4))
    palette = dict(zip(table.model.unique(), sns.color_palette(n_colors=table.model.nunique()), strict=True))
    for model, group in table.groupby("model", sort=False):
        errors = [group.captured - group.captured_low, group.captured_high - group.captured]
        ax.errorbar(group.nonlinearity, group.captured, yerr=errors, fmt="o", ms=6, capsize=2, color=palette[model],
                    label=model)  # fmt: skip
    if controls is not None:
        ffn = controls[controls.kind.isin(FFN_CONTROLS)] if "kind" in controls.columns else controls.iloc[:0]
        if len(ffn) and {"captured_low", "captured_high"} <= set(ffn.columns):
            ax.axhspan(ffn.captured_low.min(), ffn.captured_high.max(), color="0.85", zorder=0,
                       label="random FFNs at this width")  # fmt: skip
        lines = [(float(captured), str(control)) for captured, control in zip(controls.captured, controls.control)]
        for captured, _ in lines:
            ax.axhline(captured, color="0.45", lw=1, ls=":", zorder=0)
        line_labels(ax, lines, color="0.35")
    return _against_nonlinearity(
        fig,
        ax,
        "share of the residual captured, gain / (1 − R²_lin)",
        "How much of what the closed form leaves is a rank-r quadratic\n(95% intervals over sequences and seeds)",
    )


def gate_figure(table: pd.DataFrame, gate_init: float) -> Figure:
    """Seeded-poly's fitted |g| against R²_lin (log scale), with the value it started from."""
    require(table, ["model", "r2_lin", "gate"], "the gate figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.6))
    sns.scatterplot(data=table, x="r2_lin", y="gate", hue="model", s=60, ax=ax)
    ax.axhline(gate_init, color="0.4", lw=1, ls="--", zorder=0)
    ax.text(
        0.01,
        gate_init,
        f" initial |g| = {gate_init:g}",
        transform=ax.get_yaxis_transform(),
        va="bottom",
        fontsize=SMALL,
        color="0.35",
    )
    ax.set(
        yscale="log",
        xlabel="R²_lin of the block (probe test rows)",
        ylabel="seeded-poly gate |g| after fitting",
        title="Is the bilinear term recruited or de-recruited?",
    )
    legend_below(ax)
    fig.tight_layout()
    return fig


def feature_figure(concentration: pd.DataFrame) -> Figure:
    """Median per-feature R² against global R²_lin, point area ∝ effective rank of the outputs."""
    require(concentration, ["model", "r2_lin", "r2_feature_median", "effective_rank_out"], "the per-feature figure")
    data = concentration.rename(columns={"effective_rank_out": "effective rank"})
    fig, ax = plt.subplots(figsize=(WIDTH, 5.6))
    top = float(data["effective rank"].max())
    sns.scatterplot(
        data=data,
        x="r2_lin",
        y="r2_feature_median",
        hue="model",
        size="effective rank",
        sizes=(0, AREA),
        size_norm=(0, top),
        alpha=0.75,
        ax=ax,
    )  # area ∝ effective rank
    low = float(min(data.r2_lin.min(), data.r2_feature_median.min()))
    ax.plot([low, 1], [low, 1], color="0.4", lw=1, ls="--", zorder=0, label="median = global")
    ax.set(
        xlabel=R2_GLOBAL_LABEL,
        ylabel="median per-feature R² (equal weight per output dim)",
        title="Global against per-feature recoverability",
    )
    legend_below(ax, ncol=4)
    fig.tight_layout()
    return fig


def dims_figure(dims: pd.DataFrame, top: int, title: str = "") -> Figure:
    """Each output dim of one block: its per-feature R² against its share of the output variance,
    the ``top`` highest-variance dims marked."""
    require(dims, ["share", "r2", "rank"], "the output-dims figure")
    data = dims.assign(group=np.where(dims["rank"] <= top, f"top {top} by variance", "other dims"))
    fig, ax = plt.subplots(figsize=(WIDTH, 4.6))
    sns.scatterplot(
        data=data, x="share", y="r2", hue="group", hue_order=[f"top {top} by variance", "other dims"], s=45, ax=ax
    )
    ax.set(
        xscale="log",
        xlabel="share of the block's output variance (log)",
        ylabel="per-feature held-out R²",
        title=title or "Which output dims carry the variance, and how linear they are",
    )
    log_ticks(ax)
    legend_below(ax)
    fig.tight_layout()
    return fig
