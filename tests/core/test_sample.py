"""The row sample: bounded, seeded, batch-size independent, and split by the moments' folds."""

from __future__ import annotations

import pytest
import torch
from sklearn.metrics import r2_score

from conftest import VOCAB, tiny_model
from linrec.core.capture import capture_moments, capture_with_sample
from linrec.core.moments import merge_folds
from linrec.core.rows import BatchRows
from linrec.core.sample import Rows, RowSample, closed_form, minibatches
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.stats import r2


def _model_and_batches(batch_size: int) -> tuple[torch.nn.Module, TokenBatches]:
    ids = torch.randint(0, VOCAB, (40, 16), generator=torch.Generator().manual_seed(1))
    return tiny_model("gpt2"), TokenBatches(ids, torch.ones_like(ids), batch_size)


def test_r2_matches_sklearn_variance_weighted():
    g = torch.Generator().manual_seed(0)
    y = torch.randn(200, 5, generator=g, dtype=torch.float64) * torch.tensor(
        [1.0, 10.0, 0.1, 3.0, 1.0], dtype=torch.float64
    )
    y_hat = y + torch.randn(200, 5, generator=g, dtype=torch.float64)
    expected = r2_score(y.numpy(), y_hat.numpy(), multioutput="variance_weighted")
    assert r2(y, y_hat) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(LinrecError, match="no variance"):
        r2(torch.ones(5, 2), torch.zeros(5, 2))


def test_sample_is_seeded_and_independent_of_batch_size():
    rows = {}
    for batch_size in (3, 8):
        model, batches = _model_and_batches(batch_size)
        _, sample = capture_with_sample(model, batches, sample_rows=100, folds=4, seed=5, progress=False)
        rows[batch_size] = sample.rows(1)
    assert len(rows[3]) == 100
    for field in ("x", "y", "fold"):
        assert torch.equal(getattr(rows[3], field), getattr(rows[8], field))
    model, batches = _model_and_batches(8)
    _, other = capture_with_sample(model, batches, sample_rows=100, folds=4, seed=6, progress=False)
    assert not torch.equal(other.rows(1).x, rows[8].x)


def test_a_sample_of_some_blocks_keeps_exactly_their_rows():
    model, batches = _model_and_batches(8)
    _, every = capture_with_sample(model, batches, sample_rows=100, folds=4, seed=5, progress=False)
    some = RowSample(100, seed=5, blocks=[1])
    capture_moments(model, batches, folds=4, seed=5, extra_sinks=[some], progress=False)
    assert some.blocks == [1] and every.blocks == [0, 1]
    for field in ("x", "y", "fold"):
        assert torch.equal(getattr(some.rows(1), field), getattr(every.rows(1), field))
    with pytest.raises(LinrecError, match="no rows sampled for block 0"):
        some.rows(0)


def test_full_sample_reproduces_the_moments_per_fold():
    """With room for every row, the sample's per-fold moments are the captured ones: same split."""
    model, batches = _model_and_batches(8)
    moments, sample = capture_with_sample(model, batches, sample_rows=10_000, folds=4, progress=False)
    assert len(sample.rows(0)) == batches.n_rows
    for block in (0, 1):
        for mine, theirs in zip(sample.rows(block).fold_moments(4), moments[block], strict=True):
            assert mine.n == theirs.n
            torch.testing.assert_close(mine.cxy, theirs.cxy, rtol=1e-5, atol=1e-6)
    rows = sample.rows(1)
    train, test = rows.split(2)
    assert set(test.fold.tolist()) == {2} and 2 not in train.fold.tolist()
    from_folds, from_rows = closed_form(train, moments[1], 2), closed_form(train)
    torch.testing.assert_close(from_folds.weight, from_rows.weight, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(merge_folds(moments[1]).mean_y, rows.y.double().mean(0), rtol=1e-5, atol=1e-6)


def test_sample_is_uniform_over_the_stream():
    sample = RowSample(sample_rows=2000, seed=0)
    n = 40_000
    sample.start(n)
    for batch, start in enumerate(range(0, n, 777)):
        index = torch.arange(start, min(n, start + 777), dtype=torch.float32)[:, None]
        sample.add(0, index, index, BatchRows.of_folds(batch, start, torch.zeros(index.shape[0], dtype=torch.long)))
    kept = sample.rows(0).x[:, 0]
    assert len(kept) == 2000 and kept.unique().numel() == 2000
    # mean and quartiles of a uniform sample of 2000 from 0..n-1 (standard error of the mean ≈ n/155)
    assert abs(float(kept.mean()) - n / 2) < 3 * n / 155
    assert abs(float((kept < n / 4).float().mean()) - 0.25) < 0.04


def test_minibatches_are_seeded_epochs_of_distinct_rows():
    first, again = minibatches(10, 3, seed=0), minibatches(10, 3, seed=0)
    epochs = [torch.cat([next(first) for _ in range(3)]) for _ in range(2)]  # 3 batches of 3 per epoch of 10
    assert all(e.unique().numel() == 9 and e.max() < 10 for e in epochs)
    assert not torch.equal(epochs[0], epochs[1])
    assert torch.equal(torch.cat([next(again) for _ in range(3)]), epochs[0])
    assert next(minibatches(4, 100, seed=0)).sort().values.tolist() == [0, 1, 2, 3]


def test_row_errors():
    with pytest.raises(LinrecError, match="sample_rows"):
        RowSample(0)
    rows = Rows(torch.zeros(4, 2), torch.zeros(4, 2), torch.tensor([0, 0, 1, 1]))
    with pytest.raises(LinrecError, match="folds present"):
        rows.split(3)
    with pytest.raises(LinrecError, match="no rows sampled"):
        RowSample(5).rows(0)
    with pytest.raises(LinrecError, match="validation fraction"):
        rows.holdout(1.5, 0)


def test_rows_move_to_a_device_whole():
    rows = Rows(torch.randn(6, 3), torch.randn(6, 2), torch.arange(6) % 2)
    assert rows.to("cpu") is rows
    moved = rows.to("meta")  # a device every torch has: shapes and dtypes without data
    assert {t.device.type for t in (moved.x, moved.y, moved.fold)} == {"meta"}
    assert (moved.x.shape, moved.fold.dtype) == (rows.x.shape, rows.fold.dtype)
