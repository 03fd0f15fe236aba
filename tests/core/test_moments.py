"""linrec.core.moments: Float64 sufficient statistics of (X, Y) rows: everything the closed-form fit and R² need."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score

from conftest import tiny_model
from linrec.core.accumulator import MomentAccumulator
from linrec.core.capture import CaptureOptions, capture_moments, capture_positions
from linrec.core.fit import half_training, kfold, recoverability, report_table, variance_share
from linrec.core.measure import check_skip_first, measure
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from support.moments import _close, _rows, hooked_rows


def _sklearn_r2(x: np.ndarray, y: np.ndarray, fold: np.ndarray, train_of: list[list[int]]) -> float:
    """Mean held-out variance-weighted R² over folds, each fitted by scikit-learn on the folds ``train_of[f]``."""
    scores = []
    for f, train in enumerate(train_of):
        fit = LinearRegression().fit(x[np.isin(fold, train)], y[np.isin(fold, train)])
        test = fold == f
        scores.append(r2_score(y[test], fit.predict(x[test]), multioutput="variance_weighted"))
    return float(np.mean(scores))


@pytest.fixture(scope="module", params=[frozenset(), frozenset({"output-covariance"})], ids=["default", "full-Cyy"])
def captured(tokenizer, text, request):
    """Block 1 of a tiny GPT-NeoX model over 96 windows of 16 tokens, 3 folds: the split capture and its rows (Cyy's
    diagonal alone, as by default, or whole)."""
    model = tiny_model("gpt_neox")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 96, batch_size=8)
    options = CaptureOptions(folds=3, seed=0, progress=False, extras=request.param)
    split = capture_positions(model, batches, blocks=[1], options=options)
    x, y = hooked_rows(model, batches, 1)
    fold = batches.folds(3, 0)[batches.seq_index]
    return split, x, y, fold.numpy()


def test_the_two_parts_are_the_first_position_and_the_rest(captured):
    split, x, y, fold = captured
    for f in range(3):
        first = Moments.from_rows(x[fold == f][:, 0], y[fold == f][:, 0])
        later = Moments.from_rows(
            x[fold == f][:, 1:].reshape(-1, x.shape[-1]), y[fold == f][:, 1:].reshape(-1, y.shape[-1])
        )
        for got, want in ((split.first[1][f], first), (split.later[1][f], later)):
            assert got.n == want.n
            for name in ("mean_x", "mean_y", "cxx", "cxy", "cyy" if got.full_output else "output_ss"):
                a, b = getattr(got, name), getattr(want, name)
                assert (a - b).norm() <= 1e-12 * b.norm(), (f, name)


def test_every_row_is_both_parts_merged_and_matches_a_capture_of_all(captured, tokenizer, text):
    split, x, y, fold = captured
    every = split.every()[1]
    for f in range(3):
        want = Moments.from_rows(x[fold == f].reshape(-1, x.shape[-1]), y[fold == f].reshape(-1, y.shape[-1]))
        assert every[f].n == want.n
        assert (every[f].cxx - want.cxx).norm() <= 1e-12 * want.cxx.norm()
        assert (every[f].output_ss - want.output_ss).norm() <= 1e-12 * want.output_ss.norm()
        assert not every[f].full_output or (every[f].cyy - want.cyy).norm() <= 1e-12 * want.cyy.norm()


def test_first_position_columns_agree_with_scikit_learn(captured):
    split, x, y, fold = captured
    report = recoverability(split)[0]
    n, t, d = x.shape
    later_x, later_y = x[:, 1:].reshape(-1, d).numpy(), y[:, 1:].reshape(-1, y.shape[-1]).numpy()
    later_fold = np.repeat(fold, t - 1)
    others = [[g for g in range(3) if g != f] for f in range(3)]
    assert report.r2_lin_after_first == pytest.approx(_sklearn_r2(later_x, later_y, later_fold, others), abs=1e-9)
    every_y = y.reshape(-1, y.shape[-1]).numpy()
    ss = lambda rows: ((rows - every_y.mean(0)) ** 2).sum()  # noqa: E731 (about the mean of every row)
    assert report.first_position_share == pytest.approx(ss(y[:, 0].numpy()) / ss(every_y), abs=1e-12)
    every_x = x.reshape(-1, d).numpy()
    assert report.r2_lin == pytest.approx(_sklearn_r2(every_x, every_y, np.repeat(fold, t), others), abs=1e-9)


def test_half_rows_agree_with_scikit_learn_on_the_half_folds(tokenizer, text):
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 150, batch_size=16)
    moments = capture_moments(model, batches, blocks=[0], folds=5, seed=3, progress=False)
    report = kfold(0, moments[0])
    x, y = hooked_rows(model, batches, 0)
    fold = np.repeat(batches.folds(5, 3)[batches.seq_index].numpy(), 16)
    half = [[(f + 1) % 5, (f + 2) % 5] for f in range(5)]
    assert half_training(5) == half
    want = _sklearn_r2(x.reshape(-1, 32).numpy(), y.reshape(-1, 32).numpy(), fold, half)
    assert report.r2_lin_half_rows == pytest.approx(want, abs=1e-9)
    assert report.r2_lin_half_rows < report.r2_lin  # fewer rows fit worse on held-out text
    assert len(report.r2_lin_folds) == 5 and np.mean(report.r2_lin_folds) == pytest.approx(report.r2_lin)


def test_half_rows_is_nan_where_it_cannot_be_fitted():
    g = torch.Generator().manual_seed(0)
    rows = lambda n: Moments.from_rows(torch.randn(n, 16, generator=g), torch.randn(n, 3, generator=g))  # noqa: E731
    assert np.isnan(kfold(0, [rows(40), rows(40)]).r2_lin_half_rows)  # k = 2: no half of one fold
    # 4 x 6 = 24 training rows fit width 16, the 2 x 6 = 12 of a half do not
    assert np.isnan(kfold(0, [rows(6), rows(6), rows(6), rows(6), rows(6)]).r2_lin_half_rows)


def test_planted_sink_an_exact_map_everywhere_but_the_first_position():
    """Later rows follow y = x W + b exactly; first rows are large and nothing like it: R²_lin without them is 1,
    and their share of the output variance is what they carry."""
    g = torch.Generator().manual_seed(1)
    w, b = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(4, generator=g, dtype=torch.float64)
    first, later = [], []
    for _ in range(4):
        x = torch.randn(200, 6, generator=g, dtype=torch.float64)
        later.append(Moments.from_rows(x, x @ w + b))
        x0 = torch.randn(12, 6, generator=g, dtype=torch.float64)
        first.append(Moments.from_rows(x0, 50 * torch.sin(3 * x0[:, :4]) ** 2))
    split = PositionMoments({0: first}, {0: later})
    report = recoverability(split)[0]
    assert report.r2_lin_after_first == pytest.approx(1, abs=1e-12)
    assert report.r2_lin < 0.5 < report.first_position_share < 1
    every = split.every()[0]
    total = every[0] + every[1] + every[2] + every[3]
    assert report.first_position_share == pytest.approx(
        variance_share(first[0] + first[1] + first[2] + first[3], total)
    )
    assert np.isnan(report.top_rows_share)  # moments alone do not know the largest rows
    (consumed,) = recoverability(PositionMoments({0: first}, {0: list(later)}), consume=True)
    # the same report, bit for bit, when the moments are taken out as it is made
    pd.testing.assert_frame_equal(report_table([consumed]), report_table([report]), check_exact=True)
    assert report.r2_lin_after_first_std == pytest.approx(0, abs=1e-12)  # exact in every fold


def test_skip_first_gives_the_rows_after_the_first_position(tokenizer, text):
    """Measured with position 0 left out of the capture, R²_lin is the full capture's r2_lin_after_first."""
    model = tiny_model("llama")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 64, batch_size=8)
    full = measure(model, batches, blocks=[0, 1], folds=3, progress=False)
    skipped = measure(model, batches, blocks=[0, 1], folds=3, skip_first=1, progress=False)
    assert np.allclose(skipped.r2_lin, full.r2_lin_after_first, atol=1e-9)
    assert (full.first_position_share > 0).all() and (full.first_position_share < 1).all()
    assert list(full.columns[:7]) == [
        "block", "r2_lin", "r2_lin_std", "r2_lin_half_rows", "first_position_share", "r2_lin_after_first",
        "r2_lin_after_first_std",
    ]  # fmt: skip


def test_padding_does_not_move_the_first_position(tokenizer, text):
    """Left padding: each window's first kept row is its first real token, wherever the padding ends."""
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=12, max_rows=12 * 48, batch_size=6)
    ids, mask = batches.input_ids.clone(), batches.attention_mask.clone()
    mask[::2, -3:] = 0  # right padding on every other window: causal rows before it are unchanged
    padded = TokenBatches(ids, mask, 6)
    split = capture_positions(model, padded, blocks=[0], options=CaptureOptions(folds=2, progress=False))
    plain = capture_positions(model, batches, blocks=[0], options=CaptureOptions(folds=2, progress=False))
    for f in range(2):
        assert split.first[0][f].n == plain.first[0][f].n
        assert torch.allclose(split.first[0][f].cyy, plain.first[0][f].cyy, atol=1e-9)
        assert split.later[0][f].n < plain.later[0][f].n


@pytest.mark.parametrize("skip", [-1, 16, 40, True, 1.5])
def test_skip_first_must_leave_a_position(skip):
    with pytest.raises(LinrecError, match="skip_first .* from 0 to seq_len - 1 = 15"):
        check_skip_first(skip, 16)


def test_matches_direct_computation():
    x, y = _rows()
    m = Moments.from_rows(x, y)
    xc, yc = x - x.mean(0), y - y.mean(0)
    assert torch.allclose(m.cxx, xc.T @ xc) and torch.allclose(m.cxy, xc.T @ yc) and torch.allclose(m.cyy, yc.T @ yc)


def test_split_stream_merges_to_whole_stream():
    x, y = _rows()
    whole = Moments.from_rows(x, y)
    parts = [Moments.from_rows(x[a:b], y[a:b]) for a, b in [(0, 1), (1, 250), (250, 251), (251, 600)]]
    _close(merge_folds(parts), whole, 1e-12)
    _close(Moments.zeros(7, 5) + whole, whole, 0)
    _close(whole + Moments.zeros(7, 5), whole, 0)


def test_large_offset_does_not_cancel():
    """Rows far from the origin (like GPT-2's outlier dims) keep a precise covariance."""
    x, y = _rows()
    far_x, far_y = _rows(offset=1e7)
    acc = MomentAccumulator(7, 5)
    for i in range(0, 600, 64):
        acc.add(far_x[i : i + 64], far_y[i : i + 64])
    merged = merge_folds([Moments.from_rows(far_x[i : i + 64], far_y[i : i + 64]) for i in range(0, 600, 64)])
    reference = Moments.from_rows(x, y)  # same data without the offset (x shifts exactly; y by offset @ A)

    def worst_variance_error(cxx):
        return (cxx.diagonal() / reference.cxx.diagonal() - 1).abs().max()

    for m in (acc.moments(), merged):
        assert worst_variance_error(m.cxx) <= 1e-8
    # the textbook raw-sum formula gets the smallest variance badly wrong at this offset
    naive = far_x.T @ far_x - 600 * torch.outer(far_x.mean(0), far_x.mean(0))
    assert worst_variance_error(naive) > 0.1


def test_float32_rows_are_accumulated_in_float64():
    x, y = _rows()
    acc = MomentAccumulator(7, 5)
    acc.add(x.float(), y.float())
    m = acc.moments()
    assert m.cxx.dtype == torch.float64
    _close(m, Moments.from_rows(x.float().double(), y.float().double()), 1e-10)
