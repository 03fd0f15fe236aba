"""What every figure shares for the book's column: its width, the smallest text, legends beneath the axes,
and the symmetric-log axis of ΔPPL.

The book's column is about 7.5 inches wide at the theme's width, so a figure drawn :data:`WIDTH` wide is
shown at its own size and its text at the size it was set in (the seaborn ``notebook`` context: 11-12 pt
labels); a wider figure would be shrunk and its text with it. Nothing is set smaller than :data:`SMALL`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator
from matplotlib.transforms import ScaledTranslation

WIDTH = 7.5
"""Width of every figure in inches: the book's column."""

SMALL = 9.0
"""The smallest font size (points) of any text in a figure: legends, annotations, tick labels of dense axes."""

MAX_DECADES = 4
"""The most decades a symmetric-log axis shows on each side of zero: smaller values are drawn in its linear
part, so a ΔPPL of 1e-5 next to one of 10 does not stretch the axis over six decades of empty ticks."""


def legend_below(ax: Axes, ncol: int | None = None, **kwargs: object) -> None:
    """``ax``'s legend centred beneath its x label (a distance in points, its tick labels' and its label's, so
    that a short panel's legend does not ride up over them), in up to ``ncol`` columns (default: up to 3), so that
    it covers no data; :meth:`Figure.tight_layout` (or ``layout="constrained"``) makes room for it."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    ticks = max((float(t.get_fontsize()) for t in ax.get_xticklabels()), default=SMALL)
    below = ticks + (float(ax.xaxis.label.get_fontsize()) if ax.get_xlabel() else 0) + 16  # points: ticks, label, pads
    legend = ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        bbox_transform=ax.transAxes + ScaledTranslation(0, -below / 72, ax.figure.dpi_scale_trans),
        ncol=ncol or min(3, len(labels)),
        fontsize=SMALL,
        title_fontsize=SMALL,
        frameon=False,
        **kwargs,
    )
    section_titles(legend, handles)


def section_titles(legend: Legend, handles: Sequence[Artist]) -> None:
    """Set seaborn's section titles in ``legend`` (the column names it lists among the entries when colour and
    line style stand for two columns: "model", "rows") in bold with a colon, so they read as headings, not as
    entries. Seaborn draws a title as a line of no width and no marker."""
    for handle, text in zip(handles, legend.get_texts()):
        if isinstance(handle, Line2D) and handle.get_linewidth() == 0 and handle.get_marker() in ("", "None", None):
            text.set_text(f"{text.get_text()}:")
            text.set_fontweight("bold")


ALL_TICKS = 12
"""Up to this many blocks, a depth axis labels every one; beyond, integer ticks matplotlib spaces to fit the axis."""


def block_ticks(ax: Axes, blocks: Sequence[int] | np.ndarray) -> None:
    """Ticks on ``ax``'s block axis: every block of a short model, integers spaced to fit for a deep one (30 labels
    in a column run together)."""
    if len(blocks) <= ALL_TICKS:
        ax.set_xticks(sorted(blocks))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", integer=True))


def line_labels(ax: Axes, lines: Sequence[tuple[float, str]], gap: float = 0.05, color: str = "0.35") -> None:
    """Name horizontal lines at ``ax``'s right edge, just above each: lines closer than ``gap`` of the axis' height
    share one label (their names joined), so that no two labels are printed over each other."""
    low, high = ax.get_ylim()
    groups: list[list[tuple[float, str]]] = []
    for y, name in sorted(lines):
        if groups and y - groups[-1][-1][0] <= gap * (high - low):
            groups[-1].append((y, name))
        else:
            groups.append([(y, name)])
    for group in groups:
        ax.text(0.99, group[-1][0], ", ".join(name for _, name in group) + " ", transform=ax.get_yaxis_transform(),
                ha="right", va="bottom", fontsize=SMALL, color=color)  # fmt: skip


def figure_legend(fig: Figure, ax: Axes, ncol: int = 4) -> None:
    """``ax``'s legend (its own removed) beneath all panels of ``fig``, for a legend that several panels share;
    ``fig`` must have been made with ``layout="constrained"``, which makes room for it."""
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.get_legend()
    if legend is not None:
        legend.remove()
    if handles:
        shared = fig.legend(handles, labels, loc="outside lower center", ncol=min(ncol, len(labels)), fontsize=SMALL,
                            frameon=False)  # fmt: skip
        section_titles(shared, handles)


def symlog_axis(ax: Axes, values: Sequence[float] | pd.Series | np.ndarray, axis: str = "y") -> None:
    """A symmetric-log ``axis`` spanning ``values`` (with a small margin, no empty negative half when every value
    is ≥ 0). It is linear within ``linthresh``, a power of ten: the smallest non-zero |value| rounded down, but
    at most :data:`MAX_DECADES` decades below the largest. Ticks are 0 and the powers of ten from ``linthresh``
    out (every other one beyond five decades), none inside the linear part, so no two labels overprint."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    size = np.abs(v)
    top = float(size.max()) if v.size and size.max() > 0 else 1.0
    nonzero = size[size > 0]
    smallest = float(nonzero.min()) if nonzero.size else top
    lowest = math.floor(math.log10(max(smallest, top / 10**MAX_DECADES)))
    linthresh = 10.0**lowest
    highest = math.ceil(math.log10(top)) if top > linthresh else lowest
    step = 1 if highest - lowest < 5 else 2
    powers = [10.0**k for k in range(lowest, highest + 1, step)]
    ticks = sorted([0.0, *powers, *(-p for p in powers)])  # those outside the limits are not drawn
    low, high = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
    limits = (min(1.5 * low, -linthresh / 2), max(1.5 * high, linthresh))
    scaled = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("symlog", linthresh=linthresh)
    (ax.set_ylim if axis == "y" else ax.set_xlim)(*limits)
    scaled.set_major_locator(FixedLocator(ticks))
    scaled.set_minor_locator(NullLocator())


def log_ticks(ax: Axes, axis: str = "x") -> None:
    """Labels on a log ``axis`` that do not collide: the powers of ten only, or 1, 2 and 5 times them where the
    axis spans less than two decades (so that it still has labels), written as plain numbers (0.02); minor ticks
    unlabelled. Call it once the
    data are drawn (it reads the axis' limits)."""
    scaled = ax.xaxis if axis == "x" else ax.yaxis
    low, high = ax.get_xlim() if axis == "x" else ax.get_ylim()
    narrow = high <= 0 or low <= 0 or math.log10(high / low) < 2
    scaled.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if narrow else (1.0,), numticks=7))
    scaled.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    scaled.set_minor_formatter(NullFormatter())
