"""A chapter's figure with the data it plots, downloadable as CSV beside it.

:func:`show_figure` saves each table a figure plots as ``figure-data/<chapter>/<name>.csv`` and displays the
figure and a "Download the data (CSV)" link as one HTML output: one output, so the figure cell's caption and
number (myst-nb wraps every output of a figure cell in the figure) stay single, and a relative link, which
works in the built book (:func:`bookbuild.render.html` copies ``figure-data`` beside the pages) and is
harmless on Colab, where the file lands in the runtime's working folder. The folder is under
``$LINREC_FIGURE_DATA`` (the book's build points it at the executed chapters), else the working directory.
A figure whose text cannot be read at the book's column width (:func:`linrec.plots.legibility.problems`) is shown
all the same, with what is wrong in the output's metadata (:data:`ILLEGIBLE`), which ``make book-check`` reports.
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from linrec.errors import LinrecError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGURE_DATA = "figure-data"
ILLEGIBLE = "linrec-illegible"
"""The key of a figure output's metadata that lists what keeps its text from being read."""


def _file_stem(name: str) -> str:
    """``name`` as a file name: runs of anything but letters, digits, '_', '.' and '-' become '-' (a hub model's
    'owner/name' included), leading and trailing dots and dashes dropped, so it never leaves its folder."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip(".-")
    if not stem:
        raise LinrecError(f"'{name}' cannot name a figure's data file")
    return stem


def figure_data_dir(chapter: str) -> Path:
    """Where chapter ``chapter``'s CSV files go: ``$LINREC_FIGURE_DATA/figure-data/<chapter>`` (default: cwd)."""
    return Path(os.environ.get("LINREC_FIGURE_DATA", ".")) / FIGURE_DATA / chapter


def save_figure_data(data: pd.DataFrame | Mapping[str, pd.DataFrame], chapter: str, name: str) -> list[tuple[str, str]]:
    """Write each table of ``data`` as CSV (a mapping's tables as ``<name>-<key>.csv``, its None values skipped:
    a table the profile did not make; names made file-safe); return (label, link) pairs, each link relative to the
    chapter's page. A table's index is written only when it carries labels (it is named, or not the plain 0..n-1
    range)."""
    if isinstance(data, pd.DataFrame):
        tables = {name: data}
    else:
        tables = {f"{name}-{key}": table for key, table in data.items() if table is not None}
    if not tables:
        raise LinrecError(f"figure '{name}': no table to save")
    out = figure_data_dir(_file_stem(chapter))
    out.mkdir(parents=True, exist_ok=True)
    links = []
    for name_given, table in tables.items():
        stem = _file_stem(name_given)
        if not isinstance(table, pd.DataFrame):
            raise LinrecError(f"figure data '{name_given}' must be a pandas DataFrame, got {type(table).__name__}")
        labelled = any(n is not None for n in table.index.names) or not table.index.equals(pd.RangeIndex(len(table)))
        table.to_csv(out / f"{stem}.csv", index=labelled)
        links.append((f"{stem}.csv", f"{FIGURE_DATA}/{out.name}/{stem}.csv"))
    return links


def figure_html(png: bytes, links: list[tuple[str, str]]) -> str:
    """The figure as an inline PNG, then a line of download links (none: the figure alone)."""
    image = f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}" alt="figure"/>'
    if not links:
        return image
    anchors = ", ".join(f'<a href="{html.escape(href)}" download>{html.escape(label)}</a>' for label, href in links)
    return f'{image}\n<p class="linrec-figure-data">Download the data (CSV): {anchors}</p>'


def show_figure(
    fig: Figure, data: pd.DataFrame | Mapping[str, pd.DataFrame] | None, chapter: str, name: str
) -> list[tuple[str, str]]:
    """Display ``fig`` with links to ``data`` saved as CSV (:func:`save_figure_data`), then close it (so the
    inline backend does not draw it a second time); return the links."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    from linrec.plots.legibility import problems

    links = save_figure_data(data, chapter, name) if data is not None else []
    illegible = problems(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")  # what the inline backend draws
    plt.close(fig)
    png = buffer.getvalue()
    bundle = {"text/html": figure_html(png, links), "image/png": base64.b64encode(png).decode(), "text/plain": name}
    display(bundle, raw=True, metadata={ILLEGIBLE: illegible} if illegible else None)
    return links
