"""linrec.plots._layout: ticks and labels that stay legible however many blocks or lines a figure has."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from linrec.plots._layout import ALL_TICKS, block_ticks, line_labels


def test_a_short_model_gets_a_tick_per_block_and_a_deep_one_fewer_whole_numbers():
    fig, short = plt.subplots()
    short.plot(range(ALL_TICKS), range(ALL_TICKS))
    block_ticks(short, list(range(ALL_TICKS))[::-1])
    assert list(short.get_xticks()) == list(range(ALL_TICKS))
    plt.close(fig)
    fig, deep = plt.subplots()
    deep.plot(range(30), range(30))
    block_ticks(deep, np.arange(30))
    fig.canvas.draw()
    ticks = [t for t in deep.get_xticks() if 0 <= t <= 29]
    assert 2 <= len(ticks) < 30 and all(float(t).is_integer() for t in ticks)
    plt.close(fig)


def test_lines_closer_than_the_gap_share_one_label_and_distant_ones_get_their_own():
    fig, ax = plt.subplots()
    ax.set_ylim(0, 1)
    line_labels(ax, [(0.50, "b"), (0.02, "c"), (0.52, "a")])
    labels = sorted(t.get_text().strip() for t in ax.texts)
    assert labels == ["b, a", "c"]  # 0.50 and 0.52 are 2 % of the axis apart, within the 5 % gap
    plt.close(fig)
