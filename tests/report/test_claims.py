"""linrec.report.claims: One contract for a chapter's results: a :class:`Claim` per checked statement or headline
number."""

from __future__ import annotations

import pytest

from linrec.errors import LinrecError
from linrec.report import paper
from linrec.report.claims import COLUMNS, Claim, Verdict, Verdicts, claims_table, verdict_sentence


def test_claims_table_has_fixed_columns_and_only_tested_claims():
    claims = [
        Claim.check("a", paper.R2_RANGE, "x", True, value=0.9, rule="r"),
        Claim.check("b", "a note", "y", False, rule="r"),
        Claim.measure("number", 3.0),
        Claim.check("c", "n/a", "z", None, rule="r"),
    ]
    table = claims_table(claims)
    assert tuple(table.columns) == COLUMNS
    assert list(table.claim) == ["a", "b", "c"] and list(table.reproduced) == ["yes", "no", "untestable"]
    assert table.iloc[0]["paper (reported)"] == paper.R2_RANGE.value and table.iloc[1]["paper (reported)"] == "a note"
    assert [c.verdict for c in claims] == [Verdict.YES, Verdict.NO, None, Verdict.UNTESTABLE]
    assert claims[2].value == 3.0 and claims[2].measured == "3.0" and not claims[2].tested


def test_verdict_sentence_states_the_conclusion_and_whose_claims():
    claims = [
        Claim.check("a", paper.PROBE_GAIN, "m", True, rule="r"),
        Claim.check("b", "not reported", "m", False, rule="r"),
        Claim.measure("not a claim", 1.0),
        Claim.check("c", paper.R2_RANGE, "m", True, rule="r"),
    ]
    text = verdict_sentence("offline", claims)
    assert text == (
        "Under profile `offline`, of the 2 claims of the paper tested here, this run reproduces 2 (a; c); "
        "of the one check this book adds, 0 hold and 1 does not hold (b)."
    )
    only_ours = verdict_sentence("smoke", [Claim.check("b", "note", "m", None, rule="r"), claims[1]])
    assert (
        only_ours == "Under profile `smoke`, of the 2 checks this book adds, 0 hold, 1 does not hold (b) and 1 "
        "cannot be tested (b)."
    )
    one = verdict_sentence("paper", [Claim.check("a", paper.PROBE_GAIN, "m", False, rule="r")])
    assert (
        one == "Under profile `paper`, of the one claim of the paper tested here, this run reproduces 0 and does "
        "not reproduce 1 (a)."
    )
    with pytest.raises(LinrecError, match="at least one tested claim"):
        verdict_sentence("offline", [Claim.measure("n", 1.0)])


def test_every_verdict_states_its_rule_and_shows_it_wrapped():
    with pytest.raises(LinrecError, match="decision rule"):
        Claim.check("a", "p", "m", True, rule="  ")
    claims = (
        Claim.check("gain", paper.PROBE_GAIN, "median 0.01", True, rule="yes when the median is at most 0.05"),
        Claim.check("controls", "not reported", "0.95 captured", False, rule="passes at 0.9"),
        Claim.measure("a number", 2.0),
    )
    shown = Verdicts("offline", claims)
    lines = shown._repr_markdown_().splitlines()
    assert lines[0].startswith("> **Verdict.** Under profile `offline`, of the one claim of") and lines[1] == ">"
    assert lines[2] == (
        "> - **gain** (the paper's, Fig. 3): **reproduced**. Measured: median 0.01. Rule: yes when the median is at "
        "most 0.05."
    )
    assert lines[3].startswith("> - **controls** (this book's check): **does not hold**.") and len(lines) == 4
    assert str(shown).splitlines()[1:] == [line.removeprefix("> - ") for line in lines[2:]]
    from IPython.lib.pretty import pretty

    assert pretty(shown) == str(shown)  # a notebook's text/plain: the printed lines, not the floats' full repr
    with pytest.raises(LinrecError):
        Verdicts("offline", (Claim.measure("a number", 2.0),))
    assert Claim.measure("a number", 2.0, note="n = 4")._repr_markdown_() == "**a number**: 2.0; n = 4."
    assert claims[0]._repr_markdown_() == lines[2].removeprefix("> - ")
