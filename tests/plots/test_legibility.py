"""linrec.plots.legibility: Whether a figure's text can be read where the book shows it: no two labels drawn over each
other, none too small."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest


@pytest.mark.illegible_on_purpose
def test_legibility_finds_overprinted_ticks_and_text_shrunk_below_8_pt_and_passes_a_plain_figure():
    from matplotlib.figure import Figure

    from linrec.plots.legibility import problems

    fig, ax = plt.subplots(figsize=(7.5, 3))
    ax.set_xticks(range(30), [f"block {i}" for i in range(30)])  # 30 labels in 7.5 inches run together
    assert any("'block 10' overlaps 'block 11'" in p for p in problems(fig))
    ax.set_xticks(range(0, 30, 5), [f"block {i}" for i in range(0, 30, 5)])
    assert problems(fig) == []
    ax.set_xlim(0, 10)  # ticks beyond the view are not drawn, so not read
    assert problems(fig) == []
    wide, ax = plt.subplots(figsize=(15, 3))  # shrunk to half in the column: 10-pt ticks read as 5 pt
    ax.plot([0, 1])
    assert problems(wide) and all("pt as shown" in p for p in problems(wide))
    assert problems(wide, column_px=1500) == []
    bare = Figure(figsize=(7.5, 3))  # a canvas with no renderer, as in a notebook's inline backend
    bare.subplots().set_xticks(range(30), [f"block {i}" for i in range(30)])
    assert any("overlaps" in p for p in problems(bare))
    plt.close("all")
