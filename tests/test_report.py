"""Claims and their verdicts (linrec.report), the ledger they are recorded in and a chapter's run (linrec.book)."""

from dataclasses import replace

import pytest

from linrec.book import chapter, ledger
from linrec.errors import LinrecError
from linrec.report import paper
from linrec.report.claims import COLUMNS, Claim, Verdict, Verdicts, claims_table, verdict_sentence


def test_ledger_records_claims_replaces_them_by_name_and_restarts(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.start("smoke", "02_x")
    ledger.record("smoke", "02_x", [Claim.measure(paper.GAIN_CORRELATION, 0.5)])
    tested = Claim.check(
        "r", paper.GAIN_CORRELATION, "0.25", True, value=0.25, interval=(-0.1, 0.6), note="n = 9", rule="|r| < 0.3"
    )
    ledger.record("smoke", "02_x", [Claim.measure(paper.GAIN_CORRELATION, 0.25, note="again"), tested], "fig-x")
    ledger.record("smoke", "01_y", [Claim.measure("custom", "a to b")])
    table = ledger.ledger("smoke")
    assert list(table.chapter) == ["01_y", "02_x", "02_x"] and list(table.columns) == ledger.COLUMNS
    row = table.iloc[1]
    assert row.quantity == "Pearson r(gain, 1 − R²_lin)" and row.measured == 0.25 and row.note == "again"
    assert row["paper (reported)"] == paper.GAIN_CORRELATION.value and row.reproduced == ""
    assert table.iloc[0]["paper (reported)"] == "not reported" and table.iloc[0].measured == "a to b"
    assert table.iloc[2].reproduced == "yes" and table.iloc[2].note == "interval [-0.1, +0.6]; n = 9"
    assert (
        ledger.entries("smoke")[2] | {"rule": "|r| < 0.3", "source": "Fig. 3", "figure": "fig-x"}
        == (ledger.entries("smoke")[2])
    )
    ledger.start("smoke", "02_x")
    assert list(ledger.ledger("smoke").chapter) == ["01_y"]
    assert ledger.ledger("paper").empty


def test_reported_values_are_named_constants():
    assert paper.REPORTED[0] is paper.R2_RANGE
    assert len({r.quantity for r in paper.REPORTED}) == len(paper.REPORTED)


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
    with pytest.raises(LinrecError):
        Verdicts("offline", (Claim.measure("a number", 2.0),))
    assert Claim.measure("a number", 2.0, note="n = 4")._repr_markdown_() == "**a number**: 2.0; n = 4."
    assert claims[0]._repr_markdown_() == lines[2].removeprefix("> - ")


def test_claims_page_gives_one_row_per_claim_with_every_verdict_labelled_by_its_subject(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    near = Claim.check("near-linear blocks", paper.R2_RANGE, "0.98", False, rule="r")
    ledger.record("offline", "02_het", [near, near.of("smol"), Claim.measure("range", "0 to 1")], "fig-het")
    learned = Claim.check("learned", "not tested in the paper", "4 of 6", True, rule="r")
    ledger.record("offline", "03_act", [learned.of("zoo-a"), replace(learned, verdict=Verdict.NO).of("zoo-b (c)")])
    ledger.record("offline", "05_cmp", [replace(learned, claim="swap")], plain="zoo-gpt2")  # about one model
    page = ledger.claims_page("offline")
    rows = [line for line in page.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == [
        "| claim | chapter | the paper's figure | this build's figure | verdict |",
        "| near-linear blocks | {doc}`2 </book/chapters/02_het>` | abstract; Fig. 2 | {numref}`fig-het` "
        "| all models: not reproduced; smol: not reproduced |",
        "| learned | {doc}`3 </book/chapters/03_act>` | this book's check | — "
        "| zoo-a: holds; zoo-b (c): does not hold |",
        "| swap | {doc}`5 </book/chapters/05_cmp>` | this book's check | — | zoo-gpt2: holds |",
    ]
    assert "`offline` profile" in page
    assert "No chapter has recorded" in ledger.claims_page("paper")


def test_a_chapter_opens_with_its_findings_per_model_each_claim_named_once_and_linked(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    near = Claim.check("near-linear blocks", paper.R2_RANGE, "0.98", False, rule="r")
    both = Claim.check("both <kinds>", paper.R2_RANGE, "yes", True, rule="r")
    odd = Claim.check("odd", "not tested in the paper", "–", None, rule="r")
    claims = [near, both, near.of("smol"), replace(both, verdict=Verdict.NO).of("smol"), odd.of("smol")]
    ledger.record("offline", "02_het", [*claims, Claim.measure("range", "0 to 1")])
    box = ledger.findings("offline", "02_het").splitlines()
    assert box[:2] == [":::{admonition} What this chapter found (`offline` profile)", ":class: tip"]
    assert box[3:] == [
        '- **all models**: held: <a href="#verdict-02-het-both-kinds">both &lt;kinds&gt;</a>; did not hold: '
        '<a href="#verdict-02-het-near-linear-blocks">near-linear blocks</a>.',
        '- **smol**: did not hold: <a href="#verdict-02-het-near-linear-blocks">near-linear blocks</a>, '
        '<a href="#verdict-02-het-both-kinds">both &lt;kinds&gt;</a>; could not be tested: '
        '<a href="#verdict-02-het-odd">odd</a>.',
        ":::",
    ]
    shown = Verdicts("offline", tuple(claims), chapter="02_het")._repr_markdown_()
    assert shown.count("near-linear blocks") == 2  # once in the sentence (all models, smol), once in the list
    for target in ("verdict-02-het-both-kinds", "verdict-02-het-near-linear-blocks", "verdict-02-het-odd"):
        assert shown.count(f'<span id="{target}"></span>') == 1  # every link of the box lands on the page
    assert ledger.findings("offline", "03_none") is None
    ledger.record("offline", "03_none", [Claim.measure("n", 1.0)])
    assert ledger.findings("offline", "03_none") is None  # headline numbers only: no box


def test_chapter_start_clears_its_ledger_and_records_under_its_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.record("smoke", "02_x", [Claim.measure("stale", 1.0)])
    ch = chapter.start("02_x", "smoke", seed=3, style=False, eval_tokens=1024)
    assert "profile smoke" in capsys.readouterr().out
    assert ch.profile.name == "smoke" and ch.profile.eval_tokens == 1024 and ch.seed == 3
    assert ledger.ledger("smoke").empty  # the stale entry of 02_x is gone
    table = ch.report([Claim.measure(paper.R2_RANGE, "0.1 to 0.9"), Claim.check("a", "p", "m", False, rule="r")])
    assert list(ledger.ledger("smoke").quantity) == ["R²_lin range across blocks", "a"]
    assert list(table.frame.claim) == ["a"] and list(table.frame.reproduced) == ["no"]  # shown without an index
    assert ch.report([Claim.measure("a number", 2.0)]) is None
    assert "a number" in list(ledger.ledger("smoke").quantity)
    assert "profile smoke" in str(ch.provenance())


def test_the_papers_reported_figures_come_from_one_place():
    from linrec.report import paper

    table = paper.reported_table()
    assert list(table.columns) == ["quantity", "paper (reported)", "where"] and len(table) == len(paper.REPORTED)
    assert paper.EARLY_SWAP_SETUP["ΔPPL [95% interval]"] == "+0.77" and "+0.77" in paper.EARLY_SWAP.value
    assert paper.SETUP["rows per block"] == "about 15–30k" and paper.SETUP["sequence length"] == "128"
