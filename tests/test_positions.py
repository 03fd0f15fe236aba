"""Where the rows come from: a capture-only position mask, and R²_lin with and without the first positions."""

import pytest
import torch

from conftest import tiny_model
from linrec.analysis.positions import position_table
from linrec.core.capture import RowSink, capture_moments, run_capture
from linrec.core.fit import DEFAULT_RCOND, kfold
from linrec.core.moments import Moments
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from linrec.models.arch import ffn_blocks

FOLDS = 5


class Rows(RowSink):
    """A sink that keeps every row it is handed, per block, in order."""

    def __init__(self) -> None:
        self.x: dict[int, list[torch.Tensor]] = {}

    def add(self, block, x, y, rows) -> None:
        self.x.setdefault(block, []).append(torch.cat([x, y], 1))


def test_the_position_mask_changes_what_is_captured_not_the_forward_pass(tokenizer, text):
    model = tiny_model("gpt2", seed=2)
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=640, batch_size=8)
    folds = batches.folds(FOLDS, 0)
    full, later = Rows(), Rows()
    run_capture(model, batches, ffn_blocks(model), [full], folds, progress=False)
    run_capture(model, batches, ffn_blocks(model), [later], folds, progress=False, positions=slice(3, None))
    for block in full.x:
        every = torch.cat(full.x[block]).reshape(-1, 16, full.x[block][0].shape[1])
        assert torch.equal(torch.cat(later.x[block]), every[:, 3:].reshape(-1, every.shape[2]))  # bit for bit
    moments = capture_moments(model, batches, folds=FOLDS, positions=slice(3, None), progress=False)
    assert sum(m.n for m in moments[0]) == batches.n_rows * 13 // 16
    with pytest.raises(LinrecError, match="keep no position"):
        capture_moments(model, batches, folds=FOLDS, positions=slice(16, None), progress=False)


def test_position_table_on_planted_rows_where_the_first_position_carries_the_fit():
    """Position-0 rows are large and exactly linear; later rows are noise: the global R²_lin is their doing."""
    g = torch.Generator().manual_seed(0)
    seqs, length, d = 400, 8, 4
    x = torch.randn(seqs, length, d, generator=g, dtype=torch.float64)
    y = 0.3 * torch.randn(seqs, length, d, generator=g, dtype=torch.float64)
    x[:, 0] *= 10
    y[:, 0] = x[:, 0] @ torch.randn(d, d, generator=g, dtype=torch.float64)
    fold = (torch.arange(seqs) % FOLDS)[:, None].expand(seqs, length)

    def per_fold(start: int) -> list[Moments]:
        xs, ys, fs = x[:, start:].reshape(-1, d), y[:, start:].reshape(-1, d), fold[:, start:].reshape(-1)
        return [Moments.from_rows(xs[fs == f], ys[fs == f]) for f in range(FOLDS)]

    table = position_table({0: per_fold(0)}, {0: per_fold(1)}, 1, DEFAULT_RCOND).iloc[0]
    assert table.r2_lin > 0.9 and table.r2_lin_later < 0.05 and table.change < -0.85
    assert table.r2_lin == kfold(0, per_fold(0)).r2_lin
    assert table.rows_first == pytest.approx(1 / length)
    flat = y.reshape(-1, d)
    by_hand = (y[:, 0] - flat.mean(0)).pow(2).sum() / (flat - flat.mean(0)).pow(2).sum()
    assert table.variance_first == pytest.approx(float(by_hand), rel=1e-12)
    with pytest.raises(LinrecError, match="blocks \\[0\\]"):
        position_table({0: per_fold(0)}, {}, 1, DEFAULT_RCOND)


def test_position_claims_name_the_heaviest_and_the_most_moved_block():
    import pandas as pd

    from linrec.analysis.positions import position_claims

    positions = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "block": [0, 1, 0],
            "r2_lin": [0.9, 0.99, 0.8],
            "r2_lin_later": [0.89, 0.2, 0.81],
            "change": [-0.01, -0.79, 0.01],
            "rows_first": [1 / 64] * 3,
            "variance_first": [0.1, 0.95, 0.02],
        }
    )
    heavy, moved = position_claims(positions, 1, 64)
    assert heavy.value == 0.95 and "a block 1" in heavy.note and "1.6% of rows" in heavy.note
    assert moved.value == -0.79 and "0.990 → 0.200" in moved.note
    assert heavy.verdict is None and moved.reported == "not reported"
