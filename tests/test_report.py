"""Claims and their verdicts (linrec.report), the ledger they are recorded in and a chapter's run (linrec.book)."""

import pytest

from linrec.book import chapter, ledger
from linrec.report import paper
from linrec.report.claims import COLUMNS, Claim, Verdict, claims_table, verdict_sentence


def test_ledger_records_claims_replaces_them_by_name_and_restarts(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.start("smoke", "02_x")
    ledger.record("smoke", "02_x", [Claim.measure(paper.GAIN_CORRELATION, 0.5)])
    tested = Claim.check("r", paper.GAIN_CORRELATION, "0.25", True, value=0.25, interval=(-0.1, 0.6), note="n = 9")
    ledger.record("smoke", "02_x", [Claim.measure(paper.GAIN_CORRELATION, 0.25, note="again"), tested])
    ledger.record("smoke", "01_y", [Claim.measure("custom", "a to b")])
    table = ledger.ledger("smoke")
    assert list(table.chapter) == ["01_y", "02_x", "02_x"] and list(table.columns) == ledger.COLUMNS
    row = table.iloc[1]
    assert row.quantity == "Pearson r(gain, 1 − R²_lin)" and row.measured == 0.25 and row.note == "again"
    assert row["paper (reported)"] == paper.GAIN_CORRELATION.value and row.reproduced == ""
    assert table.iloc[0]["paper (reported)"] == "not reported" and table.iloc[0].measured == "a to b"
    assert table.iloc[2].reproduced == "yes" and table.iloc[2].note == "interval [-0.1, +0.6]; n = 9"
    ledger.start("smoke", "02_x")
    assert list(ledger.ledger("smoke").chapter) == ["01_y"]
    assert ledger.ledger("paper").empty


def test_reported_values_are_named_constants():
    assert paper.REPORTED[0] is paper.R2_RANGE
    assert len({r.quantity for r in paper.REPORTED}) == len(paper.REPORTED)
    with pytest.raises(AttributeError):
        paper.R2_RANGES  # a misspelt name fails loudly instead of dropping the paper's value  # noqa: B018


def test_claims_table_has_fixed_columns_and_only_tested_claims():
    claims = [
        Claim.check("a", paper.R2_RANGE, "x", True, value=0.9),
        Claim.check("b", "a note", "y", False),
        Claim.measure("number", 3.0),
        Claim.check("c", "n/a", "z", None),
    ]
    table = claims_table(claims)
    assert tuple(table.columns) == COLUMNS
    assert list(table.claim) == ["a", "b", "c"] and list(table.reproduced) == ["yes", "no", "untestable"]
    assert table.iloc[0]["paper (reported)"] == paper.R2_RANGE.value and table.iloc[1]["paper (reported)"] == "a note"
    assert [c.verdict for c in claims] == [Verdict.YES, Verdict.NO, None, Verdict.UNTESTABLE]
    assert claims[2].value == 3.0 and claims[2].measured == "3.0" and not claims[2].tested


def test_verdict_sentence_groups_the_tested_claims():
    claims = [
        Claim.check("a", "p", "m", True),
        Claim.check("b", "p", "m", False),
        Claim.measure("not a claim", 1.0),
        Claim.check("c", "p", "m", True),
    ]
    text = verdict_sentence("offline", claims)
    assert "of the 3 claims checked here, this run reproduces 2 (a; c)" in text
    assert "not reproduced: b" in text and "untestable in this run: none" in text and "not a claim" not in text


def test_chapter_start_clears_its_ledger_and_records_under_its_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.record("smoke", "02_x", [Claim.measure("stale", 1.0)])
    ch = chapter.start("02_x", "smoke", seed=3, style=False, eval_tokens=1024)
    assert "profile smoke" in capsys.readouterr().out
    assert ch.profile.name == "smoke" and ch.profile.eval_tokens == 1024 and ch.seed == 3
    assert ledger.ledger("smoke").empty  # the stale entry of 02_x is gone
    table = ch.report([Claim.measure(paper.R2_RANGE, "0.1 to 0.9"), Claim.check("a", "p", "m", False)])
    assert list(ledger.ledger("smoke").quantity) == ["R²_lin range across blocks", "a"]
    assert list(table.claim) == ["a"] and list(table.reproduced) == ["no"]
    assert ch.report([Claim.measure("a number", 2.0)]) is None
    assert "a number" in list(ledger.ledger("smoke").quantity)
    assert "profile smoke" in str(ch.provenance())
