"""linrec.report.paper: What the paper reports (Whipp, arXiv 2606.19379), in one place, for showing beside this run's
numbers."""

from __future__ import annotations

from linrec.report import paper


def test_reported_values_are_named_constants():
    assert paper.REPORTED[0] is paper.R2_RANGE
    assert len({r.quantity for r in paper.REPORTED}) == len(paper.REPORTED)


def test_the_papers_reported_figures_come_from_one_place():
    from linrec.report import paper

    table = paper.reported_table()
    assert list(table.columns) == ["quantity", "paper (reported)", "where"] and len(table) == len(paper.REPORTED)
    assert paper.EARLY_SWAP_SETUP["ΔPPL [95% interval]"] == "+0.77" and "+0.77" in paper.EARLY_SWAP.value
    assert paper.SETUP["rows per block"] == "about 15–30k" and paper.SETUP["sequence length"] == "128"
