"""linrec.interventions.crossfeed: Separating inputs from weights: is a block's R²_lin set by its weights or by the
inputs it sees?"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from conftest import tiny_config, tiny_model
from linrec.core.capture import capture_with_sample
from linrec.core.fit import kfold
from linrec.core.sample import Rows
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.interventions.crossfeed import (
    align_inputs,
    crossfeed,
    crossfeed_grid,
    feed,
    norm_manifold,
)
from support import tiny_captures
from support.crossfeed import FOLDS


@pytest.fixture(scope="module")
def two_models(tokenizer, text):
    return tiny_captures.two_models(tokenizer, text, FOLDS)


def test_self_feed_reproduces_the_blocks_own_recoverability(gpt2_capture):
    model, sample = gpt2_capture
    rows = sample.rows(1)
    own = kfold(1, rows.fold_moments(FOLDS))
    fed = crossfeed(rows, model.transformer.h[1].mlp, FOLDS, block=1)
    assert fed.r2_lin == pytest.approx(own.r2_lin, abs=1e-6)
    assert 0.5 < own.r2_lin < 0.99999  # a GELU block: not exactly affine


def test_crossfeeding_into_an_affine_block_is_exactly_linear(gpt2_capture, tokenizer, text):
    """Block j of model B made exactly affine is linear on whatever inputs model A supplies."""
    model, sample = gpt2_capture
    other = tiny_model("gpt_neox", seed=4)
    other.gpt_neox.layers[1].mlp.act = nn.Identity()
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=1024, batch_size=16)
    _, sample_b = capture_with_sample(other, batches, sample_rows=800, folds=FOLDS, progress=False)
    samples = {"a": {b: sample.rows(b) for b in sample.blocks}, "b": {b: sample_b.rows(b) for b in sample_b.blocks}}
    table = crossfeed_grid(samples, {"a": model, "b": other}, FOLDS)
    cell = table.set_index(["input_model", "input_block", "weight_model", "weight_block"])["r2_lin"]
    assert cell[("a", 0, "b", 1)] > 1 - 1e-6
    assert cell[("a", 1, "b", 0)] < 0.99999  # B's GELU block 0 on A's block-1 inputs
    assert cell[("a", 0, "a", 0)] < 0.99999 and cell[("a", 1, "a", 1)] < 0.99999
    config = tiny_config("llama")
    config.hidden_size = 16
    narrow = AutoModelForCausalLM.from_config(config).eval()
    with pytest.raises(LinrecError, match="same width"):
        crossfeed_grid({"a": samples["a"], "n": {0: samples["a"][0]}}, {"a": model, "n": narrow}, FOLDS)


def test_feed_runs_in_the_modules_dtype():
    ffn = nn.Linear(4, 4).to(torch.float64)
    x = torch.randn(10, 4)
    out = feed(ffn, x, chunk=3)
    assert out.dtype == torch.float32 and out.shape == (10, 4)
    torch.testing.assert_close(out, ffn(x.double()).float().detach())


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
    diagonal = (grid.input_model == grid.weight_model) & (grid.input_block == grid.weight_block)
    assert (grid.aligned == ~diagonal).all()  # every other cell is moved into the receiving block's norm coordinates
    rows = captured["affine"].samples[0]
    receiving = norm_manifold(models["gelu"], 1, captured["gelu"].samples[1].x)
    moved = align_inputs(rows.x, norm_manifold(models["affine"], 0, rows.x), receiving).float()
    by_hand = crossfeed(Rows(moved, rows.y, rows.fold), models["gelu"].transformer.h[1].mlp, FOLDS, 1).r2_lin
    assert cell[("affine", 0, "gelu", 1)] == by_hand
    raw = crossfeed_grid({m: c.samples for m, c in captured.items()}, models, FOLDS, align=False)
    assert not raw.aligned.any() and (raw.r2_lin != grid.r2_lin)[~diagonal].all()
    only = crossfeed_grid({"gelu": captured["gelu"].samples}, models, FOLDS, blocks=[1])
    assert len(only) == 1
    with pytest.raises(LinrecError, match="no model given"):
        crossfeed_grid({m: c.samples for m, c in captured.items()}, {"gelu": models["gelu"]}, FOLDS)
    with pytest.raises(LinrecError, match="no sampled rows"):
        crossfeed_grid({"gelu": captured["gelu"].samples}, models, FOLDS, blocks=[5])


def test_spread_blocks_takes_the_first_and_the_last_and_none_means_every_block():
    from linrec.interventions.crossfeed import spread_blocks

    assert spread_blocks(12, 3) == [0, 6, 11] and spread_blocks(4, 1) == [0] and spread_blocks(2, 5) == [0, 1]
    assert spread_blocks(12, None) is None
