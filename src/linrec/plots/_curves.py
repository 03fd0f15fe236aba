"""One line of a value against FFN block per model (or corpus, or checkpoint): the axis labels, line styles and
markers, the grid of panels and the curve itself that the depth figures (:mod:`linrec.plots.depth`) and chapter 3's
(:mod:`linrec.plots.activation`) share, so that a model keeps its colour and a block axis its look across chapters.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from linrec.plots._columns import require
from linrec.plots._layout import SMALL, WIDTH, block_ticks

BLOCK_LABEL = "FFN block (depth)"
R2_LABEL = "held-out R²_lin (k-fold mean ± std)"
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def ordered(table: pd.DataFrame, column: str, order: Sequence[str] | None) -> list:
    """The values of ``column`` present in ``table``: in ``order`` when given, else as they first appear."""
    present = list(dict.fromkeys(table[column]))
    return [v for v in order if v in present] if order is not None else present


def every_block(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (of one line) on every block from their first to their last, in block order, NaN where a block was not
    measured: a line drawn through them breaks at a gap (matplotlib draws no segment to a NaN point) instead of
    crossing unmeasured blocks, and its markers stay on the measured ones."""
    blocks = pd.DataFrame({"block": range(int(rows["block"].min()), int(rows["block"].max()) + 1)})
    return blocks.merge(rows, on="block", how="left")


def panel_grid(
    n: int, height: float = 3.6, cols: int = 2, sharey: bool = True, width: float = WIDTH
) -> tuple[Figure, list[Axes]]:
    """A figure ``width`` wide (the book's column) with ``n`` panels, each ``height`` tall, in rows of ``cols``
    (spare panels removed); :func:`outer_ylabels` tidies shared y labels."""
    cols = min(cols, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width, height * rows), squeeze=False, sharey=sharey)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def outer_ylabels(axes: Sequence[Axes], cols: int = 2) -> None:
    """One y label for panels sharing their axis: the first panel's, kept beside it when the panels fill one row,
    else set once for the figure (a row's label is longer than a short panel and would run into the next row's)."""
    label = axes[0].get_ylabel()
    for k, ax in enumerate(axes):
        if k % cols or len(axes) > cols:
            ax.set_ylabel("")
    if len(axes) > cols and label:
        axes[0].figure.supylabel(label, fontsize=SMALL + 2)


def curve_axes(
    ax: Axes,
    table: pd.DataFrame,
    hue: str = "model",
    style: str | None = None,
    hue_order: Sequence[str] | None = None,
    value: str = "r2_lin",
    error: str | None = "r2_lin_std",
    ylabel: str = R2_LABEL,
    label: str = "{hue}",
    colours: dict[str, object] | None = None,
) -> Axes:
    """One line of ``value`` against block per value of ``hue`` (and of ``style``, by line style), with
    ``error`` as error bars (None: none). ``label`` formats each legend entry from ``{hue}`` and ``{style}``;
    ``colours`` gives each hue its colour (default: the palette in order)."""
    require(table, ["block", value, hue, *([style] if style else []), *([error] if error else [])], "a depth profile")
    hues = ordered(table, hue, hue_order)
    styles = ordered(table, style, None) if style else [None]
    colours = colours or dict(zip(hues, sns.color_palette(n_colors=len(hues))))
    for h in hues:
        for k, s in enumerate(styles):
            g = table[(table[hue] == h) & ((table[style] == s) if style else True)].sort_values("block")
            if g.empty:
                continue
            ax.errorbar(
                g["block"],
                g[value],
                yerr=g[error] if error else None,
                capsize=3,
                color=colours[h],
                ls=LINESTYLES[k % len(LINESTYLES)],
                marker=MARKERS[k % len(MARKERS)],
                ms=5,
                label=label.format(hue=h, style=s),
            )
    ax.set(xlabel=BLOCK_LABEL, ylabel=ylabel)
    block_ticks(ax, table["block"].unique())
    return ax
