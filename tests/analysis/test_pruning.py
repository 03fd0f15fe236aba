"""The pruning scores against the costs: each score read its own way, within models and combined, the budget's
counts and the verdict by the fixed rule, on planted tables with a known answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import linrec.analysis.pruning as linrec_pruning
from linrec.analysis.pruning import budget_table, score_correlations, scored_blocks, verdict
from linrec.errors import LinrecError


def planted(model: str, n: int = 12, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A table whose R²_lin ranks the affine cost exactly (higher R², cheaper), whose Block Influence ranks the
    whole block's removal exactly, and whose output energy is noise."""
    rng = np.random.default_rng(seed)
    cost = rng.permutation(n).astype(float)
    layer = rng.permutation(n).astype(float)
    table = pd.DataFrame({"model": model, "block": range(n), "r2_lin": 1 - cost / 100,
                          "block_influence": layer / 10, "output_energy": rng.normal(size=n)})  # fmt: skip
    costs = pd.concat([
        pd.DataFrame({"model": model, "kind": "affine", "block": range(n), "delta_ppl": cost}),
        pd.DataFrame({"model": model, "kind": "layer", "block": range(n), "delta_ppl": 10 * layer}),
    ])  # fmt: skip
    return table, costs


def test_each_score_is_read_as_a_cost_and_a_perfect_one_gives_one():
    parts = [planted("a"), planted("b", seed=1)]
    blocks = scored_blocks([t for t, _ in parts], [c for _, c in parts])
    rho = score_correlations(blocks).set_index(["score", "cost", "group"])
    assert rho.rho["r2_lin", "affine", "a"] > 0.99  # R² turned round (ρ = 1 enters as 1 - 6/(n³ - n))
    assert rho.rho["r2_lin", "affine", "combined"] > 0.99
    assert rho.rho["block_influence", "layer", "combined"] > 0.99
    assert abs(rho.rho["output_energy", "affine", "combined"]) < 0.6
    assert (rho.low <= rho.rho).all() and (rho.rho <= rho.high).all()
    assert rho.blocks["r2_lin", "affine", "combined"] == 24


def test_the_verdict_follows_the_rule():
    parts = [planted("a"), planted("b", seed=1)]
    blocks = scored_blocks([t for t, _ in parts], [c for _, c in parts])
    walks = pd.DataFrame({
        "model": "a", "mechanism": "affine", "order": ["measured"] * 3 + ["r2_lin"] * 3 + ["output_energy"] * 2,
        "step": [0, 1, 2, 0, 1, 2, 0, 1], "blocks": [0, 1, 2, 0, 1, 2, 0, 1], "numbers_saved": [0, 5, 9, 0, 5, 9, 0, 4],
        "delta_ppl": [0, 0.1, 0.2, 0, 0.1, 0.2, 0, 3.0], "kept": [True] * 7 + [False],
    })  # fmt: skip
    budget = budget_table([walks]).set_index("order")
    assert budget.blocks.to_dict() == {"measured": 2, "r2_lin": 2, "output_energy": 0}
    assert (budget.measured_blocks == 2).all()
    said = verdict(score_correlations(blocks), budget.reset_index())
    assert said["affine"]["best"] == "r2_lin" and said["affine"]["reliable"]
    assert "output_energy" in said["affine"]["better_than"]
    assert said["affine"]["as_good_as_measuring"] == ["r2_lin"]
    assert said["layer"]["best"] == "block_influence"


def test_costs_without_their_columns_are_refused():
    table, costs = planted("a")
    with pytest.raises(LinrecError, match="lack columns"):
        scored_blocks([table], [costs.drop(columns="kind")])


def _sink_costs(affine: list[float], own: list[float], shares: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = pd.DataFrame({"model": "m", "block": range(len(shares)), "first_position_share": shares})
    costs = pd.concat([
        pd.DataFrame({"model": "m", "kind": kind, "block": range(len(values)), "delta_ppl": values, "base_ppl": 25.0})
        for kind, values in [("affine", affine), ("first-apart:mean", own), ("first-apart:own", own)]
    ])  # fmt: skip
    return table, costs


def test_the_sink_blocks_and_whether_the_first_position_apart_rescues_them():
    table, costs = _sink_costs(affine=[100.0, 0.05, 3.0], own=[0.2, 0.04, 3.0], shares=[0.99, 0.6, 0.1])
    sinks = linrec_pruning.sink_swaps(table, costs)
    assert sinks.block.tolist() == [0, 1] and (sinks.base_ppl == 25).all()  # block 2 carries 10 %: no sink
    empty = pd.DataFrame(columns=["score", "cost", "group", "blocks", "rho", "low", "high"])
    budget = pd.DataFrame(columns=["model", "mechanism", "order", "blocks"])
    (claim,) = linrec_pruning.pruning_claims(empty, budget, sinks)[1:]
    assert claim.verdict == "yes"  # 100 → 0.2 is a tenth or less; 0.05 → 0.04 is under 1 % of perplexity 25
    table, costs = _sink_costs(affine=[10.0], own=[5.0], shares=[0.9])
    (claim,) = linrec_pruning.pruning_claims(empty, budget, linrec_pruning.sink_swaps(table, costs))[1:]
    assert claim.verdict == "no" and "m block 0: +10 → +5" in claim.measured
    none = linrec_pruning.sink_swaps(*_sink_costs(affine=[1.0], own=[1.0], shares=[0.2]))
    (claim,) = linrec_pruning.pruning_claims(empty, budget, none)[1:]
    assert claim.verdict == "untestable"
