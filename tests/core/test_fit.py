"""linrec.core.fit: The closed-form affine map and its held-out R², from moments alone."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from conftest import tiny_model
from linrec.core.capture import capture_moments, run_capture
from linrec.core.fit import DEFAULT_RCOND, BlockReport, fit_affine, held_out, rcond_for, recoverability
from linrec.core.measure import measure
from linrec.core.moment_sink import MomentSink
from linrec.core.moments import Moments, merge_folds
from linrec.core.planted import recover_rows
from linrec.core.sample import RowSample
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError, LinrecWarning
from linrec.models.arch import ffn_blocks
from linrec.stats import participation_ratio


def _planted(fn, n=4000, d=12, folds=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return recover_rows(x, fn(x, g), folds)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_agrees_with_sklearn_on_model_rows(family, tokenizer, text):
    model = tiny_model(family)
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=8)
    keeper, sink = RowSample(sample_rows=10**9), MomentSink(5)  # the sample keeps every row
    run_capture(model, batches, ffn_blocks(model), [keeper, sink], batches.folds(5, 0), progress=False)
    moments = sink.moments()
    for block in (0, 1):
        rows = keeper.rows(block)
        x, y, fold = rows.x.double(), rows.y.double(), rows.fold
        train, test = fold != 2, fold == 2
        reg = LinearRegression().fit(x[train].numpy(), y[train].numpy())
        pred = reg.predict(x[test].numpy())
        fit = fit_affine(merge_folds([m for f, m in enumerate(moments[block]) if f != 2]))
        score = held_out(fit, moments[block][2])
        assert abs(score.r2 - r2_score(y[test].numpy(), pred, multioutput="variance_weighted")) <= 1e-9
        per_feature = r2_score(y[test].numpy(), pred, multioutput="raw_values")
        assert np.abs(score.r2_per_feature.numpy() - per_feature).max() <= 1e-8
        if family == "gpt2":
            assert fit.null_dims == 1  # LayerNorm: features of a normalised row sum to zero


def test_agrees_with_lstsq_on_full_rank_inputs():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(500, 6, generator=g, dtype=torch.float64)
    y = torch.tanh(x @ torch.randn(6, 3, generator=g, dtype=torch.float64)) + 0.1
    fit = fit_affine(Moments.from_rows(x, y))
    sol = torch.linalg.lstsq(torch.cat([x, torch.ones(500, 1, dtype=torch.float64)], 1), y).solution
    assert torch.allclose(fit.weight, sol[:6], atol=1e-10) and torch.allclose(fit.bias, sol[6], atol=1e-10)
    assert fit.null_dims == 0


def test_exactly_affine_block_scores_one():
    a = torch.randn(12, 8, dtype=torch.float64)
    report = _planted(lambda x, g: x @ a + 3.0)
    assert report.r2_lin >= 0.9999 and report.r2_feature_median >= 0.9999


def test_even_function_of_symmetric_inputs_scores_zero():
    report = _planted(lambda x, g: x**2 + x[:, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0]] ** 2)
    assert abs(report.r2_lin) <= 0.05


def test_pure_noise_is_about_zero_and_not_clipped():
    report = _planted(lambda x, g: torch.randn(x.shape[0], 4, generator=g, dtype=torch.float64), n=800)
    assert abs(report.r2_lin) <= 0.05
    assert report.r2_lin < 0  # fitting noise on 640 rows and testing on new rows loses: reported as is


def test_kfold_reports_spread_and_counts():
    report = _planted(
        lambda x, g: torch.sin(x[:, :3]) + 0.3 * torch.randn(x.shape[0], 3, generator=g, dtype=torch.float64)
    )
    assert 0.2 < report.r2_lin < 0.95 and report.r2_lin_std > 0
    assert (report.n_train, report.n_test) == (3200, 800)
    assert 1 <= report.effective_rank_out <= 3


def test_participation_ratio():
    assert participation_ratio(torch.tensor([1.0, 0, 0])) == pytest.approx(1.0)
    assert participation_ratio(torch.tensor([2.0, 2, 2, 2])) == pytest.approx(4.0)


def test_too_few_rows_says_how_many():
    x = torch.randn(20, 32, dtype=torch.float64)
    with pytest.raises(LinrecError, match="at least 33"):
        fit_affine(Moments.from_rows(x, x))


def test_half_precision_captures_find_the_float32_null_direction_and_condition(tokenizer, text):
    """A bfloat16 or float16 capture rounds the LayerNorm's exact null direction up to ~1e-6 of the largest
    eigenvalue; the dtype's cutoff still drops it, so null dims agree and condition numbers stay within 2×."""
    model = tiny_model("gpt2", seed=1)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # trained norms have spread-out gains and biases
        for block in model.transformer.h:
            block.ln_2.weight.copy_(0.5 + torch.rand(block.ln_2.weight.shape, generator=g))
            block.ln_2.bias.copy_(0.3 * torch.randn(block.ln_2.bias.shape, generator=g))
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=4000, batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a float32 capture warns about nothing
        full = measure(model, batches, progress=False)
    assert (full.null_dims == 1).all()
    for dtype in (torch.bfloat16, torch.float16):
        assert rcond_for(dtype) == torch.finfo(dtype).eps ** 2
        with pytest.warns(LinrecWarning, match="condition numbers"):
            half = measure(model.to(dtype), batches, progress=False)
        assert (half.null_dims == full.null_dims).all(), dtype
        ratio = half.input_condition / full.input_condition
        assert ratio.between(0.5, 2).all(), (dtype, ratio.tolist())
        fixed = measure(model, batches, rcond=DEFAULT_RCOND, progress=False)  # the float32 cutoff on 16-bit rows
        assert (fixed.null_dims == 0).all() and (fixed.input_condition > 1e3 * full.input_condition).all()
        model.float()
    assert rcond_for(torch.float32) == rcond_for("torch.float64") == DEFAULT_RCOND


def test_half_precision_keeps_the_small_real_directions_of_anisotropic_inputs(tokenizer, text):
    """Embedding columns scaled over four decades make a NeoX block's inputs strongly anisotropic: real directions
    sit below eps(bfloat16)² of the largest, where a relative cutoff alone would drop them. The rounding clause
    keeps them, so a bfloat16 capture's R²_lin stays within 0.01 of float32's."""
    model = tiny_model("gpt_neox", seed=0)
    with torch.no_grad():
        for layer in model.gpt_neox.layers:
            layer.mlp.dense_h_to_4h.weight *= 5  # pre-activations well into GELU's curvature
        model.gpt_neox.embed_in.weight *= torch.logspace(0, -4, model.config.hidden_size)
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=2000, batch_size=16)
    full = capture_moments(model, batches, blocks=[0], folds=5, progress=False)
    half = capture_moments(model.to(torch.bfloat16), batches, blocks=[0], folds=5, progress=False)
    eps2 = torch.finfo(torch.bfloat16).eps ** 2
    total = merge_folds(full[0])
    scale = total.cxx.diagonal().sqrt()
    lam = torch.linalg.eigvalsh(total.cxx / torch.outer(scale, scale))
    assert int((lam < eps2 * lam.max()).sum()) >= 5  # real directions under the relative cutoff: the check can fail
    r2_full = recoverability(full, rcond_for(torch.float32))[0]
    r2_half = recoverability(half, rcond_for(torch.bfloat16))[0]
    assert r2_full.null_dims == 1 and r2_half.null_dims <= 3
    assert abs(r2_half.r2_lin - r2_full.r2_lin) <= 0.01, (r2_half.r2_lin, r2_full.r2_lin)


@pytest.mark.parametrize("width", [4, 7, 64])
def test_feature_median_is_the_true_median(width):
    """For an even width the median is the mean of the two middle values (numpy's), not the lower one."""
    values = torch.rand(width, generator=torch.Generator().manual_seed(width), dtype=torch.float64)
    report = BlockReport(0, 0.5, 0.0, values, 1.0, 1.0, 1.0, 0, 10, 2, 3, width)
    assert report.r2_feature_median == pytest.approx(float(np.median(values.numpy())), abs=1e-15)
    if width % 2 == 0:
        assert report.r2_feature_median > float(values.median())  # torch's lower median differs
    planted = BlockReport(0, 0.5, 0.0, torch.tensor([0.1, 0.9, 0.3, 0.5]), 1.0, 1.0, 1.0, 0, 10, 2, 3, 4)
    assert planted.r2_feature_median == pytest.approx(0.4)
