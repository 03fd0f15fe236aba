"""What the analysis modules share about the tables they are given: the columns they need, checked with one message."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from linrec.errors import LinrecError


def require_columns(table: pd.DataFrame, columns: Sequence[str], what: str, *, study: str) -> None:
    """A LinrecError naming the ``columns`` that ``table`` (``what``) lacks and the ``study`` whose tables it reads."""
    if missing := [c for c in columns if c not in table]:
        raise LinrecError(f"{what} lacks columns {missing}; pass the tables of {study}(...)")
