"""The share of a block's output variance in its largest 0.1 % of rows, from one pass (linrec.core.tails).

Checked against the same quantity computed by numpy from every row at once (rows gathered by hooks of this test's
own), on planted streams whose largest rows are known, and for what the one pass cannot know (NaN, never a guess)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import tiny_model
from linrec.core import tails as tails_module
from linrec.core.capture import CaptureOptions, capture_positions
from linrec.core.fit import recoverability
from linrec.core.measure import Measurement
from linrec.core.rows import BatchRows
from linrec.core.tails import TailSink, pool_rows, top_count
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError
from support.moments import hooked_rows


def _top_share(y: np.ndarray, fraction: float = 0.001) -> float:
    """numpy, every row at once: the share of Σ‖y − ȳ‖² in the ceil(fraction · n) rows farthest from ȳ."""
    d = ((y - y.mean(0)) ** 2).sum(1)
    k = math.ceil(fraction * len(y))
    return float(np.sort(d)[::-1][:k].sum() / d.sum())


def _stream(y: torch.Tensor, window: int, batch_windows: int, pool: int | None = None) -> TailSink:
    """``y`` (windows, window, d) handed to a TailSink as block 0, ``batch_windows`` windows a batch; ``pool``: the
    rows kept per part, instead of what :meth:`TailSink.start` chooses."""
    sink = TailSink()
    sink.start(y.shape[0] * window)
    sink.size = pool or sink.size
    offset = 0
    for i, lo in enumerate(range(0, y.shape[0], batch_windows)):
        part = y[lo : lo + batch_windows]
        mask = np.ones((part.shape[0], window), dtype=bool)
        rows = BatchRows.of_mask(i, offset, mask, torch.zeros(part.shape[0], dtype=torch.long))
        flat = part.reshape(-1, part.shape[-1])
        sink.add(0, flat, flat, rows)
        offset += rows.n
    return sink


def _heavy(seed: int, windows: int = 600, window: int = 16, d: int = 8) -> torch.Tensor:
    """Gaussian rows, the first position of each window 30 times larger, and a few outliers later on."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(windows, window, d, generator=g, dtype=torch.float64) + 2.0
    y[:, 0] *= 30
    spots = torch.randint(1, window, (12,), generator=g)
    y[torch.arange(12) * 37, spots] *= 50
    return y


@pytest.mark.parametrize("pool", [16, 64, 4096])
@pytest.mark.parametrize("batch_windows", [7, 64])
def test_the_largest_rows_of_a_planted_stream(pool, batch_windows):
    y = _heavy(0)
    t = _stream(y, 16, batch_windows, pool).tails()[0]
    every, later = y.reshape(-1, 8).numpy(), y[:, 1:].reshape(-1, 8).numpy()
    assert (t.every.rows, t.every.top) == (9600, 10) and (t.later.rows, t.later.top) == (9000, 9)
    sum_sq = lambda z: ((z - z.mean(0)) ** 2).sum()  # noqa: E731
    assert t.every.top_ss / sum_sq(every) == pytest.approx(_top_share(every), rel=1e-12)
    assert t.later.top_ss / sum_sq(later) == pytest.approx(_top_share(later), rel=1e-12)


def test_a_stream_whose_mean_moves_is_unknown_not_guessed():
    """Rows dropped while the running mean sat far from the final one may be among the largest about the final
    mean: the pass cannot tell, so the share is NaN. The same rows without the drift are found exactly, even with
    a pool no larger than the top rows."""
    g = torch.Generator().manual_seed(3)
    y = torch.randn(500, 20, 16, generator=g, dtype=torch.float64)
    flat = y.reshape(-1, 16).numpy()
    found = _stream(y, 20, 25, pool=10).tails()[0].every
    assert found.top_ss / ((flat - flat.mean(0)) ** 2).sum() == pytest.approx(_top_share(flat), rel=1e-12)
    y[250:] += 3.0
    assert math.isnan(_stream(y, 20, 25, pool=100).tails()[0].every.top_ss)


def test_top_count_rounds_up():
    assert [top_count(n) for n in (0, 1, 999, 1000, 1001, 36_864)] == [0, 1, 1, 1, 2, 37]


def test_a_captured_model_against_its_own_rows(tokenizer, text, monkeypatch):
    """The table's columns equal numpy's share over the rows gathered by this test's hooks, with a pool small
    enough that most rows were dropped on the way."""
    monkeypatch.setattr(tails_module, "POOL", 48)
    model = tiny_model("llama")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 200, batch_size=8)
    split = capture_positions(model, batches, blocks=[0, 1], options=CaptureOptions(folds=3, progress=False))
    reports = recoverability(split)
    for block, report in zip([0, 1], reports, strict=True):
        _, y = hooked_rows(model, batches, block)
        assert report.top_rows_share == pytest.approx(_top_share(y.reshape(-1, y.shape[-1]).numpy()), rel=1e-9)
        later = y[:, 1:].reshape(-1, y.shape[-1]).numpy()
        assert report.top_rows_share_after_first == pytest.approx(_top_share(later), rel=1e-9)
        assert 0 < report.top_rows_share < 1
        assert len(report.r2_lin_after_first_folds) == 3
        assert np.mean(report.r2_lin_after_first_folds) == pytest.approx(report.r2_lin_after_first)


def test_saved_and_loaded_with_the_measurement(tokenizer, text, tmp_path):
    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 100, batch_size=8)
    measured = Measurement.capture(model, batches, blocks=[0], folds=3, progress=False)
    loaded = Measurement.load(measured.save(tmp_path / "m"))
    assert loaded.positions.tails == measured.positions.tails
    assert loaded.table().equals(measured.table())
    (tmp_path / "m" / "tails.json").unlink()
    with pytest.raises(LinrecError, match="lacks tails.json"):
        Measurement.load(tmp_path / "m")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_of_a_narrower_dtype_are_kept_as_they_came_and_found_exactly(dtype):
    """The pool holds a 16- or 32-bit model's rows in their own dtype (no float64 copy on the way) and ranks them by
    float32 bounds; the shares, from those rows cast exactly at the end, are numpy's over the same rows."""
    y = _heavy(1).to(dtype)
    sink = _stream(y, 16, 7, pool=32)
    t = sink.tails()[0]
    assert all(pool.rows is not None and pool.rows.dtype == dtype for pool in sink.pools[0])
    every, later = y.double().reshape(-1, 8).numpy(), y[:, 1:].double().reshape(-1, 8).numpy()
    sum_sq = lambda z: ((z - z.mean(0)) ** 2).sum()  # noqa: E731
    assert t.every.top_ss / sum_sq(every) == pytest.approx(_top_share(every), rel=1e-12)
    assert t.later.top_ss / sum_sq(later) == pytest.approx(_top_share(later), rel=1e-12)


def test_a_block_s_pools_hold_what_the_plan_counts_for_them():
    """Two parts of pool_rows(rows) rows each, at the rows' dtype: the bytes linrec.core.plan.footprint counts per
    block for the tails (a 7B block at 1e6 tokens: some 130 MB in bfloat16, where float64 pools took four times it)."""
    from types import SimpleNamespace

    from linrec.core.plan import footprint

    y = _heavy(2, windows=4000).to(torch.bfloat16)  # 64,000 rows: pools of 8 x 64 rows, not the 512 of a short one
    sink = _stream(y, 16, 64)
    held = sum(pool.rows.numel() * pool.rows.element_size() for pool in sink.pools[0])
    assert sink.size == pool_rows(64_000) == 8 * 64
    config = SimpleNamespace(hidden_size=8, num_hidden_layers=1, intermediate_size=32, num_attention_heads=1,
                             vocab_size=10)  # fmt: skip
    planned = footprint(config, blocks=1, folds=5, windows=4000, seq_len=16, batch_size=64, dtype=torch.bfloat16,
                        on_gpu=False, weights=(0, 0))  # fmt: skip
    assert held == planned.tails == 2 * 512 * 8 * 2
