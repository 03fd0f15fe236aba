"""The pruning scores against the costs: each score read its own way, within models and combined, the budget's
counts and the verdict by the fixed rule, on planted tables with a known answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

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
