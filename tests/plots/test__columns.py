"""linrec.plots._columns: a figure refuses a table without the columns (or rows) it draws, naming what is missing."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.errors import LinrecError
from linrec.plots._columns import require


def test_require_names_the_figure_and_the_missing_columns_or_rows():
    require(pd.DataFrame({"a": [1]}), ["a"], "a figure")
    with pytest.raises(LinrecError, match=r"the thing needs the columns \['b'\]; the table has a"):
        require(pd.DataFrame({"a": [1]}), ["a", "b"], "the thing")
    with pytest.raises(LinrecError, match="needs at least one row"):
        require(pd.DataFrame({"a": []}), ["a"], "the thing")
    require(pd.DataFrame({"a": []}), ["a"], "the thing", rows=False)
