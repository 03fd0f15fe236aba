"""The walk's figure: a row per model, each step's joint ΔPPL against the blocks it drops, and each task's change
against that ΔPPL where the tasks were scored along the walk."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from linrec.analysis.tasks import steps_table
from linrec.errors import LinrecError
from linrec.plots import tasks as figures
from linrec.plots._layout import symlog_axis
from linrec.plots.legibility import problems

DELTAS = {"swapped": [-0.02, 0.3, 1.5, 6.0], "removed": [0.8, 4.0, 30.0, 400.0]}


def walk(models=("a", "b"), base: float = 20.0) -> pd.DataFrame:
    return pd.DataFrame([
        {"model": m, "mechanism": {"swapped": "affine", "removed": "layer"}[kind], "kind": kind, "step": k,
         "blocks": "", "base_ppl": base, "ppl": base + d, "delta_ppl": d, "delta_ppl_low": d - 0.05 - abs(d) / 4,
         "delta_ppl_high": d + 0.05 + abs(d) / 4}
        for m in models for kind, values in DELTAS.items() for k, d in zip([0, 1, 2, 4, 8], [0.0, *values])
    ])  # fmt: skip


def changes(models=("a", "b"), tasks=("linrec_prose", "linrec_code")) -> pd.DataFrame:
    return pd.DataFrame([
        {"model": m, "mechanism": {"swapped": "affine", "removed": "layer"}[kind], "kind": kind, "step": k,
         "task": t, "metric": "acc", "before": 0.6, "after": 0.6 - d / 1000, "change": -d / 1000,
         "change_low": -d / 1000 - 0.1, "change_high": -d / 1000 + 0.1}
        for m in models for t in tasks for kind, values in DELTAS.items() for k, d in zip([1, 2, 4, 8], values)
    ])  # fmt: skip


def test_the_walk_alone_draws_a_panel_per_model_a_line_per_kind_and_the_budget():
    fig = figures.walk_figure(walk(), steps_table([walk()], []))
    assert len(fig.axes) == 2 and [ax.get_title() for ax in fig.axes] == ["a", "b"]
    ax = fig.axes[0]
    swapped, removed = (line for line in ax.lines if len(line.get_xdata()) == 5)
    assert list(swapped.get_xdata()) == [0, 1, 2, 4, 8] and list(swapped.get_ydata()) == [0.0, *DELTAS["swapped"]]
    assert list(removed.get_ydata()) == [0.0, *DELTAS["removed"]]
    budget = [line for line in ax.lines if list(line.get_ydata()) == [1.0, 1.0]]
    assert budget and budget[0].get_linestyle() == "--"  # 5 % of perplexity 20
    assert ax.get_yscale() == "symlog" and "perplexity points" in ax.get_ylabel()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "swapped", "removed", "k = 1", "k = 2", "k = 4", "k = 8", "5% of perplexity",
    ]  # fmt: skip
    assert fig.get_suptitle() == "What each step costs in perplexity"
    assert problems(fig) == []


def test_each_task_scored_along_the_walk_adds_a_panel_of_its_change_against_the_steps_delta():
    table = steps_table([walk()], [changes()])
    fig = figures.walk_figure(walk(), table)
    assert len(fig.axes) == 6 and fig.get_suptitle().endswith("and what the tasks lose")  # the walk, two tasks
    ppl = changes(tasks=("wikitext2-ppl",)).assign(metric="ppl")  # less is better: no panel of accuracy
    assert len(figures.walk_figure(walk(), steps_table([walk()], [changes(), ppl])).axes) == 6
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["a", "prose: next sentence", "code: next line", "b", "prose: next sentence", "code: next line"]
    ax = fig.axes[1]
    removed = [line for line in ax.lines if len(line.get_xdata()) == 5][1]  # from (0, 0), then each step
    assert list(removed.get_xdata()) == pytest.approx([0.0, *DELTAS["removed"]])
    assert list(removed.get_ydata()) == pytest.approx([0.0, *(-d / 10 for d in DELTAS["removed"])])  # points
    assert ax.get_xscale() == "symlog" and "accuracy (points)" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    low, high = ax.get_xlim()
    assert len([t for t in ax.get_xticks() if low <= t <= high]) <= 2 * figures.SIDE_TICKS + 1 and "0" in labels
    assert problems(fig) == []


def test_a_narrow_axis_keeps_zero_and_the_outer_powers_of_ten():
    fig, ax = plt.subplots()
    values = pd.Series([-0.3, 0.01, 2.0, 500.0])
    symlog_axis(ax, values, axis="x")
    figures.thin_ticks(ax.xaxis, ax.get_xlim(), side=2)
    low, high = ax.get_xlim()
    kept = [t for t in ax.get_xticks() if low <= t <= high]
    assert 0.0 in kept and max(kept) == 100.0 and len([t for t in kept if t > 0]) <= 2
    assert [t for t in kept if t < 0] == []  # its one negative power lies a decade from 0: its label would touch 0's
    assert ax.xaxis.get_major_formatter()(100.0, 0) == "100"
    symlog_axis(ax, pd.Series([-30.0, 0.01, 2.0, 50.0]), axis="x")
    figures.thin_ticks(ax.xaxis, ax.get_xlim(), side=2)
    low, high = ax.get_xlim()
    kept = [t for t in ax.get_xticks() if low <= t <= high]
    assert [t for t in kept if t < 0] == [-10.0, -0.1] and [t for t in kept if t > 0] == [0.1, 10.0]


def test_a_table_without_its_columns_is_refused():
    with pytest.raises(LinrecError, match="the walk needs the columns"):
        figures.walk_figure(walk().drop(columns="base_ppl"))
    with pytest.raises(LinrecError, match="the task changes needs the columns"):
        figures.walk_figure(walk(), steps_table([walk()], [changes()]).drop(columns="change_low"))
