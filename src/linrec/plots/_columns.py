"""What every figure module shares: the check that a table has the columns (and rows) a figure draws."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from linrec.errors import LinrecError

R2_GLOBAL_LABEL = "global R²_lin (held-out, variance-weighted)"
"""Axis label of one R²_lin per block (pooled over output dims), in the figures of chapters 4 and 5."""


def require(table: pd.DataFrame, columns: Sequence[str], what: str, *, rows: bool = True) -> None:
    """Raise a :class:`LinrecError` naming ``what`` unless ``table`` has ``columns`` (and, with ``rows``, a row)."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise LinrecError(f"{what} needs the columns {missing}; the table has {', '.join(map(str, table.columns))}")
    if rows and table.empty:
        raise LinrecError(f"{what} needs at least one row; the table is empty")
