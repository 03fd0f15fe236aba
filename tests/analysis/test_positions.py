"""Where the rows come from: a capture-only position mask, and R²_lin with and without the first positions."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from conftest import tiny_model
from linrec.analysis.positions import position_claims, sink_blocks, sink_table
from linrec.core.capture import capture_moments, run_capture
from linrec.core.fit import DEFAULT_RCOND, kfold, recoverability, report_table
from linrec.core.moments import Moments, PositionMoments
from linrec.core.rows import RowSink
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


def test_the_sink_table_reads_the_first_position_from_one_capture_of_planted_rows():
    """Position-0 rows are large and exactly linear, later rows noise: the table's columns say the global R²_lin
    is the first position's doing, and match the rows computed by hand."""
    g = torch.Generator().manual_seed(0)
    seqs, length, d = 400, 8, 4
    x = torch.randn(seqs, length, d, generator=g, dtype=torch.float64)
    y = 0.3 * torch.randn(seqs, length, d, generator=g, dtype=torch.float64)
    x[:, 0] *= 10
    y[:, 0] = x[:, 0] @ torch.randn(d, d, generator=g, dtype=torch.float64)
    fold = torch.arange(seqs) % FOLDS
    first = {0: [Moments.from_rows(x[fold == f, 0], y[fold == f, 0]) for f in range(FOLDS)]}
    later = {0: [Moments.from_rows(x[fold == f, 1:].reshape(-1, d), y[fold == f, 1:].reshape(-1, d))
                 for f in range(FOLDS)]}  # fmt: skip
    table = report_table(recoverability(PositionMoments(first, later), DEFAULT_RCOND)).assign(model="planted")
    row = sink_table(table, length).iloc[0]
    assert row.r2_lin > 0.9 and row.r2_lin_after_first < 0.05 and row.change < -0.85
    assert row.r2_lin_after_first == kfold(0, later[0]).r2_lin
    assert row.rows_first == pytest.approx(1 / length)
    flat = y.reshape(-1, d)
    by_hand = (y[:, 0] - flat.mean(0)).pow(2).sum() / (flat - flat.mean(0)).pow(2).sum()
    assert row.first_position_share == pytest.approx(float(by_hand), rel=1e-9)
    assert list(sink_blocks(sink_table(table, length)).block) == [0]
    with pytest.raises(LinrecError, match="first_position_share"):
        sink_table(table.drop(columns="first_position_share"), length)
    assert row.top_rows_share_after_first != row.top_rows_share_after_first  # NaN: moments alone know no rows
    with pytest.raises(LinrecError, match="measure them afresh"):
        sink_table(table.assign(r2_lin_after_first=float("nan")), length)


def test_position_claims_name_the_heaviest_the_most_moved_and_the_blocks_that_depend_on_the_first_position():
    import pandas as pd

    sinks = pd.DataFrame(
        {
            "model": ["a", "a", "b"],
            "block": [0, 1, 0],
            "r2_lin": [0.9, 0.99, 0.8],
            "r2_lin_after_first": [0.89, 0.2, 0.81],
            "change": [-0.01, -0.79, 0.01],
            "first_position_share": [0.1, 0.95, 0.02],
            "rows_first": [1 / 64] * 3,
            "top_rows_share_after_first": [0.01, 0.9, 0.5],
        }
    )
    heavy, moved, depending, few = position_claims(sinks, depends=0.05)
    assert heavy.value == 0.95 and "a block 1" in heavy.note and "1.6% of rows" in heavy.note
    assert moved.value == -0.79 and "0.990 → 0.200" in moved.note
    assert depending.measured == "1 of 3" and depending.note == "a 1"
    assert heavy.verdict is None and moved.reported == "not reported"
    assert position_claims(sinks, depends=0.001)[2].measured == "3 of 3"
    assert few.measured == "2 of 3" and few.note == "a 1 (90%), b 0 (50%)"  # 0.5 is "or more"
    assert position_claims(sinks, few=0.95)[3].note == "none"


def test_the_dependence_reading_names_the_blocks_that_move_by_the_threshold_or_more():
    from linrec.analysis.positions import dependence_reading

    sinks = pd.DataFrame({"model": ["a", "a", "b"], "block": [0, 1, 2], "change": [0.01, -0.05, 0.049]})
    assert dependence_reading(sinks, 0.06) == "no block's R²_lin moves by 0.06 or more without the first position"
    assert dependence_reading(sinks, 0.05) == (
        "1 of 3 blocks (a 1) have a headline R²_lin that rests on the first position: "
        "read their numbers with the column beside them"
    )
    assert dependence_reading(sinks, 0.049).startswith("2 of 3 blocks (a 1, b 2) have")
