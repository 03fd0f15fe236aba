"""Figures of the chapter "What the smaller model can still do": each step of the walk by perplexity, and each task's
change against it.

:func:`walk_figure` takes a study's tables (:func:`linrec.experiment.tasks.task_study`'s ``walk``, and
:func:`linrec.analysis.tasks.steps_table`) and returns a matplotlib Figure with labelled axes: ΔPPL on a
symmetric-log axis (:func:`linrec.plots._layout.symlog_axis`), in perplexity points; a change of accuracy in points
(hundredths).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter

from linrec.analysis.tasks import BUDGET
from linrec.plots._columns import require
from linrec.plots._layout import SMALL, WIDTH, section_titles, symlog_axis

KINDS = ("swapped", "removed")
"""The kinds of step, in the legend's order: FFNs swapped for their affine maps, whole blocks removed."""

LABELS = {"linrec_prose": "prose: next sentence", "linrec_code": "code: next line", "humaneval": "HumanEval pass@1"}
"""How each task is named above its panels."""

MARKERS = ("o", "s", "^", "D", "v", "P", "X")
"""The markers of the steps, in step order (k = 1, 2, 4, 8 the first four)."""

DELTA_LABEL = "joint ΔPPL (perplexity points)"
"""The axis label of a step's ΔPPL."""


def _bars(ax: Axes, x: pd.Series, y: pd.Series, xerr: list | None, yerr: list, colour: object, marker: str) -> None:
    ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=marker, ms=6, color=colour, capsize=2, lw=1)


def _spread(values: pd.Series, low: pd.Series, high: pd.Series) -> list[np.ndarray]:
    """Error bar lengths below and above ``values`` (never negative, whatever the interval's ends)."""
    v = values.to_numpy(dtype=float)
    return [np.clip(v - low.to_numpy(dtype=float), 0, None), np.clip(high.to_numpy(dtype=float) - v, 0, None)]


SIDE_TICKS = 2
"""The most powers of ten a narrow symmetric-log axis labels on each side of zero (:func:`thin_ticks`)."""


def thin_ticks(axis: Axis, limits: tuple[float, float], side: int = SIDE_TICKS) -> None:
    """Keep 0 and, on each side of it, at most ``side`` powers of ten of a symmetric-log ``axis``'s ticks within
    ``limits``, the largest first and every other one (or third, ...) down, written as plain numbers; never the
    innermost one, a decade from 0, where its label would run into 0's (on the positive side, unless it is the only
    one): a panel a third of the column wide has room for five labels, not the decade ticks of
    :func:`~linrec.plots._layout.symlog_axis`."""
    low, high = sorted(limits)
    ticks = [float(t) for t in axis.get_major_locator()() if low <= t <= high]
    kept = [0.0] if 0.0 in ticks else []
    for half, keep_one in (([t for t in ticks if t > 0], True), ([t for t in ticks if t < 0], False)):
        outer = sorted(half, key=abs, reverse=True)[: len(half) - 1 if len(half) > 1 or not keep_one else 1]
        step = max(1, math.ceil(len(outer) / side))
        kept += outer[::step][:side]
    axis.set_major_locator(FixedLocator(sorted(kept)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def walk_figure(walk: pd.DataFrame, table: pd.DataFrame | None = None) -> Figure:
    """A row of panels per model: the joint ΔPPL of each step against the blocks it drops, a line per kind with its
    95 % interval and the budget (:data:`~linrec.analysis.tasks.BUDGET` of perplexity) dashed; then, for each task
    ``table`` (:func:`~linrec.analysis.tasks.steps_table`) scored along the walk and read as accuracy (its
    ``reading`` set: not the pruning papers' perplexity), its change in accuracy points against the step's ΔPPL,
    both with their intervals, a line per kind from the model itself (0, 0) and a marker per step."""
    require(walk, ["model", "kind", "step", "base_ppl", "delta_ppl", "delta_ppl_low", "delta_ppl_high"], "the walk")
    if table is not None:
        require(table, ["model", "kind", "step", "task", "delta_ppl", "delta_ppl_low", "delta_ppl_high", "change",
                        "change_low", "change_high", "reading"], "the task changes")  # fmt: skip
    scored = pd.DataFrame() if table is None else table[table.reading != ""]
    models = list(dict.fromkeys(walk.model))
    tasks = list(dict.fromkeys(scored.task)) if not scored.empty else []
    columns = 1 + len(tasks)
    height = 2.8 * len(models) + 1.1
    fig, axes = plt.subplots(len(models), columns, figsize=(WIDTH, height), squeeze=False)
    colours = dict(zip(KINDS, sns.color_palette(n_colors=len(KINDS)), strict=True))
    steps = sorted(int(k) for k in set(walk.step) if k > 0)
    markers = {k: MARKERS[i % len(MARKERS)] for i, k in enumerate(steps)}
    for row, model in zip(axes, models, strict=True):
        mine = walk[walk.model == model]
        _walk_panel(row[0], mine, colours, markers)
        row[0].set_title(model, fontsize=SMALL)
        for ax, task in zip(row[1:], tasks, strict=True):
            _task_panel(ax, scored[(scored.model == model) & (scored.task == task)], colours, markers)
            ax.set_title(LABELS.get(task, task), fontsize=SMALL)
    handles = [Line2D([], [], color=colours[k], marker="", label=k) for k in KINDS if k in set(walk.kind)]
    handles += [Line2D([], [], ls="", color="0.3", marker=markers[k], label=f"k = {k}") for k in steps]
    handles.append(Line2D([], [], color="0.4", ls="--", label=f"{BUDGET:.0%} of perplexity"))
    legend = fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=SMALL, frameon=False)
    section_titles(legend, handles)
    fig.suptitle("What each step costs in perplexity" + (", and what the tasks lose" if tasks else ""))
    rows = math.ceil(len(handles) / 4)
    fig.tight_layout(rect=(0, (0.35 + 0.25 * rows) / height, 1, 1))
    return fig


def _walk_panel(ax: Axes, walk: pd.DataFrame, colours: dict, markers: dict[int, str]) -> None:
    """One model's joint ΔPPL against the blocks each step drops, a line per kind, the budget dashed."""
    budget = BUDGET * float(walk.base_ppl.iloc[0])
    for kind, part in walk.groupby("kind", sort=False):
        part = part.sort_values("step")
        ax.plot(part.step, part.delta_ppl, color=colours.get(kind), lw=1.2)
        for _, point in part[part.step > 0].groupby("step"):
            _bars(ax, point.step, point.delta_ppl, None,
                  _spread(point.delta_ppl, point.delta_ppl_low, point.delta_ppl_high), colours.get(kind),
                  markers[int(point.step.iloc[0])])  # fmt: skip
    ax.axhline(budget, color="0.4", ls="--", lw=1)
    symlog_axis(ax, pd.concat([walk.delta_ppl_low, walk.delta_ppl_high, pd.Series([budget])]))
    ax.set_xticks(sorted({0, *markers}))
    ax.set_xlabel("blocks dropped, cheapest first", fontsize=SMALL)
    ax.set_ylabel(DELTA_LABEL, fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)


def _task_panel(ax: Axes, steps: pd.DataFrame, colours: dict, markers: dict[int, str]) -> None:
    """One model's and task's change in accuracy points against each step's ΔPPL, a line per kind from (0, 0)."""
    for kind, part in steps.groupby("kind", sort=False):
        part = part.sort_values("step")
        ax.plot([0.0, *part.delta_ppl], [0.0, *(100 * part.change)], color=colours.get(kind), lw=1.2)
        for _, point in part.groupby("step"):
            _bars(ax, point.delta_ppl, 100 * point.change,
                  _spread(point.delta_ppl, point.delta_ppl_low, point.delta_ppl_high),
                  _spread(100 * point.change, 100 * point.change_low, 100 * point.change_high), colours.get(kind),
                  markers[int(point.step.iloc[0])])  # fmt: skip
    ax.axhline(0, color="0.4", lw=0.8)
    symlog_axis(ax, pd.concat([steps.delta_ppl_low, steps.delta_ppl_high]), axis="x")
    thin_ticks(ax.xaxis, ax.get_xlim())
    ax.set_xlabel(DELTA_LABEL, fontsize=SMALL)
    ax.set_ylabel("change in accuracy (points)", fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
