"""linrec.plots._curves: the panels and the order of the depth curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from linrec.plots._curves import ordered, outer_ylabels, panel_grid


def test_ordered_keeps_the_given_order_of_what_is_present_else_the_tables():
    table = pd.DataFrame({"model": ["b", "a", "b", "c"]})
    assert ordered(table, "model", None) == ["b", "a", "c"]
    assert ordered(table, "model", ["c", "x", "a", "b"]) == ["c", "a", "b"]


def test_a_grid_has_the_panels_asked_for_and_one_label_for_several_rows():
    fig, axes = panel_grid(5, cols=2)
    assert len(axes) == 5 and len(fig.axes) == 5  # the sixth place of three rows of two is removed
    for ax in axes:
        ax.set_ylabel("R²")
    outer_ylabels(axes, cols=2)
    assert all(ax.get_ylabel() == "" for ax in axes) and fig.get_supylabel() == "R²"
    plt.close(fig)
    fig, axes = panel_grid(2, cols=2)
    for ax in axes:
        ax.set_ylabel("R²")
    outer_ylabels(axes, cols=2)
    assert [ax.get_ylabel() for ax in axes] == ["R²", ""]  # one row: the first panel keeps its own
    plt.close(fig)
