"""The gated blocks read: the better gate per block, the cost at the first position's share, the agreement beyond
chance, the study's figures beside this run's, and each verdict by its rule, on planted tables with a known answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from linrec.analysis import gating
from linrec.errors import LinrecError
from linrec.report.claims import Verdict
from linrec.stats import bootstrap_correlation

SHARES = (0.5, 0.9, 0.99, 1.0)


def planted(model: str, family: str, costs: dict[int, dict[str, list[float]]], base: float = 20.0):
    """A study of one model: ``costs`` gives each block's ΔPPL per rule at :data:`SHARES` (the last, share 1, the
    plain affine map); R²_lin falls with the plain cost, the routed rows' R² rises with the share kept for the FFN."""
    curve = pd.DataFrame([
        {"model": model, "rule": rule, "share": share, "routed": share, "block": block, "delta_ppl": delta,
         "delta_ppl_low": delta - 0.1, "delta_ppl_high": delta + 0.1, "base_ppl": base,
         "params": 100 + (33 if rule == "logistic" and share < 1 else 0), "r2_routed": 1 - share / 10,
         "r2_gated": 1 - share / 20}
        for block, by_rule in costs.items() for rule, deltas in by_rule.items()
        for share, delta in zip(SHARES, deltas, strict=True)
    ])  # fmt: skip
    largest = pd.DataFrame([
        {"model": model, "rule": rule, "block": block,
         "largest_share": max([s for s, d in zip(SHARES, deltas, strict=True) if d < 0.01 * base], default=0.0),
         "delta_ppl_there": next((d for s, d in sorted(zip(SHARES, deltas, strict=True), reverse=True)
                                  if d < 0.01 * base), np.nan)}
        for block, by_rule in costs.items() for rule, deltas in by_rule.items()
    ])  # fmt: skip
    plain = {block: by_rule["norm"][-1] for block, by_rule in costs.items()}
    blocks = pd.DataFrame([
        {"model": model, "block": block, "r2_lin": 1 - cost / 100, "r2_lin_after_first": 1 - cost / 200,
         "top_rows_share": 0.1, "top_rows_share_after_first": min(0.9, cost / 10), "first_position_share": 0.5,
         "base_ppl": base, "affine": cost, "first_apart": cost / 2, "first_apart_low": cost / 2 - 0.1,
         "first_apart_high": cost / 2 + 0.1, "first_apart_routed": 1 - 1 / 128, "family": family}
        for block, cost in plain.items()
    ])  # fmt: skip
    return curve, largest, blocks


def two_models():
    """Perplexity 20, so a budget of 0.2. gpt2: block 0 hard (plain +8) but gated within the budget up to 90 % by
    the logistic gate, +0.5 at 99 % (the first position apart: +4); block 1 cheap throughout. neox: block 0 hard and
    within the budget at no share; block 1 hard (+0.3), within it up to 50 %."""
    gpt2 = planted("g", "gpt2", {0: {"norm": [0.1, 0.5, 3.0, 8.0], "logistic": [0.1, 0.1, 0.5, 8.0]},
                                 1: {"norm": [0.0, 0.0, 0.1, 0.1], "logistic": [0.0, 0.0, 0.1, 0.1]}})  # fmt: skip
    neox = planted("n", "gpt_neox", {0: {"norm": [1.0, 2.0, 3.0, 9.0], "logistic": [0.5, 2.0, 6.0, 9.0]},
                                     1: {"norm": [0.1, 0.3, 0.3, 0.3], "logistic": [0.1, 0.5, 0.5, 0.3]}})  # fmt: skip
    return [list(t) for t in zip(gpt2, neox, strict=True)]


def test_the_summary_reads_the_better_gate_and_its_cost_at_the_first_positions_share():
    curves, largest, blocks = two_models()
    summary = gating.gated_summary(curves, largest, blocks).set_index(["model", "block"])
    g0 = summary.loc["g", 0]
    assert g0.gate == "logistic" and g0.largest_share == 0.9 and g0.largest_norm == 0.5 and bool(g0.hard)
    assert g0.matched_share == 0.99 and g0.matched_delta == 0.5 and g0.matched_rule == "logistic"
    assert g0.r2_routed == pytest.approx(1 - 0.9 / 10) and g0.gate_numbers == 33
    assert summary.loc["g", 1].largest_share == 1.0 and not summary.loc["g", 1].hard
    assert summary.loc["n", 0].largest_share == 0.0 and summary.loc["n", 1].largest_share == 0.5
    assert summary.loc["n", 1].gate == "norm"  # a tie of shares and of ΔPPL there: the first rule
    assert summary.loc["n", 1].matched_delta == 0.3 and summary.loc["n", 1].matched_rule == "norm"
    with pytest.raises(LinrecError, match="lacks columns"):
        gating.gated_summary([c.drop(columns="r2_routed") for c in curves], largest, blocks)


def test_the_agreement_is_read_beyond_chance():
    table = pd.DataFrame({"model": "m", "block": [0, 1, 2], "rows_of": "a", "share": 0.9,
                          "alike": [0.82, 1.0, 0.91], "score_correlation": [0.0, 1.0, 0.5]})  # fmt: skip
    out = gating.agreement_summary([table])
    assert out.chance.tolist() == pytest.approx([0.82] * 3)
    assert out.kappa.tolist() == pytest.approx([0.0, 1.0, 0.5])


def test_the_relations_pool_every_gated_block_and_skip_too_few():
    curves, largest, blocks = two_models()
    summary = gating.gated_summary(curves, largest, blocks)
    assert set(gating.relations(summary).score) == {
        "r2_lin",
        "r2_lin_after_first",
        "top_rows_share_after_first",
        "affine_relative",
    }  # (the first position's share is constant)
    more = pd.concat([summary] * 2, ignore_index=True).assign(first_position_share=np.linspace(0, 1, 8))
    related = gating.relations(more).set_index("score")
    expected = bootstrap_correlation(more.r2_lin, more.largest_share, np.zeros(8))
    assert related.rho["r2_lin"] == pytest.approx(expected.r) and related.blocks["r2_lin"] == 8
    assert "first_position_share" in related.index and "top_rows_share" not in related.index
    assert gating.relations(summary.iloc[:3]).empty


def test_the_verdicts_follow_the_rules():
    curves, largest, blocks = two_models()
    summary = gating.gated_summary(curves, largest, blocks)
    agreement = gating.agreement_summary([pd.DataFrame({"model": "g", "block": [0, 0], "rows_of": ["a", "b"],
                                                        "share": 0.9, "alike": [0.95, 0.99],
                                                        "score_correlation": [0.8, 0.9]})])  # fmt: skip
    claims = {c.claim: c for c in gating.gating_claims(summary, agreement, gating.relations(summary))}
    carries = claims["a gate carries every block the affine map alone cannot"]
    assert carries.verdict == Verdict.NO and "n block 0: 0% by" in carries.measured  # neox block 0 routes nothing
    first = claims["a gate does as well as the first position apart"]
    assert first.verdict == Verdict.NO  # gpt2 block 0 +0.5 against +4 and neox block 0 +3 against +4.5, but:
    assert "n block 1: gate +0.3 at 99% against +0.15 at 99.2%" in first.measured
    harder = claims["GPT-NeoX blocks are harder to route to the map than GPT-2 blocks"]
    assert harder.verdict == Verdict.YES and "GPT-NeoX 25%" in harder.measured and "GPT-2 95%" in harder.measured
    same = claims["gates trained on two texts route the same rows"]
    assert same.verdict == Verdict.YES and same.value == pytest.approx(np.median([0.13 / 0.18, 0.17 / 0.18]))
    assert all(gating.STUDY_NAME in c.reported for c in (carries, harder, same))
    assert not any(c.from_paper for c in claims.values())  # the study is never passed off as the paper


def test_the_first_position_rule_wins_where_the_gate_is_dearer():
    curves, largest, blocks = two_models()
    cheap_first = [b.assign(first_apart=0.05) for b in blocks]
    summary = gating.gated_summary(curves, largest, cheap_first)
    claims = {c.claim: c for c in gating.gating_claims(summary, gating.agreement_summary([]), pd.DataFrame())}
    assert claims["a gate does as well as the first position apart"].verdict == Verdict.NO
    assert claims["gates trained on two texts route the same rows"].verdict == Verdict.UNTESTABLE


def test_without_hard_blocks_or_a_second_family_the_checks_are_untestable():
    curves, largest, blocks = two_models()
    summary = gating.gated_summary(curves[:1], largest[:1], blocks[:1])
    easy = summary[~summary.hard]
    claims = {c.claim: c for c in gating.gating_claims(easy, gating.agreement_summary([]), pd.DataFrame())}
    assert claims["a gate carries every block the affine map alone cannot"].verdict == Verdict.UNTESTABLE
    assert claims["a gate does as well as the first position apart"].verdict == Verdict.UNTESTABLE
    assert claims["GPT-NeoX blocks are harder to route to the map than GPT-2 blocks"].verdict == Verdict.UNTESTABLE


def test_the_study_is_set_beside_this_run_labelled_as_the_studys():
    curves, largest, blocks = two_models()
    summary = gating.gated_summary(curves, largest, blocks)
    agreement = gating.agreement_summary([pd.DataFrame({"model": "g", "block": [0], "rows_of": ["a"], "share": 0.9,
                                                        "alike": [0.91], "score_correlation": [0.3]})])  # fmt: skip
    table = gating.beside_the_study(summary, agreement)
    assert list(table.columns) == ["quantity", "the study (arXiv 2603.03459), reported", "this run, measured"]
    assert table.iloc[:, 1].tolist() == [r.value for r in gating.STUDY]
    mine = dict(zip(table.quantity, table["this run, measured"], strict=True))
    assert "GPT-2: 90%–100% over 2 gated blocks of 1 model(s)" in mine[gating.STUDY_ROUTED.quantity]
    assert "GPT-NeoX (Pythia's): 0%–50%" in mine[gating.STUDY_ROUTED.quantity]
    assert "(33)" in mine[gating.STUDY_GATE.quantity] and "κ = +0.50" in mine[gating.STUDY_CROSS.quantity]
    assert "g (GPT-2), n (GPT-NeoX (Pythia's))" == mine[gating.STUDY_MODELS.quantity]
