"""Cross-feeding and input normalisation: agreement with the core, planted affine blocks, whitening."""

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from conftest import tiny_config, tiny_model
from linrec.interventions.crossfeed import crossfeed, crossfeed_table, feed, normalised_table
from linrec.core.normalise import input_transform
from linrec.errors import LinrecError
from linrec.core.moments import Moments
from linrec.core.fit import fit_affine, kfold
from linrec.core.sample import capture_with_sample
from linrec.data.tokens import make_batches

FOLDS = 4


@pytest.fixture(scope="module")
def gpt2_capture(tokenizer, text):
    model = tiny_model("gpt2", seed=3)
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=16)
    _, sample = capture_with_sample(model, batches, max_rows=1500, folds=FOLDS, progress=False)
    return model, sample


def test_self_feed_reproduces_the_blocks_own_recoverability(gpt2_capture):
    model, sample = gpt2_capture
    rows = sample.rows(1)
    own = kfold(1, rows.fold_moments(FOLDS))
    fed = crossfeed(rows, model.transformer.h[1].mlp, FOLDS, block=1)
    assert fed.r2_lin == pytest.approx(own.r2_lin, abs=1e-6)
    assert 0.5 < own.r2_lin < 0.99999  # a GELU block: not exactly affine


def test_crossfeeding_into_an_affine_block_is_exactly_linear(gpt2_capture):
    """Block j of model B made exactly affine is linear on whatever inputs model A supplies."""
    _, sample = gpt2_capture
    other = tiny_model("gpt_neox", seed=4)
    other.gpt_neox.layers[1].mlp.act = nn.Identity()
    table = crossfeed_table(sample, other, pairs=[(0, 1), (1, 0)], folds=FOLDS)
    assert list(zip(table.block_a, table.block_b, strict=True)) == [(0, 1), (1, 0)]
    assert table.r2_lin[0] > 1 - 1e-6
    assert table.r2_lin[1] < 0.99999  # B's GELU block 0 on A's block-1 inputs
    assert (table.r2_lin_a < 0.99999).all()
    config = tiny_config("llama")
    config.hidden_size = 16
    narrow = AutoModelForCausalLM.from_config(config).eval()
    with pytest.raises(LinrecError, match="same width"):
        crossfeed_table(sample, narrow, pairs=[(0, 0)], folds=FOLDS)


def test_whitening_gives_identity_covariance_and_keeps_the_closed_form_map():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 8, generator=g, dtype=torch.float64) @ torch.randn(8, 8, generator=g, dtype=torch.float64) + 5
    x = torch.cat([x, x[:, :1] + x[:, 1:2]], 1)  # one exact null direction (like a LayerNorm's)
    y = torch.tanh(x[:, :4]) + x[:, 4:8]
    train = Moments.from_rows(x, y)
    white = input_transform(train, "whiten", variance=2.0)
    z = white(x)
    assert white.null_dims == 1
    cov = torch.cov(z.T, correction=0)
    expected = torch.tensor([0.0] + [2.0] * 8, dtype=torch.float64)
    torch.testing.assert_close(torch.linalg.eigvalsh(cov), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(z.mean(0), x.mean(0))  # the mean is kept
    # the closed form on whitened inputs is the same affine map in other coordinates
    torch.testing.assert_close(fit_affine(Moments.from_rows(z, y))(z), fit_affine(train)(x), rtol=1e-6, atol=1e-6)
    std = input_transform(train, "standardise", keep_mean=False)(x)
    average = float(train.cxx.diagonal().sum() / (train.n * 9))
    torch.testing.assert_close(std.var(0, correction=0), torch.full((9,), average, dtype=torch.float64))
    torch.testing.assert_close(std.mean(0), torch.zeros(9, dtype=torch.float64))
    with pytest.raises(LinrecError, match="standardise, whiten"):
        input_transform(train, "sphere")


def test_normalised_recoverability(gpt2_capture):
    model, sample = gpt2_capture
    whitened = normalised_table(model, sample, "whiten", FOLDS, blocks=[0, 1])
    assert list(whitened.block) == [0, 1] and (whitened.null_dims == 1).all()  # LayerNorm-fed: one null direction
    own = kfold(0, sample.rows(0).fold_moments(FOLDS)).r2_lin
    assert whitened.r2_lin[0] == pytest.approx(own)
    assert (whitened.r2_lin_norm != whitened.r2_lin).all() and whitened.r2_lin_norm.between(-1, 1).all()
    mlp = model.transformer.h[1].mlp
    gelu, mlp.act = mlp.act, nn.Identity()
    try:
        standardised = normalised_table(model, sample, "standardise", FOLDS, blocks=[1])
    finally:
        mlp.act = gelu
    assert standardised.r2_lin_norm[0] > 1 - 1e-6  # an affine FFN stays affine on any inputs


def test_feed_runs_in_the_modules_dtype():
    ffn = nn.Linear(4, 4).to(torch.float64)
    x = torch.randn(10, 4)
    out = feed(ffn, x, chunk=3)
    assert out.dtype == torch.float32 and out.shape == (10, 4)
    torch.testing.assert_close(out, ffn(x.double()).float().detach())
