"""The report layer: the ledger (record, replace, restart, read back), claims and their verdicts, a chapter's run."""

import pandas as pd
import pytest

from linrec.book import chapter, ledger
from linrec.report import paper
from linrec.report.claims import COLUMNS, Claim, Verdict, claims_table, verdict_sentence


def test_ledger_records_replaces_and_restarts(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.start("smoke", "02_x")
    ledger.record("smoke", "02_x", paper.GAIN_CORRELATION, 0.5)
    ledger.record("smoke", "02_x", paper.GAIN_CORRELATION, 0.25, note="again")
    ledger.record("smoke", "01_y", "custom", "a to b", paper="not reported")
    table = ledger.ledger("smoke")
    assert list(table.chapter) == ["01_y", "02_x"]
    row = table.iloc[1]
    assert row.quantity == "Pearson r(gain, 1 − R²_lin)" and row.measured == 0.25 and row.note == "again"
    assert row["paper (reported)"] == paper.GAIN_CORRELATION.value
    assert table.iloc[0]["paper (reported)"] == "not reported"
    ledger.start("smoke", "02_x")
    assert list(ledger.ledger("smoke").chapter) == ["01_y"]
    assert ledger.ledger("paper").empty


def test_reported_values_are_named_constants():
    assert paper.REPORTED[0] is paper.R2_RANGE
    assert len({r.quantity for r in paper.REPORTED}) == len(paper.REPORTED)
    with pytest.raises(AttributeError):
        paper.R2_RANGES  # a misspelt name fails loudly instead of dropping the paper's value  # noqa: B018


def test_claims_table_has_fixed_columns_and_verdicts():
    claims = [
        Claim.check("a", paper.R2_RANGE, "x", True),
        Claim.check("b", "a note", "y", False),
        Claim.check("c", "n/a", "z", None),
    ]
    table = claims_table(claims)
    assert tuple(table.columns) == COLUMNS
    assert list(table.reproduced) == ["yes", "no", "untestable"]
    assert table.iloc[0]["paper (reported)"] == paper.R2_RANGE.value and table.iloc[1]["paper (reported)"] == "a note"
    assert [c.verdict for c in claims] == [Verdict.YES, Verdict.NO, Verdict.UNTESTABLE]


def test_verdict_sentence_groups_claims():
    claims = pd.DataFrame({"claim": ["a", "b", "c"], "reproduced": ["yes", "no", "yes"]})
    text = verdict_sentence("offline", claims)
    assert "of the paper's 3 claims checked here, this run reproduces 2 (a; c)" in text
    assert "not reproduced: b" in text and "untestable in this run: none" in text


def test_chapter_start_clears_its_ledger_and_records_under_its_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.record("smoke", "02_x", "stale", 1.0)
    ch = chapter.start("02_x", "smoke", seed=3, style=False, eval_tokens=1024)
    assert "profile smoke" in capsys.readouterr().out
    assert ch.profile.name == "smoke" and ch.profile.eval_tokens == 1024 and ch.seed == 3
    assert ch.recorded().empty
    ch.record(paper.R2_RANGE, "0.1 to 0.9")
    assert list(ch.recorded().quantity) == ["R²_lin range across blocks"]
    assert "profile smoke" in str(ch.provenance())
