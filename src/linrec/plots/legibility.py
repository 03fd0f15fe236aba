"""Whether a figure's text can be read where the book shows it: no two labels drawn over each other, none too small.

Read from matplotlib's own renderer after a draw: every visible text of the figure (tick labels within their
axis, axis labels, titles, legends, annotations) with its box in pixels. Two boxes that overlap by more than
:data:`OVERLAP_PX` in both directions are text printed over text; two on one line less than :data:`GAP_PX` apart
run together. A text's size as read is its size in points
scaled as the page scales the figure: the book shows a PNG no wider than its column (:data:`COLUMN_PX` at a
1280-px window), so a figure saved wider is shrunk and its text with it. :func:`problems` is called where a chapter
shows a figure (:func:`linrec.notebook.figures.show_figure`, for ``make book-check``) and on every figure the tests
draw (``tests/conftest.py``).
"""

from __future__ import annotations

from itertools import combinations

from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.text import Text

COLUMN_PX = 688
"""Width of the book's text column at a 1280-px window (measured in Chromium: the theme's article)."""

MIN_PT = 8.0
"""The smallest text a reader is asked to read, in points as shown on the page (CSS: 96 px per inch)."""

OVERLAP_PX = 1.0
"""Boxes of two texts may touch by this much (antialiasing, a descender) before they count as overlapping."""

GAP_PX = 3.0
"""Two texts side by side on one line closer than this run together ("1011121314" for ticks 10 to 14)."""


def _tick_labels(fig: Figure) -> set[int]:
    """Ids of the tick labels the axes will not draw: those of ticks outside the axis' view."""
    hidden = set()
    for axis in fig.findobj(Axis):
        low, high = sorted(axis.get_view_interval())
        span = (high - low) or 1.0
        for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
            if not low - 1e-9 * span <= tick.get_loc() <= high + 1e-9 * span:
                hidden.update({id(tick.label1), id(tick.label2)})
    return hidden


def drawn_texts(fig: Figure) -> list[Text]:
    """The texts of ``fig`` that a draw puts on the canvas with something to read."""
    fig.draw_without_rendering()  # lays it out as a save would, on any canvas (the inline backend's has no renderer)
    hidden = _tick_labels(fig)
    return [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and id(t) not in hidden and t.get_figure(root=True) is fig
    ]


def shown_scale(fig: Figure, column_px: int = COLUMN_PX) -> float:
    """How much the page shrinks ``fig``: its column over the width of the PNG saved with a tight box."""
    saved = fig.get_tightbbox().width * fig.dpi
    return min(1.0, column_px / saved) if saved else 1.0


def problems(fig: Figure, column_px: int = COLUMN_PX, min_pt: float = MIN_PT) -> list[str]:
    """What keeps ``fig``'s text from being read at the book's column width: overlapping texts and texts under
    ``min_pt`` points as shown. Empty when it is legible."""
    texts = drawn_texts(fig)
    boxes = [(t, t.get_window_extent()) for t in texts]
    found = []
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        tall = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if wide > OVERLAP_PX and tall > OVERLAP_PX:
            found.append(f"text {a.get_text()!r} overlaps {b.get_text()!r} ({wide:.0f} x {tall:.0f} px)")
        elif wide > -GAP_PX and tall > OVERLAP_PX:
            found.append(f"text {a.get_text()!r} runs into {b.get_text()!r} ({-wide:.0f} px apart)")
    scale = shown_scale(fig, column_px) * fig.dpi / 96  # points set -> CSS points shown
    sizes = [(float(t.get_fontsize()) * scale, t.get_text()) for t in texts]
    small = sorted({(size, text) for size, text in sizes if size < min_pt})
    found += [f"text {text!r} is {size:.1f} pt as shown (under {min_pt:g} pt)" for size, text in small]
    return found
