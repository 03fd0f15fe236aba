"""linrec.notebook.ledger: a ledger of every chapter's claims and headline numbers, for the "paper vs this run"
appendix."""

from __future__ import annotations

from dataclasses import replace

from bookbuild.colab import raw_myst
from linrec.notebook import ledger
from linrec.report import paper
from linrec.report.claims import Claim, Verdict, Verdicts


def test_the_appendix_explains_an_empty_ledger_on_colab_and_off_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    assert ledger.ledger("paper").empty
    colab = ledger.empty_note("paper", colab=True)
    assert "fresh runtime" in colab and "read the appendix of the built book" in colab
    assert 'os.environ["LINREC_CACHE"]' in colab and raw_myst(colab) == []
    here = ledger.empty_note("offline", colab=False)
    assert str(tmp_path) in here and "make book PROFILE=offline" in here


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


def test_a_renumbered_chapter_leaves_no_stale_entries_under_its_old_name(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.record("smoke", "11_scale", [Claim.measure("custom", 1.0)])  # the scale chapter's number before 2026-11-28
    ledger.record("smoke", "10_scale", [Claim.measure("custom", 2.0)])
    ledger.start("smoke", "11_pruning")
    assert list(ledger.ledger("smoke").chapter) == ["10_scale"]
    ledger.start("smoke", "10_scale")  # a chapter's own restart keeps the others of other numbers
    assert ledger.ledger("smoke").empty and (tmp_path / "results" / "smoke" / "11_pruning.json").exists()


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
