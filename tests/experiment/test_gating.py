"""The gated blocks of a (tiny) profile model: the curve of every rule and share, the largest share within 1 %, the
gates of two texts compared, the measurement and chapter 11's costs beside them, cached."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import linrec.experiment.gating as gating
import linrec.experiment.pruning as pruning
from linrec.core.sample import Rows
from linrec.errors import LinrecError
from linrec.experiment.budgets import ProbeSettings
from linrec.experiment.gating import choose_blocks, cross_text_agreement, gating_study, second_text
from linrec.experiment.profiles import Profile
from support import tiny_captures
from support.study_profile import load_instead, tiny_profile

PROFILE = tiny_profile(
    corpora=("stdlib-prose", "unicode-records"),  # (a second text quick to tokenise)
    probe=ProbeSettings(sample_rows=512),
)


@pytest.fixture(scope="module")
def affine_model(tokenizer, text):
    models, _ = tiny_captures.two_models(tokenizer, text, 4)
    return models["affine"]


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """One cache for this module's tests: chapter 11's costs, which every gated study reads, computed once."""
    return tmp_path_factory.mktemp("gating-cache")


@pytest.fixture
def loads(affine_model, tokenizer, monkeypatch, module_cache) -> list[str]:
    """The models the gated passes load (recorded); chapter 11's costs, the shared measurement and chapter 5's swaps
    load the same tiny model (no hub, no zoo), into this module's cache."""
    return load_instead(gating, affine_model, tokenizer, monkeypatch, module_cache)


def test_the_costliest_swaps_and_one_of_median_cost_are_chosen():
    costs = pd.DataFrame({"kind": "affine", "block": range(7), "delta_ppl": [0.1, 9.0, 0.3, 0.2, 5.0, 0.25, 0.0]})
    assert choose_blocks(costs) == [1, 3, 4]  # 9 and 5 cost most; of the rest (median 0.2) block 3
    assert choose_blocks(costs, costliest=1, typical=2) == [1, 3, 5]
    mixed = pd.concat([costs, costs.assign(kind="zero", delta_ppl=100.0)])
    assert choose_blocks(mixed) == [1, 3, 4]  # only the affine swap's cost is read
    with pytest.raises(LinrecError, match="no affine swap"):
        choose_blocks(costs.assign(kind="zero"))


def test_the_second_text_is_the_first_other_corpus_of_the_profile():
    assert second_text(PROFILE, "affine") == "unicode-records"
    alone = Profile(**{**PROFILE.__dict__, "corpora": ("stdlib-prose",)})
    with pytest.raises(LinrecError, match="no corpus beside stdlib-prose"):
        second_text(alone, "affine")


def test_every_rule_and_share_of_the_chosen_blocks_beside_chapter_11s_costs(loads):
    out = gating_study(PROFILE, "affine", shares=(0.5, 0.9), progress=False)
    curve = out["curve"]
    assert sorted(set(curve.rule)) == ["logistic", "norm"] and sorted(set(curve.share)) == [0.5, 0.9, 1.0]
    assert sorted(set(curve.block)) == [0, 1] and len(curve) == 2 * 3 * 2 and (curve.model == "affine").all()
    base = float(curve.base_ppl.iloc[0])
    exact = curve[curve.block == 1]  # block 1's FFN is exactly affine: every share of it is free
    assert (exact.delta_ppl.abs() < 1e-3 * base).all() and (exact.r2_routed > 0.999).all()
    assert (curve.routed <= curve.share + 0.01).all() and (curve[curve.share == 1].routed == 1).all()
    # The share-1 map is the plain affine map, fitted on the same rows and scored on the same tokens as chapter 11's
    pruned = pruning.pruning_costs(PROFILE, "affine", progress=False)
    affine = pruned["costs"][pruned["costs"].kind == "affine"].set_index("block").ppl
    for row in curve[curve.share == 1].itertuples():
        assert row.ppl == pytest.approx(affine[row.block], rel=1e-6)
    largest = out["largest"].set_index(["rule", "block"])
    assert (largest.largest_share.xs(1, level="block") == 1).all()  # the exact block routes every row
    blocks = out["blocks"].set_index("block")
    first = pruned["costs"][pruned["costs"].kind == "first-apart:own"].set_index("block")
    assert list(blocks.index) == [0, 1] and (blocks.family == "gpt2").all()
    assert blocks.first_apart.to_dict() == first.delta_ppl.loc[[0, 1]].to_dict()
    assert blocks.r2_lin.to_dict() == pruned["table"].set_index("block").r2_lin.loc[[0, 1]].to_dict()
    assert blocks.first_apart_routed.iloc[0] == pytest.approx(1 - 1 / 32)  # one row of each full window of 32
    agreement = out["agreement"]
    assert sorted(set(agreement.rows_of)) == ["stdlib-prose", "unicode-records"] and len(agreement) == 4
    assert (agreement.gate == "stdlib-prose").all() and (agreement.other == "unicode-records").all()
    assert agreement.alike.between(0, 1).all() and (agreement.held_out_rows > 0).all()
    run = out["run"].iloc[0]
    assert run.second_corpus == "unicode-records" and run.fit_rows == 1024 and run.seconds > 0


def test_cached_by_model_and_settings_and_blocks_checked(loads):
    one = gating_study(PROFILE, "affine", blocks=[1], shares=(0.9,), progress=False)
    again = gating_study(PROFILE, "affine", blocks=[1], shares=(0.9,), progress=False)
    assert loads == ["affine"] and one["curve"].equals(again["curve"])
    assert set(one["curve"].block) == {1} and list(one["blocks"].block) == [1]
    gating_study(PROFILE, "affine", blocks=[1], shares=(0.5,), progress=False)
    assert loads == ["affine", "affine"]
    with pytest.raises(LinrecError, match="no FFN block \\[7\\]"):
        gating_study(PROFILE, "affine", blocks=[7], progress=False)


def test_gates_trained_on_the_same_rows_agree_and_on_unrelated_rows_do_not():
    """Each text's gate trains on its sample's folds but the held-out one; a text and its copy give the same gate
    (every row alike, scores correlated 1); a text whose rows need the FFN along another direction gives a gate that
    agrees with the first about as often as chance."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 6, generator=g)
    fold = torch.arange(2000) % 4
    y = torch.cat([x[:, :3], x[:, :1].exp()], 1)  # the rows of large x0 need the FFN
    other_x = torch.randn(2000, 6, generator=g)
    other_y = torch.cat([other_x[:, :3], other_x[:, 5:].exp()], 1)  # here those of large x5
    a, copy, b = Rows(x, y, fold), Rows(x.clone(), y.clone(), fold), Rows(other_x, other_y, fold)
    same = cross_text_agreement({"a": {0: a}, "copy": {0: copy}}, 0.9, 1e-10)
    assert (same.alike == 1).all() and same.score_correlation.min() == pytest.approx(1)
    assert set(same.rows_of) == {"a", "copy"} and (same.held_out_rows == 500).all()
    apart = cross_text_agreement({"a": {0: a}, "b": {0: b}}, 0.9, 1e-10)
    assert (apart.alike < 0.88).all()  # two gates routing 90 % each at random agree on 82 % of the rows
