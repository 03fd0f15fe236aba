"""Compression from a measurement: replacement sets, one table of swaps, the best early block, the safety signal."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd
import pytest
from torch import nn

import linrec.analysis.compression as compression
import linrec.experiment.swaps as swaps
from conftest import local_text, measurement_info, tiny_model
from linrec.analysis.compression import (
    SWAP_KINDS,
    affine_signal,
    best_block,
    compression_claims,
    default_rank,
    early_blocks,
    flags,
    replacement_sets,
    signal_correlation,
    signal_table,
    swap_kinds,
)
from linrec.core.capture import capture_with_sample
from linrec.core.replacements import AffineFFN, LowRankFFN, MeanFFN, ZeroFFN
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import get_profile
from linrec.interventions.perplexity import WindowNLL, compression_frontier, perplexity, swap_deltas, window_nll
from linrec.interventions.probes import ProbeConfig
from linrec.interventions.surgery import n_stored
from linrec.report.claims import claims_table
from linrec.stats import correlation, stratified_correlation

CONFIG = ProbeConfig(rank=2, steps=40, eval_every=10)


@pytest.fixture(scope="module")
def setup(tokenizer, text):
    """A tiny GPT-2 with block 1 made exactly affine, its measurement, and held-out eval batches."""
    model = tiny_model("gpt2")
    model.transformer.h[1].mlp.act = nn.Identity()
    fit = make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=16)
    moments, sample = capture_with_sample(model, fit, sample_rows=1000, folds=4, progress=False)
    m = ProfileMeasurement.assembled(measurement_info("tiny"), moments, {b: sample.rows(b) for b in sample.blocks})
    evals = make_batches(tokenizer, local_text(3000, seed=1), seq_len=32, max_rows=512, batch_size=16)
    return model, m, evals


BEST = pd.Series({"block": 1, "ratio": 7.98, "delta_ppl": 1.0, "relative": 0.01, "base_ppl": 100.0, "r2_lin": 0.97})


def simpson_signal() -> pd.DataFrame:
    """Three models whose blocks' ΔPPL rises with R²_lin within each model (ρ +0.83, +0.89, +0.94), while the models
    with higher R²_lin have lower ΔPPL throughout: pooled over models, the ranks say the opposite."""
    r2_lin = [0.50, 0.52, 0.55, 0.58, 0.60, 0.63]
    rising = [[1, 2, 4, 3, 5, 6], [2, 1, 3, 4, 6, 5], [1, 3, 2, 5, 4, 6]]
    return pd.DataFrame(
        [
            {"model": m, "block": b, "r2_lin": r2_lin[b] + 0.2 * k, "delta_ppl": rising[k][b] + 10.0 * (2 - k)}
            for k, m in enumerate(("x", "y", "z"))
            for b in range(6)
        ]
    )


def test_replacement_sets_build_every_kind(setup):
    model, m, _ = setup
    sets = replacement_sets(m, config=CONFIG)
    assert list(sets) == list(SWAP_KINDS) and all(list(s) == [0, 1] for s in sets.values())
    kinds = {k: type(s[0]) for k, s in sets.items()}
    assert kinds["affine"] is AffineFFN and kinds["lowrank"] is LowRankFFN and kinds["mean"] is MeanFFN
    assert kinds["zero"] is ZeroFFN and type(sets["poly"][0]).__name__ == "PolyProbe"
    d = 32
    assert default_rank(d) == 4 and n_stored(sets["lowrank"][0]) == 2 * d * 4 + d
    assert n_stored(replacement_sets(m, ["lowrank"], rank=3)["lowrank"][1]) == 2 * d * 3 + d
    with pytest.raises(LinrecError, match="affine, lowrank, poly, mean, zero"):
        replacement_sets(m, ["pruned"])
    with pytest.raises(LinrecError, match="probe_config"):
        replacement_sets(m, ["poly"])


def test_swap_kinds_scores_the_original_once_and_matches_swap_deltas(setup, monkeypatch):
    model, m, evals = setup
    sets = replacement_sets(m, ["affine", "zero"])
    expected = swap_deltas(model, evals, sets["zero"], progress=False)
    calls = []
    original = compression.window_nll
    monkeypatch.setattr(compression, "window_nll", lambda *a, **k: calls.append(1) or original(*a, **k))
    table = swap_kinds(model, evals, sets, {0: 0.5, 1: 1.0}, progress=False)
    assert len(calls) == 1  # the unmodified model, once for every kind
    zero = table[table.kind == "zero"].reset_index(drop=True)
    assert zero.delta_ppl.tolist() == pytest.approx(expected.delta_ppl.tolist(), rel=1e-12)
    assert (table.relative == table.delta_ppl / table.base_ppl).all() and table.r2_lin.tolist() == [0.5, 1.0, 0.5, 1.0]
    affine = table[(table.kind == "affine") & (table.block == 1)].iloc[0]
    assert abs(affine.delta_ppl) < 1e-3 * affine.base_ppl  # block 1 is exactly affine: a free swap
    with pytest.raises(LinrecError, match="kinds present: affine, zero"):
        best_block(table, "poly")


def test_best_block_is_chosen_by_r2_lin_not_by_the_reported_text():
    swaps = pd.DataFrame(
        {
            "kind": ["affine"] * 4 + ["zero"] * 4,
            "block": [0, 1, 2, 3] * 2,
            "delta_ppl": [0.5, 0.2, 0.1, 0.05, 9.0, 0.0, 9.0, 9.0],
            "r2_lin": [0.9, 0.8, 0.7, 0.95] * 2,
        }
    )
    assert best_block(swaps, "affine", early=1.0).block == 3
    assert best_block(swaps, "affine", early=0.5).block == 0  # blocks 0 and 1 are the early half; 0 has higher R²
    assert best_block(swaps, "affine", early=0.5, by="delta_ppl").block == 1  # the cheapest on the reported text
    assert best_block(swaps, "zero", early=0.5, by="delta_ppl").block == 1
    # the choice by R²_lin does not move when the evaluation text's ΔPPL does
    shuffled = swaps.assign(delta_ppl=swaps.delta_ppl.sample(frac=1, random_state=0).values)
    assert best_block(shuffled, "affine", early=0.5).block == 0
    with pytest.raises(LinrecError, match="r2_lin, delta_ppl"):
        best_block(swaps, by="ppl")
    with pytest.raises(LinrecError, match="no 'r2_lin' column"):
        best_block(swaps.drop(columns="r2_lin"))


def test_perplexity_helpers_reuse_a_known_base(setup):
    model, m, evals = setup
    affine = replacement_sets(m, ["affine"])["affine"]
    tokens = window_nll(model, evals).tokens
    known = WindowNLL(tokens.double() * math.log(100.0), tokens)  # a planted base: perplexity 100 on every window
    given = swap_deltas(model, evals, affine, progress=False, base=known)
    assert given.base_ppl.tolist() == pytest.approx([100.0] * len(given))
    assert given.delta_ppl.tolist() == pytest.approx((given.ppl - 100.0).tolist())
    frontier = compression_frontier(model, evals, affine, {0: 0.5, 1: 0.9}, progress=False, base=known)
    assert frontier.ppl[0] == pytest.approx(100.0)
    assert frontier.delta_ppl[1] == pytest.approx(frontier.ppl[1] - 100.0)
    assert perplexity(model, evals) != pytest.approx(100.0)


def test_affine_signal_swaps_every_block_of_every_model(setup, monkeypatch):
    model, m, evals = setup
    monkeypatch.setattr(swaps, "load_profile_model", lambda profile, name, checkpoint, progress: (model, None))
    monkeypatch.setattr(swaps, "eval_batches", lambda profile, tokenizer, net, tokens, corpus, name: evals)
    named = [ProfileMeasurement.assembled(replace(m.info, model=name), m.moments, m.samples) for name in ("x", "y")]
    signal = affine_signal(get_profile("smoke"), named, progress=False)
    assert list(zip(signal.model, signal.block)) == [("x", 0), ("x", 1), ("y", 0), ("y", 1)]
    assert signal.r2_lin.tolist() == 2 * m.table().r2_lin.tolist()
    assert signal.delta_ppl[1] == pytest.approx(signal.delta_ppl[3])


def test_early_blocks_signal_and_flags():
    assert early_blocks([3, 0, 2, 1, 4], 0.5) == [0, 1, 2] and early_blocks([5], 0.1) == [5]
    with pytest.raises(LinrecError, match="fraction"):
        early_blocks([0, 1], 0)
    signal = pd.DataFrame(
        {
            "model": ["a"] * 3 + ["b"] * 3,
            "block": [0, 1, 2] * 2,
            "r2_lin": [0.9, 0.5, 0.99, 0.8, 0.95, 0.7],
            "delta_ppl": [1.0, 5.0, 0.1, 2.0, 0.5, 1.5],
        }
    )
    assert signal_correlation(signal) is None  # no model has 4 blocks: no within-model ρ
    flagged = flags(signal).set_index("model")
    assert flagged.loc["a", "flagged"] == 1 and flagged.loc["a", "agree"]
    assert flagged.loc["b", "flagged"] == 2 and flagged.loc["b", "costliest"] == 0 and not flagged.loc["b", "agree"]
    with pytest.raises(LinrecError, match="one swap per"):
        signal_correlation(pd.concat([signal, signal]))
    with pytest.raises(LinrecError, match="model"):
        flags(signal.drop(columns="model"))


def test_signal_correlation_is_within_models_not_pooled():
    signal = simpson_signal()
    pooled = correlation(signal.r2_lin, signal.delta_ppl, "spearman")
    rho = signal_correlation(signal)
    assert pooled.high < 0 < rho.combined.low  # pooled: "lower R²_lin, costlier swap"; within models: the opposite
    assert rho.combined.r == stratified_correlation(signal.r2_lin, signal.delta_ppl, signal.model).combined.r
    assert [c.r for c in rho.groups.values()] == pytest.approx(
        [correlation(g.r2_lin, g.delta_ppl, "spearman").r for _, g in signal.groupby("model")]
    )
    table = signal_table(signal, rho)
    assert list(table["ρ over"]) == ["within models, combined", "x", "y", "z", "pooled over models (not used)"]
    assert table["ρ"].iloc[-1] == pytest.approx(pooled.r) and table.blocks.tolist() == [18, 6, 6, 6, 18]
    verdict = claims_table(compression_claims(BEST, rho)).set_index("claim").reproduced
    assert verdict["low R²_lin flags unsafe replacements"] == "no"  # the pooled ρ alone would have said "yes"
    with pytest.raises(LinrecError, match="one swap per"):
        signal_correlation(pd.concat([signal, signal]))
    with pytest.raises(LinrecError, match="delta_ppl"):
        signal_correlation(signal.drop(columns="delta_ppl"))


def test_compression_claims():
    best = BEST.copy()
    r2_lin, delta = [0.9, 0.5, 0.99, 0.2, 0.7, 0.8], [0.3, 2.0, 0.1, 5.0, 0.6, 0.4]
    strong = stratified_correlation(r2_lin, delta, ["m"] * 6)
    claims = claims_table(compression_claims(best, strong))
    assert list(claims.reproduced) == ["yes", "yes"] and claims["paper (reported)"][0].startswith("8×")
    worse = claims_table(compression_claims(best.copy().replace({0.01: 0.2}), None))
    assert list(worse.reproduced) == ["no", "untestable"]
    assert list(claims_table(compression_claims(best.replace({7.98: 4.0}), strong)).reproduced)[0] == "no"


def test_budget_summary_reads_each_models_last_kept_step():
    from linrec.analysis.compression import budget_summary
    from support.budget_steps import budget_steps

    frontier = pd.DataFrame({"step": [0, 1, 2, 3], "ppl": [10.0, 10.5, 11.0, 11.5], "delta_ppl": [0, 0.5, 1.0, 1.5]})
    table = budget_summary(budget_steps(), frontier, "a").set_index("model")
    assert table.loc["a", "blocks kept (in order)"] == "3, 1, 5" and table.loc["b", "blocks kept (in order)"] == "2"
    assert table.loc["a", "numbers saved (% of the model)"] == pytest.approx(25.0)  # the last kept step's
    assert (
        table.loc["a", "ΔPPL (% of the perplexity)"] == pytest.approx(4.5)
        and table.loc["a", "left out (over the budget)"] == "0, 4"  # each skipped, the next tried
    )
    assert table.loc["b", "left out (over the budget)"] == "none: every block fits"
    from linrec.analysis.compression import _listed

    assert _listed(list(range(8))) == "0, 1, 2, 3, 4, 5, … (8 in all)" and _listed([3, 1]) == "3, 1"
    assert table.loc["a", "R²_lin order, as many blocks: ΔPPL (%)"] == pytest.approx(15.0)  # 3 blocks: +1.5 of 10
    assert pd.isna(table.loc["b", "R²_lin order, as many blocks: ΔPPL (%)"])


@pytest.mark.parametrize(
    ("high", "reading"),
    [
        (-0.01, ": within a model, lower R²_lin goes with costlier swaps."),
        (0.0, ": the interval does not exclude 0 or a positive value"),
        (0.3, ": the interval does not exclude 0 or a positive value"),
    ],
)
def test_the_signal_is_read_as_established_only_when_the_interval_lies_below_zero(high, reading):
    from linrec.stats import Correlation, Stratified

    combined = Correlation(high - 0.4, high - 0.8, high, 9, "spearman", 0.95)
    rho = Stratified(combined, {"a": combined, "b": combined}, {})
    text = compression.signal_reading(rho)
    assert text.startswith("Within each of 2 models and combined over them (9 blocks), Spearman ρ(R²_lin, ΔPPL) = ")
    assert reading in text and f"[{high - 0.8:+.2f}, {high:+.2f}]" in text
    assert compression.signal_reading(None).startswith("No model has four or more blocks")


def test_chapter_5_defaults_come_from_the_profile_and_given_values_win():
    smoke = get_profile("smoke")
    model, signal, tokens = compression.defaults(smoke, None, None, None)
    assert model == smoke.models[0] and signal == list(smoke.models)
    assert tokens == max(smoke.seq_len, (smoke.budget(model).eval_tokens or 0) // 8)
    assert compression.defaults(smoke, "x", ["x"], 7) == ("x", ["x"], 7)


def test_the_early_swap_table_sets_the_papers_figures_beside_this_runs():
    from linrec.report import paper

    row = pd.Series({"block": 1, "original_params": 12_345, "ratio": 7.5, "delta_ppl": 0.5, "delta_ppl_low": 0.25,
                     "delta_ppl_high": 0.75, "base_ppl": 20.0, "relative": 0.025, "r2_lin": 0.9})  # fmt: skip
    table = compression.early_swap_table(row, row, "m", "text", [0, 1])
    assert list(table.columns) == ["paper (reported)", "this run (measured)", "cheapest on this text (optimistic)"]
    assert table["paper (reported)"].to_dict() == paper.EARLY_SWAP_SETUP
    measured = table["this run (measured)"]
    assert measured["block"] == "block 1 (highest R²_lin, 0.900, of early blocks [0, 1])"
    assert (measured["parameter ratio"], measured["relative ΔPPL"]) == ("7.500×", "+2.50%")
    assert table.loc["block", "cheapest on this text (optimistic)"] == "block 1 (lowest ΔPPL of early blocks)"
