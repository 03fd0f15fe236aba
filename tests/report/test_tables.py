"""Tables for reading (linrec.report.tables): digits by column, no index column, long tables folded."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from linrec.errors import LinrecError
from linrec.notebook import ledger
from linrec.report.claims import Claim
from linrec.report.tables import FOLD_ROWS, MISSING, show, with_interval


def test_show_rounds_each_column_to_its_meaningful_digits():
    frame = pd.DataFrame(
        {
            "model": ["a", "b"],
            "block": [0, 1],
            "r2_lin": [0.123456, math.nan],
            "input_condition": [215190.039736, 3.14159],
            "delta_ppl": [0.7712, -12.3456],
            "params": [1234567, 8],
            "ratio": [7.9961, math.inf],
            "other": [0.000123456, 98765.4],
        }
    )
    text = show(frame).text()
    assert text.r2_lin.tolist() == ["0.123", MISSING]
    assert text.input_condition.tolist() == ["2.15e+05", "3.14"]
    assert text.delta_ppl.tolist() == ["+0.77", "-12.35"]
    assert text.params.tolist() == ["1,234,567", "8"] and text.block.tolist() == ["0", "1"]
    assert text.ratio.tolist() == ["8.00", "inf"] and text.other.tolist() == ["0.000123", "9.88e+04"]
    assert text.model.tolist() == ["a", "b"]
    assert show(frame, {"r2_lin": ".5f"}).text().r2_lin[0] == "0.12346"


def test_show_hides_the_index_and_keeps_a_meaningful_one_as_a_column():
    wide = pd.DataFrame({"x": [1.5, 2.5]}, index=pd.Index(["gpt2", "neox"], name="model"))
    table = show(wide)
    assert list(table.text().columns) == ["model", "x"]
    assert list(show(pd.DataFrame({"x": [1.0]}, index=["row"])).text().columns) == ["", "x"]
    filtered = pd.DataFrame({"block": [0, 4, 7], "r2_lin": [0.9, 0.5, 0.7]}).query("block > 0")  # index 1, 2
    assert list(show(filtered).text().columns) == ["block", "r2_lin"]  # no column of row positions beside block
    page = table._repr_html_()
    assert "gpt2" in page and "row_heading" not in page and "<details>" not in page


def test_show_folds_a_long_table_behind_a_summary():
    long = pd.DataFrame({"block": range(FOLD_ROWS + 1)})
    assert show(long)._repr_html_().startswith("<details><summary>21 rows: click to show</summary>")
    assert "<details>" not in show(long.head(FOLD_ROWS))._repr_html_()
    assert "<summary>per block</summary>" in show(long, fold="per block")._repr_html_()


def test_show_rejects_what_it_cannot_format():
    with pytest.raises(LinrecError, match="columns the table lacks"):
        show(pd.DataFrame({"a": [1.0]}), {"b": ".2f"})
    with pytest.raises(LinrecError, match="DataFrame"):
        show(pd.Series([1.0]))  # type: ignore[arg-type]


def test_ledger_by_chapter_gives_one_short_table_per_chapter(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.start("smoke", "05_x")
    ledger.record("smoke", "05_x", [Claim.measure("ΔPPL", 0.771234, unit="perplexity")])
    ledger.record("smoke", "02_y", [Claim.check("a claim", "up", "it went up", True, value=0.98765, rule="r")])
    parts = ledger.by_chapter(ledger.ledger("smoke"))
    assert list(parts) == ["02_y", "05_x"]
    assert parts["05_x"].measured.tolist() == ["0.771 perplexity"] and parts["02_y"].measured.tolist() == ["0.988"]
    assert list(parts["02_y"].columns) == ["quantity", "paper (reported)", "measured", "reproduced", "note"]


def test_with_interval_writes_an_estimate_and_its_interval_in_one_cell():
    swaps = pd.DataFrame({"delta_ppl": [0.7712, 0.0], "delta_ppl_low": [0.5, 0.0], "delta_ppl_high": [1.049, 0.0]})
    assert with_interval(swaps, "delta_ppl").tolist() == ["+0.77 [+0.50, +1.05]", "+0.00 [+0.00, +0.00]"]
    with pytest.raises(LinrecError, match="delta_ppl_high"):
        with_interval(swaps.drop(columns="delta_ppl_high"), "delta_ppl")
