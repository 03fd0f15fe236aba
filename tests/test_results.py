"""The results ledger: record, replace, restart, read back; and the verdict sentence."""

import pandas as pd

from linrec import results
from linrec.paper import REPORTED


def test_ledger_records_replaces_and_restarts(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    results.start("smoke", "02_x")
    results.record("smoke", "02_x", "Pearson r(gain, 1 − R²_lin)", 0.5)
    results.record("smoke", "02_x", "Pearson r(gain, 1 − R²_lin)", 0.25, note="again")
    results.record("smoke", "01_y", "custom", "a to b", paper="not reported")
    ledger = results.ledger("smoke")
    assert list(ledger.chapter) == ["01_y", "02_x"]
    row = ledger.iloc[1]
    assert row.measured == 0.25 and row.note == "again"
    assert row["paper (reported)"] == REPORTED["Pearson r(gain, 1 − R²_lin)"].value
    results.start("smoke", "02_x")
    assert list(results.ledger("smoke").chapter) == ["01_y"]
    assert results.ledger("paper").empty


def test_verdict_sentence_groups_claims():
    claims = pd.DataFrame({"claim": ["a", "b", "c"], "reproduced": ["yes", "no", "yes"]})
    text = results.verdict_sentence("offline", claims)
    assert "of the paper's 3 claims checked here, this run reproduces 2 (a; c)" in text
    assert "not reproduced: b" in text and "untestable in this run: none" in text
