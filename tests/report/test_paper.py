"""linrec.report.paper: What the paper reports (Whipp, arXiv 2606.19379), in one place, for showing beside this run's
numbers."""

from __future__ import annotations

import re

from linrec.report import paper


def test_every_reported_figure_is_a_named_constant_in_the_table_once_with_its_source():
    named = {name: value for name, value in vars(paper).items() if isinstance(value, paper.Reported)}
    assert set(named.values()) == set(paper.REPORTED), "a Reported constant missing from REPORTED, or one unnamed"
    assert len({r.quantity for r in paper.REPORTED}) == len(paper.REPORTED) == len(named)
    assert all(re.fullmatch(r"(abstract|setup|Fig\. \d)(; (abstract|Fig\. \d))*", r.source) for r in paper.REPORTED)


def test_the_papers_reported_figures_come_from_one_place():
    table = paper.reported_table()
    assert list(table.columns) == ["quantity", "paper (reported)", "where"] and len(table) == len(paper.REPORTED)
    assert paper.EARLY_SWAP_SETUP["ΔPPL [95% interval]"] == "+0.77" and "+0.77" in paper.EARLY_SWAP.value
    assert paper.SETUP["rows per block"] == "about 15–30k" and paper.SETUP["sequence length"] == "128"
