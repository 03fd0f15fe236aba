"""linrec.analysis.identity: What a depth profile is of, and what alone separates two: family (and MLP activation),
seed, training."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from linrec.analysis.identity import Identity, distance_table, model_identity, pair_kind
from linrec.errors import LinrecError
from linrec.experiment.profiles import get_profile
from support.tiny_captures import planted


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
    table = planted(
        {
            ("g", "final"): [0.9, 0.5],
            ("g1", "final"): [0.9, 0.6],
            ("n", "final"): [0.5, 0.9],
            ("g", "init"): [0.98, 0.98],
        }
    )
    ids = {"g": Identity("gpt2", 0), "g1": Identity("gpt2", 1), "n": Identity("gpt_neox", 0)}
    d = distance_table(table, ids).set_index(["a", "b"])
    assert set(d["kind"]) == {"seed", "family, same activation", "training"}
    assert d.loc[("g @ final", "g1 @ final"), "distance"] == pytest.approx(math.sqrt(0.01 / 2))
    assert d.loc[("g @ init", "g @ final"), "kind"] == "training"  # listed as (init, trained)
    assert d.loc[("g @ init", "g @ final"), "mean_difference"] == pytest.approx(0.98 - 0.7)
    assert len(d) == 3 and ("g1 @ final", "n @ final") not in d.index  # family and seed differ at once
    with pytest.raises(LinrecError, match="identities"):
        distance_table(table, {"g": Identity("gpt2", 0)})
    others = pd.concat([table, planted({("s", "final"): [0.9, 0.5]}, corpus="prose"),
                        planted({("m", "final"): [0.9, 0.5, 0.7]})])  # fmt: skip
    ids |= {"s": Identity("gpt2", 2), "m": Identity("gpt2", 3)}
    assert len(distance_table(others, ids)) == 3  # another text or another depth is no comparison


def test_identities():
    assert model_identity(get_profile("smoke"), "zoo-gpt2-seed1") == Identity("gpt2", 1)
    assert model_identity(get_profile("smoke"), "zoo-llama") == Identity("llama", 0)
    with pytest.raises(LinrecError, match="hub model"):
        model_identity(get_profile("paper"), "openai-community/gpt2")
