"""The zero-shot affine swap of measured models: a free swap for an exactly affine block, labels, order, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import linrec.experiment.swaps as swaps
from linrec.errors import LinrecError
from linrec.experiment.profiles import Profile
from linrec.experiment.swaps import affine_swaps, eval_batches
from support import tiny_captures

FOLDS = 4


@pytest.fixture(scope="module")
def two_models(tokenizer, text):
    return tiny_captures.two_models(tokenizer, text, FOLDS)


PROFILE = Profile(
    name="tiny",
    description="a test profile",
    models=("affine", "gelu"),
    corpora=("stdlib-prose",),
    eval_corpus="stdlib-prose",
    rows_per_block=1024,
    seq_len=32,
    folds=FOLDS,
    seeds=(0,),
    batch_size=16,
    eval_tokens=1024,
    device="cpu",
)


@pytest.fixture
def loaded(two_models, tokenizer, monkeypatch) -> list[tuple[str, str]]:
    """(model, checkpoint) of each load; the loader hands back the captured tiny models (no hub, no zoo)."""
    models, _ = two_models
    calls = []
    monkeypatch.setattr(
        swaps,
        "load_profile_model",
        lambda profile, model, checkpoint, progress: calls.append((model, checkpoint))
        or (models[model].eval(), tokenizer),
    )
    return calls


def test_swap_of_an_affine_block_costs_nothing(two_models, loaded):
    _, captured = two_models
    table = affine_swaps(PROFILE, [captured["affine"]], progress=False)
    delta = table.set_index("block")["delta_ppl"]
    assert abs(delta[1]) < 1e-3 * table["base_ppl"].iloc[0]  # the exactly affine block
    assert abs(delta[0]) > 10 * abs(delta[1])
    assert (table["eval_corpus"] == "stdlib-prose").all() and (table["eval_tokens"] == 1024).all()
    assert (table["model"] == "affine").all()
    np.testing.assert_allclose(table["relative"], table["delta_ppl"] / table["base_ppl"])


@pytest.mark.slow
def test_affine_swaps_keep_order_labels_and_token_budget(two_models, loaded, tokenizer):
    _, captured = two_models
    table = affine_swaps(PROFILE, [captured["gelu"], captured["affine"]], max_tokens=512, progress=False)
    assert list(zip(table["model"], table["block"])) == [("gelu", 0), ("gelu", 1), ("affine", 0), ("affine", 1)]
    assert loaded == [("gelu", "final"), ("affine", "final")]  # each at its measured checkpoint
    assert list(table.columns[:4]) == ["model", "checkpoint", "corpus", "block"]
    assert (table["corpus"] == "local").all()  # the fitted rows' corpus, beside the eval corpus
    assert (table["eval_tokens"] == 512).all() and eval_batches(PROFILE, tokenizer, tokens=512).n_rows == 512
    assert table.groupby("model")["base_ppl"].nunique().eq(1).all()  # one unmodified pass per model
    with pytest.raises(LinrecError, match="no measurements"):
        affine_swaps(PROFILE, [], progress=False)
    with pytest.raises(LinrecError, match="no corpus"):
        affine_swaps(PROFILE, [captured["gelu"]], corpus="wikitext-2", progress=False)


@pytest.mark.slow
def test_cached_swaps_are_scored_once(two_models, loaded, monkeypatch, tmp_path):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    _, captured = two_models
    first = affine_swaps(PROFILE, [captured["gelu"]], max_tokens=512, progress=False, cache=True)
    pd.testing.assert_frame_equal(first, affine_swaps(PROFILE, [captured["gelu"]], max_tokens=512, progress=False))
    assert loaded == [("gelu", "final")] * 2
    again = affine_swaps(PROFILE, [captured["gelu"]], max_tokens=512, progress=False, cache=True)
    pd.testing.assert_frame_equal(again, first)
    assert loaded == [("gelu", "final")] * 2  # read from the cache: no model loaded
    affine_swaps(PROFILE, [captured["gelu"]], max_tokens=256, progress=False, cache=True)
    assert len(loaded) == 3  # another budget is another entry


@pytest.mark.slow
def test_a_block_subset_is_swapped_alone_and_keyed_apart(two_models, loaded, monkeypatch, tmp_path):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    _, captured = two_models
    every = affine_swaps(PROFILE, [captured["gelu"]], max_tokens=512, progress=False)
    one = affine_swaps(PROFILE, [captured["gelu"]], max_tokens=512, progress=False, cache=True, blocks=[1])
    assert list(one["block"]) == [1]
    np.testing.assert_allclose(one["delta_ppl"], every.set_index("block").loc[[1], "delta_ppl"], rtol=1e-6)
    both = affine_swaps(PROFILE, [captured["gelu"]], max_tokens=512, progress=False, cache=True, blocks=[1, 0])
    assert list(both["block"]) == [0, 1]  # a second subset is scored, not read from the first's cache


@pytest.mark.slow
def test_greedy_frontiers_are_greedy_selection_on_the_single_swaps_tokens(two_models, loaded, tokenizer):
    from linrec.core.replacements import fit_replacements
    from linrec.experiment.swaps import greedy_frontiers
    from linrec.interventions.perplexity import greedy_selection

    models, captured = two_models
    single = affine_swaps(PROFILE, [captured["gelu"], captured["affine"]], progress=False)
    found = greedy_frontiers(PROFILE, [captured["gelu"], captured["affine"]], single, "1000%", progress=False)
    assert list(dict.fromkeys(found.model)) == ["gelu", "affine"]
    net = models["affine"].eval()  # written out for one model: its maps, its evaluation tokens, the same rule
    batches = eval_batches(PROFILE, tokenizer, net, 1024, "stdlib-prose", "affine")
    maps = fit_replacements(captured["affine"].moments, "affine", rcond=captured["affine"].rcond)
    expected = greedy_selection(net, batches, maps, "1000%", progress=False, single=single[single.model == "affine"])
    mine = found[found.model == "affine"].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine.drop(columns=["model", "relative"]), expected)
    assert mine.block.iloc[1] == 1  # the exactly affine block is the cheapest, so it goes in first
    np.testing.assert_allclose(mine.relative, mine.delta_ppl / mine.ppl.iloc[0])


def test_greedy_frontiers_refuse_single_swaps_of_other_tokens(two_models, loaded):
    from linrec.experiment.swaps import greedy_frontiers

    _, captured = two_models
    single = affine_swaps(PROFILE, [captured["affine"]], progress=False).assign(base_ppl=1.0)
    with pytest.raises(LinrecError, match="not the same evaluation tokens"):
        greedy_frontiers(PROFILE, [captured["affine"]], single, "5%", progress=False)
    with pytest.raises(LinrecError, match="no single swaps of 'gelu'"):
        greedy_frontiers(PROFILE, [captured["gelu"]], single, "5%", progress=False)
