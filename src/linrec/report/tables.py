"""Tables for reading: every table a chapter shows goes through :func:`show`, the one place that decides
how many digits a number keeps.

A raw DataFrame prints six decimals and an index column; :func:`show` rounds each column to the digits
that carry meaning (:data:`RULES`, chosen by the column's name), hides the index (a meaningful index,
such as the model names of a pivot, becomes the first column) and folds a table longer than
:data:`FOLD_ROWS` rows behind a one-line summary the reader opens on demand. Text, booleans and
missing values are shown as they are (a missing number as an en dash).
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Mapping

import pandas as pd

from linrec.errors import LinrecError

FOLD_ROWS = 20
"""Tables with more rows than this are folded: about one screen of the book's column at its row height,
so a per-block table of a 24-block model does not push the figure it explains off the page."""

RULES: tuple[tuple[str, str], ...] = (
    (r"sigma", ".2f"),
    (r"change", "+.4f"),
    (r"delta_ppl|Δ ?PPL", "+.2f"),
    (r"ppl|perplexity", ".2f"),
    (r"cond", ".3g"),
    (r"p_value|p-value|\bp\b", ".2g"),
    (r"r2|R²|rho|ρ|corr|spearman|pearson", ".3f"),
    (r"relative|fraction|share|variance_first|rows_first", ".1%"),
    (r"ratio", ".2f"),
)
"""(pattern, format spec) pairs tried in order on a column's name (case-insensitive); the first
match wins. The basis of each: a step in units of the k-fold spread is read to hundredths; a change of R²
(with and without some rows) is signed and kept to 4 decimals, since changes below 0.001 are the common case; a
perplexity difference is read to hundredths (the paper reports ΔPPL
+0.77), perplexities alike; a condition number matters by its order of magnitude, so 3 significant
digits (scientific notation when large); a p-value by its first significant digits; R² and
correlations to 3 decimals (the paper's bounds are 0.99 and 0.3, and the k-fold spread is rarely below
0.001); shares as percentages to a tenth; parameter ratios to 2 decimals (7.996 reads as 8.00).
Other floats keep 3 significant digits (:data:`DEFAULT`); integers get thousands separators."""

DEFAULT = ".3g"
"""The format of a float column no rule matches: 3 significant digits."""

MISSING = "–"
"""How a missing number is shown."""


def column_format(name: object) -> str:
    """The format spec :data:`RULES` give a float column called ``name`` (:data:`DEFAULT` if none matches)."""
    for pattern, spec in RULES:
        if re.search(pattern, str(name), flags=re.IGNORECASE):
            return spec
    return DEFAULT


def formatted(value: object, spec: str = DEFAULT) -> str:
    """``value`` as a table shows it: a float by ``spec``, an integer with thousands separators, a missing
    number as :data:`MISSING`, anything else as its text."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return MISSING if value is None or value is pd.NA else str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    number = float(value)  # type: ignore[arg-type]
    return MISSING if math.isnan(number) else format(number, spec)


class Table:
    """A table formatted for reading (:func:`show`): HTML in a notebook or the book, text elsewhere."""

    def __init__(self, frame: pd.DataFrame, formats: Mapping[str, str], fold: str | None) -> None:
        self.frame = frame
        self.formats = dict(formats)
        self.fold = fold

    def text(self) -> pd.DataFrame:
        """The table with every cell as the text it is shown as."""
        return pd.DataFrame(
            {column: [formatted(v, spec) for v in self.frame[column]] for column, spec in self.formats.items()},
            columns=self.frame.columns,
        )

    def _repr_html_(self) -> str:
        shown = self.text().style.hide(axis="index").to_html()
        if self.fold is None:
            return shown
        return f"<details><summary>{html.escape(self.fold)}</summary>\n{shown}\n</details>"

    def __repr__(self) -> str:
        return self.text().to_string(index=False)


def show(table: pd.DataFrame, formats: Mapping[str, str] | None = None, fold: str | None = None) -> Table:
    """``table`` for reading: each float column rounded by :func:`column_format` (or by ``formats``, a format
    spec such as ``".4f"`` per column name), integers with thousands separators, no index column (a named
    or non-default index becomes the first column(s)), and, with more than :data:`FOLD_ROWS` rows, folded
    behind ``fold`` (default: "<n> rows: click to show"). An unnamed index of labels becomes a column with an empty
    header; an unnamed integer index (row positions, such as a filter leaves) is dropped."""
    if not isinstance(table, pd.DataFrame):
        raise LinrecError(f"show() formats a pandas DataFrame; got {type(table).__name__}")
    unknown = [c for c in formats or {} if c not in table.columns]
    if unknown:
        raise LinrecError(f"formats name columns the table lacks: {unknown}; it has {list(table.columns)}")
    unnamed = all(name is None for name in table.index.names)
    if unnamed and pd.api.types.is_integer_dtype(table.index.dtype):  # row positions (e.g. left by a filter): not data
        table = table.reset_index(drop=True)
    elif not isinstance(table.index, pd.RangeIndex) or not unnamed:
        table = table.rename_axis([name if name is not None else "" for name in table.index.names]).reset_index()
    if table.columns.duplicated().any():
        raise LinrecError(f"a table to show needs distinct column names; got {list(table.columns)}")
    chosen = {column: (formats or {}).get(column, column_format(column)) for column in table.columns}
    folded = len(table) > FOLD_ROWS
    return Table(table, chosen, (fold or f"{len(table)} rows: click to show") if folded else None)


def with_interval(table: pd.DataFrame, value: str, spec: str | None = None) -> pd.Series:
    """``value`` of each row with its interval, ``<value> [<low>, <high>]``, from the columns ``<value>_low`` and
    ``<value>_high`` (each by ``spec``, default :func:`column_format` of ``value``): for a table that shows an
    estimate and its interval in one cell, such as a pivot of ΔPPL."""
    columns = [value, f"{value}_low", f"{value}_high"]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise LinrecError(f"an estimate with its interval needs the columns {columns}; the table lacks {missing}")
    spec = spec or column_format(value)
    cells = [
        f"{formatted(v, spec)} [{formatted(lo, spec)}, {formatted(hi, spec)}]"
        for v, lo, hi in zip(table[value], table[f"{value}_low"], table[f"{value}_high"])
    ]
    return pd.Series(cells, index=table.index, name=value)
