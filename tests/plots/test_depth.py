"""Depth-profile figures: they draw exactly the table's numbers, in the stated order, with labelled axes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from linrec.errors import LinrecError
from linrec.plots import depth
from linrec.plots._curves import curve_axes
from support.depth_tables import MODELS, table_of


def data(values) -> np.ndarray:
    return np.asarray(values, dtype=float)


def errorbars(ax) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_curve_axes_draws_each_curve_with_its_error_bars():
    table = table_of(checkpoints=("init", "final"))
    fig, ax = plt.subplots()
    curve_axes(ax, table, style="checkpoint", hue_order=MODELS, label="{hue}/{style}")
    bars = errorbars(ax)
    assert [b.get_label() for b in bars] == ["m-b/init", "m-b/final", "m-a/init", "m-a/final"]
    first = table[(table.model == "m-b") & (table.checkpoint == "init")]
    np.testing.assert_allclose(data(bars[0].lines[0].get_ydata()), first.r2_lin)
    segments = bars[0].lines[2][0].get_segments()  # the vertical error bar segments: mean ± std
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segments], 2 * first.r2_lin_std)
    assert bars[0].lines[0].get_color() == bars[1].lines[0].get_color() != bars[2].lines[0].get_color()
    assert bars[0].lines[0].get_linestyle() != bars[1].lines[0].get_linestyle()
    assert ax.get_xlabel() and ax.get_ylabel()
    with pytest.raises(LinrecError, match="r2_lin_std"):
        curve_axes(ax, table.drop(columns="r2_lin_std"))


def test_heterogeneity_figure_has_profiles_over_swaps():
    table = table_of()
    swaps = table[["model", "block"]].assign(delta_ppl=np.linspace(-0.5, 20, len(table)))
    fig = depth.heterogeneity_figure(table, swaps, reference=(0.99, 0.3), order=MODELS)
    top, bottom = fig.axes
    assert [b.get_label() for b in errorbars(top)] == MODELS
    assert sorted(line.get_ydata()[0] for line in top.lines if len(line.get_ydata()) == 2)[-2:] == [0.3, 0.99]
    heights = sorted(p.get_height() for p in bottom.patches)
    np.testing.assert_allclose(heights, sorted(swaps.delta_ppl))
    assert bottom.get_yscale() == "symlog" and bottom.get_ylabel()


def test_corpus_figure_one_panel_per_model_one_line_per_corpus():
    table = table_of(corpora=("prose", "code", "records"))
    fig = depth.corpus_figure(table, order=MODELS)
    assert [ax.get_title() for ax in fig.axes] == MODELS
    for ax, model in zip(fig.axes, MODELS):
        bars = errorbars(ax)
        assert [b.get_label() for b in bars] == ["prose", "code", "records"]
        expected = table[(table.model == model) & (table.corpus == "code")].r2_lin
        np.testing.assert_allclose(data(bars[1].lines[0].get_ydata()), expected)
    assert fig.axes[0].get_ylabel() and not fig.axes[1].get_ylabel()  # shared y: labelled once, beside the row
    rows = pd.concat([table.assign(model=lambda t, k=k: t.model + f"-{k}") for k in range(3)])  # three rows
    tall = depth.corpus_figure(rows, ylabel="held-out R² of seeded-poly (test fold)")
    assert not any(ax.get_ylabel() for ax in tall.axes) and tall.get_supylabel().startswith("held-out R² of")
    swaps = table.assign(delta_ppl=1.0)
    fig = depth.corpus_figure(swaps, value="delta_ppl", error=None, ylabel="ΔPPL")
    assert fig.axes[0].get_ylabel() == "ΔPPL" and errorbars(fig.axes[0])[0].lines[2] == ()


def test_training_heatmaps_show_the_table_in_step_order():
    table = table_of(checkpoints=("final", "init", "step5"))  # listed out of training order
    fig = depth.training_heatmaps(table, order=MODELS)
    maps = [ax for ax in fig.axes if ax.get_title() in MODELS]
    assert [ax.get_title() for ax in maps] == MODELS
    labels = [t.get_text() for t in maps[0].get_xticklabels()]
    assert labels == ["init (0)", "step5", "final (10)"]
    shown = maps[0].collections[0].get_array().reshape(3, 3)
    expected = table[table.model == "m-b"].pivot(index="block", columns="checkpoint", values="r2_lin")[
        ["init", "step5", "final"]
    ]
    np.testing.assert_allclose(shown, expected.to_numpy())


def test_training_lines_and_drift():
    table = table_of(checkpoints=("init", "step5", "final"))
    losses = pd.DataFrame({"model": "m-a", "step": [0, 5, 10], "corpus": "c1", "loss": [6.0, 5.0, 4.5]})
    fig = depth.training_lines(table, losses, order=MODELS)
    panels = [ax for ax in fig.axes if ax.get_title() in MODELS]
    assert [len(errorbars(ax)) for ax in panels] == [3, 3]  # one line per block
    np.testing.assert_allclose(data(errorbars(panels[0])[0].lines[0].get_xdata()), [0, 5, 10])
    twins = [ax for ax in fig.axes if ax not in panels]
    assert len(twins) == 1 and list(data(twins[0].lines[0].get_ydata())) == [6.0, 5.0, 4.5]  # only m-a has losses
    with pytest.raises(LinrecError, match="optimiser step"):
        depth.training_lines(table.assign(step=None))
    drift = pd.DataFrame({"model": ["m-a"] * 3, "step": [0, 5, 10], "distance_to_final": [0.4, 0.1, 0.0]})
    ax = depth.drift_figure(drift).axes[0]
    np.testing.assert_allclose(data(ax.lines[0].get_ydata()), [0.4, 0.1, 0.0])


def test_curves_figure_styles_each_checkpoint():
    fig = depth.curves_figure(table_of(checkpoints=("init", "final")), style="checkpoint", order=MODELS, title="t")
    assert len(errorbars(fig.axes[0])) == 4 and fig.axes[0].get_title() == "t"


def test_many_models_get_a_panel_each_in_their_own_colours_and_deep_ones_fewer_tick_labels():
    four = pd.concat([table_of(checkpoints=("init", "final")).assign(model=lambda t, k=k: t.model + f"-{k}")
                      for k in range(2)])  # fmt: skip
    order = ["m-a-1", "m-b-0", "m-a-0", "m-b-1"]
    fig = depth.curves_figure(four, style="checkpoint", order=order, title="t")
    panels = [ax for ax in fig.axes if ax.get_lines()]
    assert [ax.get_title() for ax in panels] == order and all(len(errorbars(ax)) == 2 for ax in panels)
    colours = [errorbars(ax)[0].lines[0].get_color() for ax in panels]
    assert len(set(colours)) == 4  # a model keeps one colour, not the first of the palette in every panel
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["init", "final"]  # the styles, shown once
    deep = table_of(blocks=30)
    ax = depth.curves_figure(deep[deep.model == "m-a"]).axes[0]
    ticks = [t for t in ax.get_xticks() if 0 <= t <= 29]
    assert 3 <= len(ticks) < 30 and all(float(t).is_integer() for t in ticks)  # 30 labels would run together
    assert list(depth.curves_figure(table_of(blocks=6)).axes[0].get_xticks()) == list(range(6))  # a short model: all


def test_reference_figure_draws_the_reported_bounds():
    import pandas as pd

    from linrec.plots.depth import heterogeneity_reference_figure

    table = pd.DataFrame({"model": ["a"] * 3, "block": [0, 1, 2], "r2_lin": [0.9, 0.5, 0.7], "r2_lin_std": [0.01] * 3})
    ax = heterogeneity_reference_figure(table).axes[0]
    dashed = sorted(line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--")
    assert dashed == [0.3, 0.99]
    assert ax.get_xlabel() and ax.get_ylabel()
    many = pd.concat([table.assign(model=m) for m in "abcde"])
    fig = heterogeneity_reference_figure(many)
    panels = [ax for ax in fig.axes if ax.get_lines()]
    assert len(panels) == 5 and all(
        sorted(line.get_ydata()[0] for line in p.get_lines() if line.get_linestyle() == "--") == [0.3, 0.99]
        for p in panels
    )
    assert "dashed: the paper's reported bounds, 0.3 and 0.99" in fig.get_suptitle()


def test_position_figure_sets_all_rows_against_later_ones():
    table = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "block": [0, 1, 2] * 2,
                          "r2_lin": [0.9, 0.8, 0.7, 0.95, 0.6, 0.5],
                          "r2_lin_after_first": [0.85, 0.8, 0.6, 0.9, 0.5, 0.5],
                          "first_position_share": [0.3, 0.1, 0.02, 0.5, 0.05, 0.01],
                          "rows_first": [1 / 32] * 6})  # fmt: skip
    left, right = depth.position_figure(table).axes[:2]
    assert left.get_ylabel() == "held-out R²_lin" and "share of output variance" in right.get_ylabel()
    fig = left.figure
    assert left.get_legend() is None  # one legend beneath both panels, covering no data
    assert "without the first" in [t.get_text() for t in fig.legends[0].get_texts()]
    markers = {line.get_marker() for line in left.get_lines() if len(line.get_xdata()) == 3}
    assert markers == {"o", "X"}  # the two series differ in marker, not only in dashes
    assert any("share of rows" in t.get_text() for t in right.texts)
    with pytest.raises(LinrecError, match="first_position_share"):
        depth.position_figure(table.drop(columns="first_position_share"))


@pytest.mark.slow
def test_convergence_figure_draws_the_median_and_the_lowest_block_per_model_against_rows_per_dimension():
    rows = [{"model": m, "block": b, "folds": f, "train_rows": 1000 * (f - 1), "r2_lin": r - 0.1 / f, "d_in": d}
            for m, d in (("a", 100), ("b", 250))
            for b, r in ((0, 0.9), (1, 0.5), (2, 0.7))
            for f in (2, 3, 4, 5)]  # fmt: skip
    ax = depth.convergence_figure(pd.DataFrame(rows)).axes[0]
    assert ax.get_xscale() == "log" and "per input dimension" in ax.get_xlabel()
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) == 4]
    assert len(lines) == 4  # median and lowest block of each of the two models
    xs = sorted({tuple(line.get_xdata()) for line in lines})
    assert xs == [(4.0, 8.0, 12.0, 16.0), (10.0, 20.0, 30.0, 40.0)]  # train rows / d_in
    lowest = {round(float(line.get_ydata()[-1]), 6) for line in lines}
    assert lowest == {0.48, 0.68}  # the lowest block (0.5 - 0.1/5) and the median block (0.7 - 0.1/5)
    texts = ax.figure.legends[0].get_texts()  # one legend beneath the figure
    titles = [t.get_text() for t in texts if t.get_fontweight() == "bold"]
    assert titles == ["model:", "over blocks:"] and len(texts) == 6  # headings, not entries that read as data
    with pytest.raises(LinrecError, match="d_in"):
        depth.convergence_figure(pd.DataFrame(rows).drop(columns="d_in"))
