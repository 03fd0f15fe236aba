"""linrec.core.columns: What each column of the recoverability table means."""

from __future__ import annotations

import torch

from linrec.core.columns import COLUMNS
from linrec.core.fit import recoverability, report_table
from linrec.core.moments import Moments
from support.cli import heavy_imports


def test_report_table_has_every_new_column_described():
    g = torch.Generator().manual_seed(2)
    rows = lambda: Moments.from_rows(torch.randn(60, 5, generator=g), torch.randn(60, 2, generator=g))  # noqa: E731
    table = report_table(recoverability({3: [rows(), rows(), rows()]}))
    assert list(table.columns) == list(COLUMNS)
    assert table.first_position_share.isna().all()  # not kept apart: unknown, never a made-up 0


def test_the_columns_are_read_without_torch():
    assert heavy_imports("linrec.core.columns") == []
