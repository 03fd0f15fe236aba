"""linrec.plots.scale: Figures of the chapter across scale (``10_scale``): R²_lin profiles at relative depth, one panel
per model by size, and the profiles' statistics against parameters (:mod:`linrec.analysis.scale`)."""

from __future__ import annotations

from linrec.analysis import scale
from linrec.experiment.profiles import SCALE_DEPTHS
from support.scale import PARAMS, planted


def test_the_figures_draw_one_panel_per_model_and_three_trends():
    from linrec.plots import scale as plots

    table = planted({"small": 0.5, "mid": 0.4, "large": 0.3}, {"small": 0.1, "mid": 0.2, "large": 0.3})
    summary = scale.scale_summary(table, PARAMS)
    fig = plots.depth_curves_figure(table, summary)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["small (1M, 24 blocks)", "mid (100M, 24 blocks)", "large (1.0B, 24 blocks)"]
    swaps = scale.at_fixed_depths(table.assign(relative=0.01), {m: 24 for m in PARAMS}, SCALE_DEPTHS)
    fig = plots.trends_figure(summary, swaps)
    assert [ax.get_xscale() for ax in fig.axes] == ["log"] * 3
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)
    assert len(fig.axes[2].get_lines()) >= len(SCALE_DEPTHS)
