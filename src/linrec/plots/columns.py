"""The one input check every figure makes: the table it draws has the columns it needs."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from linrec.errors import LinrecError


def need(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Raise a :class:`LinrecError` naming ``what`` and the missing columns unless ``table`` has all ``columns``."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise LinrecError(f"{what} needs the columns {missing}; the table has {', '.join(map(str, table.columns))}")
