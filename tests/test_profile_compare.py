"""Comparing depth profiles: planted profiles with known summaries, grids with known variance shares,
agreement of cross-feeding and swaps with the core on tiny models."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from conftest import measurement_info, tiny_model
from linrec.errors import LinrecError
from linrec.experiment.measurement import Measurement
from linrec.core.moments import Moments
from linrec.analysis.depth import (Identity, activation_verdict, conditioning_table, corpus_summary, crossfeed_grid,
                                    depth_summary, depth_table, distance_table, drift_table, grid_shares,
                                    heterogeneity_claims, model_identity, normalisation_table, pair_kind,
                                    profile_distance, swap_table, training_checkpoints, training_losses,
                                    training_summary)
from linrec.experiment.profiles import Profile, get_profile
from linrec.core.fit import kfold
from linrec.core.sample import capture_with_sample
from linrec.data.tokens import make_batches

FOLDS = 4


def planted(profiles: dict[tuple[str, str], list[float]], std: float = 0.001, corpus: str = "c") -> pd.DataFrame:
    """A depth table with the given R²_lin per block for each (model, checkpoint)."""
    return pd.DataFrame([{"model": m, "checkpoint": c, "corpus": corpus, "block": b, "r2_lin": r, "r2_lin_std": std}
                         for (m, c), values in profiles.items() for b, r in enumerate(values)])


# ---------------------------------------------------------------------------------------------
# Summaries of planted profiles


def test_depth_summary_finds_range_jump_and_shape():
    table = planted({("up-down", "final"): [0.99, 0.2, 0.95, 0.5], ("rising", "final"): [0.5, 0.6, 0.7, 0.8]})
    s = depth_summary(table).set_index("model")
    assert s.loc["up-down", "r2_range"] == pytest.approx(0.79)
    assert s.loc["up-down", "max_jump"] == pytest.approx(0.79) and s.loc["up-down", "jump"] == "0→1"
    assert s.loc["up-down", "jump_sigma"] == pytest.approx(0.79 / math.sqrt(2e-6))
    assert (s.loc["up-down", "rises"], s.loc["up-down", "falls"]) == (1, 2)
    assert s.loc["up-down", "non_monotone"] and not s.loc["rising", "non_monotone"]
    assert (s.loc["rising", "block_min"], s.loc["rising", "block_max"]) == (0, 3)
    noisy = depth_summary(planted({("up-down", "final"): [0.99, 0.2, 0.95, 0.5]}, std=0.5)).iloc[0]
    assert (noisy["rises"], noisy["falls"], noisy["non_monotone"]) == (0, 0, False)  # steps within the noise
    with pytest.raises(LinrecError, match="more than once"):
        depth_summary(pd.concat([table, table]))


def test_heterogeneity_claims_judge_each_part():
    paper_like = heterogeneity_claims(planted({("m", "final"): [0.995, 0.25, 0.9, 0.6]})).set_index("claim")
    assert (paper_like["reproduced"] == "yes").all()
    flat = heterogeneity_claims(planted({("m", "final"): [0.98, 0.97, 0.96]})).set_index("claim")["reproduced"]
    assert flat.tolist() == ["no", "no", "no", "no"]
    apart = heterogeneity_claims(planted({("m", "final"): [0.995, 0.6, 0.25]})).set_index("claim")["reproduced"]
    assert apart.tolist() == ["yes", "yes", "no", "no"]  # both extremes, but not adjacent; monotone


def test_profile_distance_is_the_rms_difference():
    a = planted({("a", "final"): [0.9, 0.8, 0.7]})
    b = planted({("b", "final"): [0.9, 0.5, 0.3]})
    assert profile_distance(a, b) == pytest.approx(math.sqrt((0.3**2 + 0.4**2) / 3))
    assert profile_distance(a, a) == 0
    with pytest.raises(LinrecError, match="same depth"):
        profile_distance(a, planted({("c", "final"): [0.9, 0.8]}))


def test_pair_kinds():
    gpt2, neox, llama = Identity("gpt2", 0, True), Identity("gpt_neox", 0, True), Identity("llama", 0, True)
    assert pair_kind(gpt2, Identity("gpt2", 1, True)) == "seed"
    assert pair_kind(gpt2, neox) == "family, same activation"
    assert pair_kind(gpt2, llama) == "family, other activation"
    assert pair_kind(gpt2, Identity("gpt2", 0, False)) == "training"
    assert pair_kind(Identity("gpt2", 0, False), Identity("llama", 0, False)) == "family, other activation (init)"
    assert pair_kind(Identity("gpt2", 0, False), Identity("gpt2", 1, False)) == "seed (init)"
    assert pair_kind(gpt2, Identity("gpt2", 1, False)) is None  # seed and training differ at once
    assert pair_kind(gpt2, Identity("llama", 0, False)) is None
    assert pair_kind(Identity("gpt2", 1, True), neox) is None  # family and seed at once
    assert pair_kind(Identity("gpt2", None, True), Identity("gpt_neox", None, True)) == "family, same activation"  # hub


def test_distance_table_labels_every_single_factor_pair():
    table = planted({("g", "final"): [0.9, 0.5], ("g1", "final"): [0.9, 0.6], ("n", "final"): [0.5, 0.9],
                     ("g", "init"): [0.98, 0.98]})
    ids = {"g": ("gpt2", 0), "g1": ("gpt2", 1), "n": ("gpt_neox", 0)}
    d = distance_table(table, ids).set_index(["a", "b"])
    assert set(d["kind"]) == {"seed", "family, same activation", "training"}
    assert d.loc[("g @ final", "g1 @ final"), "distance"] == pytest.approx(math.sqrt(0.01 / 2))
    assert d.loc[("g @ init", "g @ final"), "kind"] == "training"  # listed as (init, trained)
    assert d.loc[("g @ init", "g @ final"), "mean_difference"] == pytest.approx(0.98 - 0.7)
    assert len(d) == 3 and ("g1 @ final", "n @ final") not in d.index  # family and seed differ at once
    with pytest.raises(LinrecError, match="identities"):
        distance_table(table, {"g": ("gpt2", 0)})


def test_drift_and_training_summary():
    table = planted({("m", "init"): [0.1, 0.1], ("m", "step10"): [0.3, 0.5], ("m", "step20"): [0.5, 0.8],
                     ("m", "final"): [0.6, 0.9]})
    table["step"] = table["checkpoint"].map({"init": 0, "step10": 10, "step20": 20, "final": 30})
    drift = drift_table(table).set_index("checkpoint")
    assert drift.loc["final", "distance_to_final"] == 0
    start = math.sqrt((0.5**2 + 0.8**2) / 2)
    assert drift.loc["init", "distance_to_final"] == pytest.approx(start)
    s = training_summary(table).iloc[0]
    assert (s["first"], s["last"], s["halfway_step"]) == ("init", "final", 20)  # step10 is 0.32 away, > start / 2
    assert s["mean_first"] == pytest.approx(0.1) and s["range_last"] == pytest.approx(0.3)
    with pytest.raises(LinrecError, match="no 'final'"):
        drift_table(table[table["checkpoint"] != "final"])


def test_corpus_summary():
    same = pd.concat([planted({("m", "final"): [0.9, 0.5, 0.7]}, corpus=c) for c in ("a", "b", "c")])
    s = corpus_summary(same).iloc[0]
    assert s["corpus_spread_max"] == 0 and s["spearman_min"] == pytest.approx(1) and s["depth_range"] == pytest.approx(0.4)
    shifted = pd.concat([planted({("m", "final"): [0.9, 0.5, 0.7]}, corpus="a"),
                         planted({("m", "final"): [0.8, 0.4, 0.6]}, corpus="b")])
    s = corpus_summary(shifted).iloc[0]
    assert s["corpus_spread_mean"] == pytest.approx(0.1) and s["spread_to_range"] == pytest.approx(0.25)
    assert s["spearman_min"] == pytest.approx(1)  # a shift keeps the order of the blocks
    with pytest.raises(LinrecError, match="one corpus"):
        corpus_summary(planted({("m", "final"): [0.9, 0.5]}))


# ---------------------------------------------------------------------------------------------
# Grids


def grid_of(values: np.ndarray, models=("A", "B")) -> pd.DataFrame:
    keys = [(m, b) for m in models for b in range(values.shape[0] // len(models))]
    return pd.DataFrame([{"input_model": ki[0], "input_block": ki[1], "weight_model": kj[0], "weight_block": kj[1],
                          "r2_lin": values[i, j], "r2_lin_std": 0.0}
                         for i, ki in enumerate(keys) for j, kj in enumerate(keys)])


def test_grid_shares_of_planted_grids():
    rng = np.random.default_rng(0)
    columns = np.tile(rng.uniform(0, 1, 6), (6, 1))  # R² set by the FFN alone
    s = grid_shares(grid_of(columns))
    assert (s.weights, s.inputs) == (pytest.approx(1), pytest.approx(0, abs=1e-12)) and s.same_activation is None
    assert s.own_gap == pytest.approx(0, abs=1e-12)
    assert grid_shares(grid_of(columns - 0.2 * np.eye(6))).own_gap == pytest.approx(-0.2)  # less linear on own inputs
    assert grid_shares(grid_of(columns), identities={"A": ("gpt2", 0), "B": ("gpt_neox", 0)}).same_activation
    assert not grid_shares(grid_of(columns), identities={"A": ("gpt2", 0), "B": ("llama", 0)}).same_activation
    assert s.follows_weights.r == pytest.approx(1) and s.cells == 36
    rows = columns.T  # R² set by the inputs alone
    s = grid_shares(grid_of(rows))
    assert (s.weights, s.inputs) == (pytest.approx(0, abs=1e-12), pytest.approx(1))
    assert s.follows_inputs.r == pytest.approx(1)
    additive = columns + 2 * rows
    s = grid_shares(grid_of(additive))
    assert s.inputs / s.weights == pytest.approx(4) and s.interaction == pytest.approx(0, abs=1e-12)
    three = grid_of(rng.uniform(0, 1, (9, 9)), models=("A", "B", "C"))
    assert grid_shares(three, models=["A", "B"]).cells == 36
    with pytest.raises(LinrecError, match="not complete"):
        grid_shares(grid_of(columns).iloc[:-1])
    with pytest.raises(LinrecError, match="no model"):
        grid_shares(three, models=["A", "Z"])


@pytest.fixture(scope="module")
def two_models(tokenizer, text):
    """Two tiny GPT-2s (one with its block-1 activation removed, so that FFN is exactly affine) and their captures."""
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=1024, batch_size=16)
    models = {"gelu": tiny_model("gpt2", seed=1), "affine": tiny_model("gpt2", seed=2)}
    models["affine"].transformer.h[1].mlp.act = nn.Identity()
    captured = {}
    for name, model in models.items():
        moments, sample = capture_with_sample(model, batches, max_rows=800, folds=FOLDS, progress=False)
        info = measurement_info(name, folds=FOLDS, rows=batches.n_rows)
        captured[name] = Measurement(info, moments, {b: sample.rows(b) for b in sample.blocks})
    return models, captured


def test_crossfeed_grid_agrees_with_the_core(two_models):
    models, captured = two_models
    grid = crossfeed_grid({m: c.samples for m, c in captured.items()}, models, FOLDS)
    assert len(grid) == 16
    cell = grid.set_index(["input_model", "input_block", "weight_model", "weight_block"])["r2_lin"]
    for m, c in captured.items():  # the diagonal is each block on its own inputs
        for b in (0, 1):
            assert cell[(m, b, m, b)] == pytest.approx(kfold(b, c.samples[b].fold_moments(FOLDS)).r2_lin, abs=1e-6)
    affine = grid[(grid["weight_model"] == "affine") & (grid["weight_block"] == 1)]
    assert (affine["r2_lin"] > 1 - 1e-6).all()  # an affine FFN is linear on anyone's inputs
    assert (grid.loc[grid["weight_model"] == "gelu", "r2_lin"] < 1 - 1e-4).all()
    only = crossfeed_grid({"gelu": captured["gelu"].samples}, models, FOLDS, blocks=[1])
    assert len(only) == 1
    with pytest.raises(LinrecError, match="no model given"):
        crossfeed_grid({m: c.samples for m, c in captured.items()}, {"gelu": models["gelu"]}, FOLDS)
    with pytest.raises(LinrecError, match="no sampled rows"):
        crossfeed_grid({"gelu": captured["gelu"].samples}, models, FOLDS, blocks=[5])


def test_normalisation_table_keeps_an_affine_block_linear(two_models):
    models, captured = two_models
    table = normalisation_table(models["affine"], captured["affine"])
    assert set(table["normalisation"]) == {"standardise", "whiten"} and (table["model"] == "affine").all()
    block1 = table[table["block"] == 1]
    assert (block1["r2_lin_norm"] > 1 - 1e-6).all() and (block1["change"].abs() < 1e-6).all()
    torch.testing.assert_close(torch.tensor(table["change"].to_numpy()),
                               torch.tensor((table["r2_lin_norm"] - table["r2_lin"]).to_numpy()))


def test_swap_of_an_affine_block_costs_nothing(two_models, tokenizer):
    models, captured = two_models
    profile = Profile(name="tiny", description="a test profile", models=("affine",), corpora=("stdlib-prose",),
                      eval_corpus="stdlib-prose", rows_per_block=1024, seq_len=32, folds=FOLDS, seeds=(0,),
                      batch_size=16, eval_tokens=1024, device="cpu")
    table = swap_table(profile, captured["affine"], models["affine"].eval(), tokenizer)
    delta = table.set_index("block")["delta_ppl"]
    assert abs(delta[1]) < 1e-3 * table["base_ppl"].iloc[0]  # the exactly affine block
    assert abs(delta[0]) > 10 * abs(delta[1])
    assert (table["eval_corpus"] == "stdlib-prose").all() and (table["eval_tokens"] == 1024).all()
    assert (table["model"] == "affine").all()
    np.testing.assert_allclose(table["relative"], table["delta_ppl"] / table["base_ppl"])


# ---------------------------------------------------------------------------------------------
# Inputs, identities, checkpoints


def test_conditioning_table_of_planted_inputs():
    g = torch.Generator().manual_seed(0)
    d, n = 8, 4000
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x[:, 0] *= 10  # one outlier dimension: variance 100 against 1
    y = x @ torch.randn(d, d, generator=g, dtype=torch.float64) + 0.1 * torch.randn(n, d, generator=g, dtype=torch.float64)
    fold = torch.arange(n) % FOLDS
    moments = {0: [Moments.from_rows(x[fold == f], y[fold == f]) for f in range(FOLDS)]}
    m = Measurement(measurement_info("p", corpus="c"), moments, {})
    row = conditioning_table(m).iloc[0]
    assert row["outlier_ratio"] == pytest.approx(100, rel=0.15)
    assert row["effective_rank_in"] == pytest.approx((100 + 7) ** 2 / (100**2 + 7), rel=0.1)  # ≈ 1.1: one dominant direction
    assert row["input_rms"] == pytest.approx(math.sqrt(107 / 8), rel=0.05)
    assert row["log10_condition"] == pytest.approx(math.log10(row["input_condition"]))


def test_identities_and_checkpoints():
    assert model_identity("smoke", "zoo-gpt2-seed1") == ("gpt2", 1)
    assert model_identity("smoke", "zoo-llama") == ("llama", 0)
    with pytest.raises(LinrecError, match="hub model"):
        model_identity("paper", "openai-community/gpt2")
    entry = get_profile("smoke").zoo.entry("zoo-neox")
    points = training_checkpoints("smoke", "zoo-neox")
    assert [s for _, s in points] == list(entry.checkpoints)
    assert points[0][0] == "init" and points[-1][0] == "final" and points[1][0] == f"step{entry.checkpoints[1]}"
    pythia = training_checkpoints("paper", "EleutherAI/pythia-160m")
    assert pythia[0] == ("init", 0) and pythia[-1] == ("step143000", 143000)
    assert training_checkpoints("paper", "openai-community/gpt2") == [("final", None)]
    assert training_losses("paper", "EleutherAI/pythia-160m").empty


def test_depth_table_adds_steps(two_models):
    _, captured = two_models
    m = captured["gelu"]
    renamed = [Measurement(replace(m.info, model="zoo-gpt2", checkpoint=c), m.moments, m.samples) for c in ("init", "final")]
    table = depth_table(renamed, "smoke")
    steps = dict(zip(table["checkpoint"], table["step"]))
    assert steps == {"init": 0, "final": get_profile("smoke").zoo.entry("zoo-gpt2").steps}
    assert len(table) == 4 and "step" not in depth_table(renamed).columns
    with pytest.raises(LinrecError, match="no measurements"):
        depth_table([])


# ---------------------------------------------------------------------------------------------
# The verdict


def test_verdict_follows_the_numbers():
    profiles = planted({("g", "final"): [0.9, 0.4, 0.8], ("g1", "final"): [0.85, 0.45, 0.8],
                        ("n", "final"): [0.3, 0.9, 0.5], ("g", "init"): [0.95, 0.95, 0.95],
                        ("g1", "init"): [0.95, 0.95, 0.951], ("n", "init"): [0.96, 0.96, 0.96]})
    ids = {"g": ("gpt2", 0), "g1": ("gpt2", 1), "n": ("gpt_neox", 0)}
    distances = distance_table(profiles, ids)
    columns = np.tile(np.linspace(0.2, 1, 6), (6, 1))
    same = {"A": ("gpt2", 0), "B": ("gpt_neox", 0)}
    shares = {"all": grid_shares(grid_of(columns + 0.01 * columns.T), identities=same),
              "mixed": grid_shares(grid_of(columns), identities={"A": ("gpt2", 0), "B": ("llama", 0)}),
              "inputs": grid_shares(grid_of(columns.T)),
              "pairs": grid_shares(grid_of(np.outer([1, -1] * 3, [1, -1] * 3) + 0.3 * columns))}
    normalised = pd.DataFrame({"normalisation": ["whiten"] * 3, "change": [0.01, -0.02, 0.0]})
    v = activation_verdict(profiles, distances, shares, normalised).set_index("test")["supports"]
    assert v["block-to-block differences: trained vs random init"] == "learned"  # all three grew from a flat init
    flat = profiles.assign(r2_lin=np.where(profiles["checkpoint"] == "init", profiles["r2_lin"] + [0.8, 0, -0.8] * 6,
                                           profiles["r2_lin"]))
    shrunk = activation_verdict(flat, distance_table(flat, ids)).set_index("test")["supports"]
    assert shrunk["block-to-block differences: trained vs random init"] == "architecture"  # init ranges 1.6, trained 0.4-0.6
    assert v["trained: seed vs family, same activation"] == "architecture"  # families far apart, seeds close
    assert v["cross-feeding (all)"] == "learned"  # one activation (GELU): the weights are what training made
    assert v["cross-feeding (mixed)"] == "weights"  # GELU and SwiGLU: architecture and training not separated
    assert v["cross-feeding (inputs)"] == "inputs"
    assert v["cross-feeding (pairs)"] == "inconclusive"  # the interaction outweighs both main effects
    assert v["inputs whitened"] == "learned"  # |change| 0.01 against a range of ~0.5
    close = planted({("g", "final"): [0.9, 0.4, 0.8], ("g1", "final"): [0.5, 0.9, 0.4], ("n", "final"): [0.85, 0.45, 0.8]})
    v = activation_verdict(close, distance_table(close, ids)).set_index("test")["supports"]
    assert v["trained: seed vs family, same activation"] == "learned"  # seeds differ more than families
    assert len(v) == 1  # no init, no grid, no normalisation: those tests are left out
