"""Every block of a (tiny) profile model scored and dropped: the costs of each kind, the walks of each order, cached."""

from __future__ import annotations

import pytest

import linrec.experiment.pruning as pruning
from linrec.core.measure import Measurement
from linrec.core.resume import decoder_layers, passing
from linrec.core.scores import MEASURED
from linrec.experiment.pruning import KINDS, LAYER, pruning_costs
from linrec.interventions.perplexity import window_nll
from linrec.interventions.surgery import swapped
from linrec.models.arch import ffn_blocks
from support import tiny_captures
from support.study_profile import TINY, load_instead

PROFILE = TINY


@pytest.fixture(scope="module")
def affine_model(tokenizer, text):
    models, _ = tiny_captures.two_models(tokenizer, text, 4)
    return models["affine"]


@pytest.fixture
def loads(affine_model, tokenizer, monkeypatch, tmp_path) -> list[str]:
    """The models the chapter's own capture loads; the shared measurement and chapter 5's affine swaps load the same
    tiny model (no hub, no zoo), into a cache of this test's own."""
    return load_instead(pruning, affine_model, tokenizer, monkeypatch, tmp_path / "cache")


def test_every_block_every_kind_and_every_order(loads):
    out = pruning_costs(PROFILE, "affine", progress=False, cache=False)
    costs = out["costs"].set_index(["kind", "block"])
    assert sorted(set(out["costs"].kind)) == sorted([*KINDS, LAYER]) and (out["costs"].model == "affine").all()
    base = out["costs"].base_ppl.iloc[0]
    assert abs(costs.delta_ppl["affine", 1]) < 1e-3 * base  # block 1's FFN is exactly affine: its swap is free
    assert abs(costs.delta_ppl["first-apart:own", 1]) < 1e-3 * base  # and so is its map of the later positions
    assert costs.params[LAYER, 0] == 0 and costs.original_params[LAYER, 0] > costs.original_params["zero", 0]
    walks = out["walks"]
    assert set(walks.mechanism) == {"affine", LAYER} and MEASURED in set(walks.order)
    first = walks[(walks.mechanism == "affine") & (walks.order == MEASURED) & (walks.step == 1)]
    assert int(first.block.iloc[0]) == int(costs.delta_ppl["affine"].idxmin())  # measured: the cheapest first
    shared = walks[(walks.mechanism == "affine") & (walks.step == 1) & (walks.block == 1)]
    assert shared.ppl.nunique() == 1  # one set, one score, whichever order reached it
    table = out["table"]
    assert table.block_influence.notna().all() and table.r2_lin[1] > 0.999


def test_cached_by_model_and_settings(loads):
    one = pruning_costs(PROFILE, "affine", progress=False)
    again = pruning_costs(PROFILE, "affine", progress=False)
    assert loads == ["affine"] and one["costs"].equals(again["costs"])
    pruning_costs(PROFILE, "affine", budget="10%", progress=False)
    assert loads == ["affine", "affine"]


def test_the_costs_shared_with_chapter_5_and_with_the_walks_are_full_passes_bit_for_bit(loads, affine_model, tokenizer):
    """Each block's affine swap alone comes from :func:`linrec.experiment.swaps.affine_swaps` (shared with chapter 5),
    and a walk's first step is read from the block's own cost, each scored with the layers below replayed: every one
    equals, to the last bit, a full pass of the model so changed, with the maps of the chapter's own capture."""
    out = pruning_costs(PROFILE, "affine", progress=False, cache=False)
    costs = out["costs"].set_index(["kind", "block"])
    text = pruning.profile_corpus(PROFILE, "stdlib-prose")
    fit = pruning.profile_batches(PROFILE, tokenizer, text, model=affine_model.config, name="affine")
    maps = Measurement.capture(affine_model, fit, folds=PROFILE.folds, seed=0, progress=False).replacements("affine")
    evals = pruning.eval_batches(PROFILE, tokenizer, affine_model, None, name="affine")
    layers = decoder_layers(affine_model, ffn_blocks(affine_model))
    dropped = {"affine": lambda b: swapped(affine_model, {b: maps[b]}), LAYER: lambda b: passing([layers[b]])}
    for (kind, block), row in costs.loc[list(dropped)].iterrows():
        with dropped[kind](block):
            assert window_nll(affine_model, evals).ppl == row.ppl, (kind, block)
    first = out["walks"][out["walks"].step == 1]
    for step in first.itertuples():
        assert step.delta_ppl_high == costs.delta_ppl_high[step.mechanism, step.block]
