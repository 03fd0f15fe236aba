"""linrec.analysis._tables: an analysis refuses a table without the columns it reads, naming them and the study."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.analysis._tables import require_columns
from linrec.errors import LinrecError


def test_a_table_with_every_column_passes_and_one_without_names_what_it_lacks_in_order():
    table = pd.DataFrame({"a": [1], "b": [2]})
    require_columns(table, ["b", "a"], "the steps", study="task_study")
    lacks = r"^the steps lacks columns \['d', 'c'\]; pass the tables of task_study\(\.\.\.\)$"
    with pytest.raises(LinrecError, match=lacks):
        require_columns(table, ["a", "d", "c"], "the steps", study="task_study")


def test_an_empty_table_with_the_columns_passes():
    require_columns(pd.DataFrame({"a": []}), ["a"], "the steps", study="gating_study")
