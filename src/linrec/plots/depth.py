"""Figures of chapters 2, 7 and 8: R²_lin (and what goes with it) against FFN block, per model, checkpoint, corpus.

Every function takes the tidy tables of :mod:`linrec.analysis.depth` or :func:`linrec.analysis.positions.sink_table`
(one row per block) and returns a matplotlib Figure with labelled axes; error bars are the k-fold
standard deviation (``r2_lin_std``). Colours follow the active seaborn palette, one colour per model
throughout a chapter when ``order`` is the same. Chapters 1 and 3 draw their profiles with
:func:`curves_figure`; chapter 3's other figures (:mod:`linrec.plots.activation`) share their labels, line
styles and panel layout (:mod:`linrec.plots._curves`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from linrec.errors import LinrecError
from linrec.plots._columns import require
from linrec.plots._curves import (
    BLOCK_LABEL,
    LINESTYLES,
    MARKERS,
    R2_LABEL,
    curve_axes,
    ordered,
    outer_ylabels,
    panel_grid,
)
from linrec.plots._layout import SMALL, WIDTH, figure_legend, legend_below, symlog_axis

SMALL_MULTIPLES = 3
"""From this many models on, :func:`curves_figure` gives each its own panel: their lines would lie on each other."""


def curves_figure(
    table: pd.DataFrame, style: str | None = None, order: Sequence[str] | None = None, title: str = "R²_lin per block"
) -> Figure:
    """The depth curves of ``table``: a colour per model, a line style per value of ``style``; on one axes for one
    or two models, else one panel per model (shared R²_lin axis) so that profiles at the same height stay apart."""
    models = ordered(table, "model", order)
    colours = dict(zip(models, sns.color_palette(n_colors=len(models))))
    if len(models) < SMALL_MULTIPLES:
        fig, ax = plt.subplots(figsize=(WIDTH, 5.0))
        curve_axes(ax, table, style=style, hue_order=models, label="{hue} ({style})" if style else "{hue}")
        ax.set_title(title)
        legend_below(ax)
        fig.tight_layout()
        return fig
    cols = 2
    rows = -(-len(models) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(WIDTH, 2.4 * rows + 1.2), sharey=True, squeeze=False,
                             layout="constrained")  # fmt: skip
    axes = list(grid.ravel())
    for ax in axes[len(models) :]:
        ax.remove()
    for ax, model in zip(axes, models):
        curve_axes(ax, table[table["model"] == model], style=style, colours=colours, label="{style}" if style else "")
        ax.set_title(model, fontsize=SMALL + 1)
    for k, ax in enumerate(axes[: len(models)]):
        ax.set(xlabel=BLOCK_LABEL if k >= len(models) - cols else "", ylabel="")
    fig.supylabel(R2_LABEL, fontsize=SMALL + 2)  # once: a panel is shorter than the label
    fig.suptitle(title)
    if style:  # the line styles, once, in grey: the colour is the panel's model
        styles = ordered(table, style, None)
        handles = [Line2D([], [], color="0.35", ls=LINESTYLES[k % len(LINESTYLES)], marker=MARKERS[k % len(MARKERS)])
                   for k in range(len(styles))]  # fmt: skip
        fig.legend(handles, styles, loc="outside lower center", ncol=len(styles), fontsize=SMALL, frameon=False)
    return fig


def _reference_lines(ax: Axes, levels: Sequence[float], text: str | None) -> None:
    for level in levels:
        ax.axhline(level, color="0.55", lw=1, ls="--", zorder=0)
    if text:
        ax.text(0.99, min(levels), text, transform=ax.get_yaxis_transform(), ha="right", va="bottom",
                fontsize=SMALL, color="0.35")  # fmt: skip


def heterogeneity_reference_figure(table: pd.DataFrame, reference: Sequence[float] = (0.99, 0.3)) -> Figure:
    """This run's depth profiles (:func:`curves_figure`), with the paper's reported bounds as dashed lines in each
    panel (named once, in the title where there are several)."""
    title = "This run's R²_lin per block, beside the paper's reported range"
    fig = curves_figure(table, title=title)
    axes = [ax for ax in fig.axes if ax.get_lines()]
    named = "paper (reported): trained blocks span these bounds" if len(axes) == 1 else None
    for ax in axes:
        _reference_lines(ax, reference, named)
    if len(axes) > 1:
        fig.suptitle(f"{title}\n(dashed: the paper's reported bounds, {min(reference)} and {max(reference)})")
    return fig


def heterogeneity_figure(
    table: pd.DataFrame,
    swaps: pd.DataFrame,
    reference: Sequence[float] = (0.99, 0.3),
    order: Sequence[str] | None = None,
) -> Figure:
    """The paper's Fig. 2 layout: R²_lin per block per model above, zero-shot swap ΔPPL per block beneath.

    ``reference`` draws the paper's reported bounds as dashed lines (labelled "paper (reported)").
    ΔPPL is on a symmetric-log axis, since single blocks range from harmless to ruinous.
    """
    require(swaps, ["model", "block", "delta_ppl"], "the swap panel", rows=False)  # empty: no swaps run
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(WIDTH, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]},
                                      layout="constrained")  # fmt: skip
    curve_axes(top, table, hue_order=order)
    if reference:
        _reference_lines(
            top, reference, f"paper (reported): adjacent blocks from > {max(reference)} to < {min(reference)}"
        )
    top.set(xlabel="", title="Closed-form recoverability per block (this run, measured)")
    models = [m for m in ordered(table, "model", order) if m in set(swaps["model"])]
    colours = dict(zip(ordered(table, "model", order), sns.color_palette(n_colors=table["model"].nunique())))
    width = 0.8 / max(1, len(models))
    for k, model in enumerate(models):
        rows = swaps[swaps["model"] == model].sort_values("block")
        errors = None
        if {"delta_ppl_low", "delta_ppl_high"} <= set(rows.columns):
            errors = [rows["delta_ppl"] - rows["delta_ppl_low"], rows["delta_ppl_high"] - rows["delta_ppl"]]
        bottom.bar(rows["block"] + (k - (len(models) - 1) / 2) * width, rows["delta_ppl"], width, yerr=errors,
                   capsize=2, color=colours[model], error_kw={"elinewidth": 1}, label=model)  # fmt: skip
    bottom.axhline(0, color="0.3", lw=0.8)
    columns = [c for c in ("delta_ppl", "delta_ppl_low", "delta_ppl_high") if c in swaps.columns]
    symlog_axis(bottom, pd.concat([swaps[c] for c in columns]) if len(swaps) else pd.Series([0.0]))
    bottom.set(
        xlabel=BLOCK_LABEL,
        ylabel="ΔPPL, block → affine map",
        title="Zero-shot swap of each block alone (eval text, 95% interval)",
    )
    figure_legend(fig, top)
    return fig


def corpus_figure(
    table: pd.DataFrame,
    order: Sequence[str] | None = None,
    value: str = "r2_lin",
    error: str | None = "r2_lin_std",
    ylabel: str = R2_LABEL,
    title: str = "R²_lin per block on each corpus domain, each with its own held-out folds",
) -> Figure:
    """The paper's Fig. 5 layout: one panel per model, one line (colour) per corpus, of ``value`` per block."""
    require(table, ["model", "corpus"], "the corpus overlay")
    models = ordered(table, "model", order)
    corpora = ordered(table, "corpus", None)
    fig, axes = panel_grid(len(models))
    for ax, model in zip(axes, models):
        curve_axes(ax, table[table["model"] == model], hue="corpus", hue_order=corpora, value=value, error=error,
                   ylabel=ylabel if ylabel != R2_LABEL else "R²_lin (k-fold mean ± std)")  # fmt: skip
        ax.set_title(model)
    outer_ylabels(axes)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="corpus", fontsize=SMALL, title_fontsize=SMALL, loc="lower center",
               ncol=len(labels), bbox_to_anchor=(0.5, 0.0), frameon=False)  # fmt: skip
    fig.suptitle("\n".join(textwrap.wrap(title, 60)))
    fig.tight_layout(rect=(0, 0.12 if len(models) > 2 else 0.2, 1, 1))
    return fig


def _checkpoint_order(table: pd.DataFrame) -> list[str]:
    if "step" in table.columns and table["step"].notna().all():
        firsts = table.drop_duplicates("checkpoint").sort_values("step", kind="stable")
        return list(firsts["checkpoint"])
    return list(dict.fromkeys(table["checkpoint"]))


def training_heatmaps(table: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """One heatmap per model: R²_lin by block (rows) and checkpoint (columns, in training order), annotated."""
    require(table, ["model", "checkpoint", "block", "r2_lin"], "the training heatmap")
    models = ordered(table, "model", order)
    vmin = min(0.0, float(table["r2_lin"].min()))
    fig, axes = panel_grid(len(models), height=0.4 * table["block"].nunique() + 2.2, cols=1, sharey=False)
    for ax, model in zip(axes, models):
        g = table[table["model"] == model]
        cols = _checkpoint_order(g)
        steps = g.drop_duplicates("checkpoint").set_index("checkpoint")["step"] if "step" in g else {}
        labels = [
            f"{c} ({steps[c]})" if c in ("init", "final") and c in steps and pd.notna(steps[c]) else c for c in cols
        ]
        wide = g.pivot(index="block", columns="checkpoint", values="r2_lin")[cols]
        sns.heatmap(
            wide,
            ax=ax,
            vmin=vmin,
            vmax=1,
            cmap="viridis",
            annot=True,
            fmt=".2f",
            annot_kws={"fontsize": SMALL},
            cbar_kws={"label": "R²_lin"},
            xticklabels=labels,
        )
        ax.set(title=model, xlabel="checkpoint (optimiser step)", ylabel=BLOCK_LABEL)
        ax.tick_params(axis="x", labelrotation=45, labelsize=SMALL)
    fig.tight_layout()
    return fig


def training_lines(
    table: pd.DataFrame,
    losses: pd.DataFrame | None = None,
    loss_corpus: str | None = None,
    order: Sequence[str] | None = None,
) -> Figure:
    """One panel per model: R²_lin of each block against the optimiser step (symlog), with k-fold error bars.

    With ``losses`` (:func:`linrec.analysis.depth.training_losses`), the held-out loss of
    ``loss_corpus`` (default: the first) is drawn on a second axis, dashed grey.
    """
    require(table, ["model", "block", "step", "r2_lin", "r2_lin_std"], "the training lines")
    if table["step"].isna().any():
        raise LinrecError("every checkpoint needs an optimiser step to be placed on the training axis")
    models = ordered(table, "model", order)
    fig, axes = panel_grid(len(models), height=4.6, sharey=False)
    for ax, model in zip(axes, models):
        g = table[table["model"] == model].astype({"step": float})
        blocks = sorted(g["block"].unique())
        colours = sns.color_palette("rocket", n_colors=len(blocks))
        for colour, b in zip(colours, blocks):
            h = g[g["block"] == b].sort_values("step")
            ax.errorbar(
                h["step"],
                h["r2_lin"],
                yerr=h["r2_lin_std"],
                color=colour,
                marker="o",
                ms=4,
                capsize=2,
                label=f"block {b}",
            )
        symlog_axis(ax, g["step"], axis="x")
        ax.set(title=model, xlabel="optimiser step (symlog)", ylabel="R²_lin (k-fold mean ± std)")
        if losses is not None and not losses[losses["model"] == model].empty:
            ell = losses[losses["model"] == model]
            corpus = loss_corpus or ell["corpus"].iloc[0]
            ell = ell[ell["corpus"] == corpus].sort_values("step")
            twin = ax.twinx()
            twin.plot(ell["step"], ell["loss"], color="0.45", ls="--", lw=1.2, label=f"held-out loss ({corpus})")
            twin.set_ylabel(f"dashed: held-out loss\n{corpus} (nats/token)", color="0.45")
            twin.grid(False)
        legend_below(ax, ncol=2)
    fig.tight_layout()
    return fig


def drift_figure(drift: pd.DataFrame, order: Sequence[str] | None = None, reference: str = "final") -> Figure:
    """RMS distance of each checkpoint's profile to the ``reference`` profile against the step, one line per model."""
    column = "distance_to_" + reference
    require(drift, ["model", "step", column], "the drift figure")
    fig, ax = plt.subplots(figsize=(WIDTH, 4.2))
    models = ordered(drift, "model", order)
    for colour, model in zip(sns.color_palette(n_colors=len(models)), models):
        g = drift[drift["model"] == model].astype({"step": float}).sort_values("step")
        ax.plot(g["step"], g[column], marker="o", color=colour, label=model)
    symlog_axis(ax, drift["step"].astype(float), axis="x")
    ax.set(
        xlabel="optimiser step (symlog)",
        ylabel=f"RMS distance of R²_lin profile to {reference}",
        title=f"How far each checkpoint's profile is from the {reference} one",
    )
    legend_below(ax)
    fig.tight_layout()
    return fig


FLOOR = -1.0
"""Where the position figure clips R²_lin from below (a clipped point is labelled with its value)."""


def position_figure(table: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """R²_lin of every block on all rows and without the first position of each window (left; values below
    :data:`FLOOR` drawn at it and labelled), and the share of the output variance the first position carries
    against its share of rows (right), one line per model.

    ``table``: :func:`linrec.analysis.positions.sink_table` rows of one or more models.
    """
    require(table, ["model", "block", "r2_lin", "r2_lin_after_first", "first_position_share", "rows_first"],
            "the position figure")  # fmt: skip
    models = ordered(table, "model", order)
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 4.8), layout="constrained")
    long = table.melt(id_vars=["model", "block"], value_vars=["r2_lin", "r2_lin_after_first"], var_name="rows",
                      value_name="R²")  # fmt: skip
    long["rows"] = long.rows.map({"r2_lin": "all positions", "r2_lin_after_first": "without the first"})
    clipped = long[long["R²"] < FLOOR]
    long["R²"] = long["R²"].clip(lower=FLOOR)  # one block far below zero would flatten every other
    styles = list(dict.fromkeys(long["rows"]))
    sns.lineplot(data=long, x="block", y="R²", hue="model", hue_order=models, style="rows", style_order=styles,
                 markers=dict(zip(styles, ("o", "X"))), dashes=dict(zip(styles, ("", (4, 2)))), markersize=7,
                 ax=left)  # fmt: skip
    for _, row in clipped.iterrows():
        left.annotate(f"{row['R²']:.3g}", (row["block"], FLOOR), xytext=(0, 6), textcoords="offset points",
                      ha="center", fontsize=SMALL, color="0.3")  # fmt: skip
    left.set(xlabel="FFN block (depth)", ylabel="held-out R²_lin",
             title="R²_lin, with and without\nthe first position")  # fmt: skip
    sns.lineplot(data=table, x="block", y="first_position_share", hue="model", hue_order=models, marker="o", ax=right,
                 legend=False)  # fmt: skip
    right.axhline(float(table.rows_first.iloc[0]), color="0.4", lw=1, ls="--", zorder=0)
    right.text(0.01, float(table.rows_first.iloc[0]), f" their share of rows ({table.rows_first.iloc[0]:.1%})",
               transform=right.get_yaxis_transform(), va="bottom", fontsize=SMALL, color="0.35")  # fmt: skip
    right.set(xlabel="FFN block (depth)", ylabel="share of output variance",
              title="What the first\nposition carries")  # fmt: skip
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure_legend(fig, left)
    return fig


def convergence_figure(convergence: pd.DataFrame, order: Sequence[str] | None = None) -> Figure:
    """Held-out R²_lin against training rows per input dimension, one colour per model: the median over blocks
    (solid) and the lowest block (dashed), each fit on 1 to k-1 of the k folds.

    ``convergence``: :func:`linrec.analysis.convergence.row_convergence` rows with ``model`` and ``d_in`` columns.
    """
    require(convergence, ["model", "block", "train_rows", "r2_lin", "d_in"], "the convergence figure")
    models = ordered(convergence, "model", order)
    per_dim = convergence.assign(rows_per_dim=convergence.train_rows / convergence.d_in)
    steps = per_dim.groupby(["model", "folds"], as_index=False).agg(
        rows_per_dim=("rows_per_dim", "mean"), median=("r2_lin", "median"), lowest=("r2_lin", "min")
    )
    long = steps.melt(id_vars=["model", "rows_per_dim"], value_vars=["median", "lowest"], var_name="over blocks",
                      value_name="R²")  # fmt: skip
    long["over blocks"] = long["over blocks"].map({"median": "median block", "lowest": "lowest block"})
    fig, ax = plt.subplots(figsize=(WIDTH, 4.4), layout="constrained")
    sns.lineplot(data=long, x="rows_per_dim", y="R²", hue="model", hue_order=models, style="over blocks",
                 style_order=["median block", "lowest block"], marker="o", ax=ax)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set(xlabel="training rows per input dimension (log scale)", ylabel="held-out R²_lin",
           title="R²_lin against the rows each fit is given")  # fmt: skip
    figure_legend(fig, ax)
    return fig
