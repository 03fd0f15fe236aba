"""The capture path never makes the host wait for the device per batch, and says the same as before.

A CPU has no syncs to pay for, but the operators that would force one on a GPU are the same on
every device, so :class:`SyncCounter` finds them here. The model's own forward syncs too
(transformers reads the attention mask on the host), so what is asserted is the capture's own
count: the capture's total less that of the same forwards without it."""

from __future__ import annotations

import warnings

import pytest
import torch

from conftest import VOCAB, tiny_model
from linrec.core.capture import capture_moments, capture_with_sample, run_capture
from linrec.core.moment_sink import MomentSink
from linrec.core.moments import Moments
from linrec.core.residual import ResidualSink
from linrec.core.rows import BatchRows, RowSink, to_device
from linrec.core.sample import Rows, RowSample, row_priority
from linrec.core.syncs import SyncCounter
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.baseline import BaselineConfig, train_linear
from linrec.interventions.probes import ProbeConfig, bilinear_probe
from linrec.models.arch import ffn_blocks

SEQ = 16


def _batches(n_batches: int, padded: bool = False, batch_size: int = 4) -> TokenBatches:
    ids = torch.randint(0, VOCAB, (n_batches * batch_size, SEQ), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    if padded:  # every third sequence ends early
        mask[::3, SEQ - 5 :] = 0
    return TokenBatches(ids, mask, batch_size)


def _forward_syncs(model: torch.nn.Module, batches: TokenBatches) -> int:
    with SyncCounter() as counter, torch.no_grad():
        for b in batches:
            model(input_ids=b.input_ids, attention_mask=b.attention_mask, use_cache=False)
    return counter.total


class _Store(RowSink):
    """Every row, in stream order, with its fold."""

    def __init__(self) -> None:
        self.x: dict[int, list[torch.Tensor]] = {}
        self.y: dict[int, list[torch.Tensor]] = {}
        self.fold: dict[int, list[torch.Tensor]] = {}

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        self.x.setdefault(block, []).append(x.clone())
        self.y.setdefault(block, []).append(y.clone())
        self.fold.setdefault(block, []).append(rows.fold_ids())


def _rows(n: int = 1500, d: int = 12) -> Rows:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    return Rows(x, torch.tanh(x @ torch.randn(d, d, generator=g)), torch.arange(n) // 50 % 5)


def _syncs(run) -> int:
    with SyncCounter() as counter:
        run()
    return counter.total


def test_the_counter_sees_what_makes_a_gpu_wait_and_nothing_else():
    x = torch.randn(10, 3)
    mask = x[:, 0] > 0
    waits = {
        "item": lambda: x.sum().item(),
        "bool": lambda: bool(x.isfinite().all()),
        "mask gather": lambda: x[mask],
        "mask write": lambda: x.clone().__setitem__(mask, 0.0),
        "nonzero": lambda: mask.nonzero(),
        "unique": lambda: mask.long().unique(),
        "masked_select": lambda: x.masked_select(mask[:, None]),
    }
    for name, op in waits.items():
        with SyncCounter() as counter:
            op()
        assert counter.total == 1, name
    with SyncCounter() as counter:
        x.index_select(0, torch.tensor([1, 2]))
        torch.sub(x, x.mean(0, dtype=torch.float64))
        x[2:5].sum(0)
        x.pin_memory() if torch.cuda.is_available() else x.clone()
    assert counter.total == 0, dict(counter.by_op)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize(("padded", "positions"), [(False, None), (True, None), (False, slice(3, None))])
def test_capture_adds_no_sync_per_batch(family, padded, positions, monkeypatch):
    model = tiny_model(family)
    own = []
    on_host = []  # the layer linearity's fits, once at the end on the rows' device: work a CPU counter counts too
    fits = ResidualSink._linearity

    def counted(self, block, device):
        with SyncCounter() as fitting:
            out = fits(self, block, device)
        on_host.append(fitting.total)
        return out

    monkeypatch.setattr(ResidualSink, "_linearity", counted)
    for n in (3, 6):
        batches = _batches(n, padded)
        with SyncCounter() as counter:
            sample = RowSample(sample_rows=40, seed=0)
            capture_moments(model, batches, folds=2, extra_sinks=[sample], progress=False, positions=positions)
        own.append(counter.total - _forward_syncs(model, batches) - sum(on_host))
        on_host.clear()
    # a fixed count per capture (row checks, the final NaN check, the scores' one read), none per batch
    assert own[0] == own[1] <= 5, own


def test_sample_is_the_smallest_priorities_of_the_stream_bit_for_bit():
    """An independent selection: keep every row, rank all priorities at once, take the smallest."""
    model = tiny_model("gpt2")
    batches = _batches(5, padded=True, batch_size=3)
    folds = batches.folds(3, 0)
    store, sample = _Store(), RowSample(sample_rows=50, seed=7)
    run_capture(model, batches, ffn_blocks(model), [store, sample], folds, progress=False, positions=slice(2, None))
    for block in store.x:
        x, y, fold = torch.cat(store.x[block]), torch.cat(store.y[block]), torch.cat(store.fold[block])
        chosen = torch.topk(row_priority(7, block, torch.arange(len(x))), 50, largest=False).indices.sort().values
        rows = sample.rows(block)
        assert torch.equal(rows.x, x[chosen].float()) and torch.equal(rows.y, y[chosen].float())
        assert torch.equal(rows.fold, fold[chosen])


def test_moments_agree_with_a_direct_float64_computation_per_fold():
    model = tiny_model("llama")
    batches = _batches(6, padded=True)
    moments, sample = capture_with_sample(model, batches, sample_rows=10**6, folds=3, progress=False,
                                          extras="output-covariance")  # fmt: skip
    for block, per_fold in moments.items():
        rows = sample.rows(block)  # every row: the model computes in float32, so storing float32 is exact
        for f, got in enumerate(per_fold):
            want = Moments.from_rows(rows.x[rows.fold == f], rows.y[rows.fold == f])
            assert got.n == want.n
            for name in ("mean_x", "mean_y", "cxx", "cxy", "cyy"):
                a, b = getattr(got, name), getattr(want, name)
                assert (a - b).norm() <= 1e-12 * b.norm(), (block, f, name)
            assert torch.equal(got.cxx, got.cxx.T) and torch.equal(got.cyy, got.cyy.T)


def test_only_the_live_fold_holds_sums_while_the_capture_runs():
    """Folds come one after the other, so after each batch only its last fold keeps sums (on a GPU, device
    memory for one fold or two instead of all of them); the finished folds are closed and kept."""
    model = tiny_model("gpt2")
    batches = _batches(8, batch_size=3)
    seen: list[int] = []

    class Watch(MomentSink):
        def end_batch(self, rows: BatchRows) -> None:
            super().end_batch(rows)
            last = rows.runs[-1][0]
            seen.append(last)
            for acc in self.accumulators.values():
                assert acc.live_folds == [last]

    sink = Watch(5)
    run_capture(model, batches, ffn_blocks(model), [sink], batches.folds(5, 0), progress=False)
    assert len(set(seen)) == 5  # every fold was the live one in turn
    moments = sink.moments()
    assert all(acc.live_folds == [] for acc in sink.accumulators.values())
    assert sum(m.n for m in moments[0]) == 8 * 3 * SEQ


def test_non_finite_rows_are_found_from_the_sums_and_named_by_batch():
    sink = MomentSink(2, check_every=2)
    first = BatchRows.of_folds(0, 0, torch.tensor([0, 0, 0, 0]))
    good = torch.randn(4, 3)
    for i in range(2):
        sink.add(5, good, good, BatchRows(i, 4 * i, first.runs))
        sink.end_batch(BatchRows(i, 4 * i, first.runs))
    bad = good.clone()
    bad[1, 1] = float("inf")  # in fold 0, which this batch finishes: its sums are closed with the bad row
    rows = BatchRows.of_folds(2, 8, torch.tensor([0, 0, 1, 1]))
    sink.add(5, bad, good, rows)
    sink.end_batch(rows)  # not a checking batch: nothing is read yet
    assert sink.accumulators[5].live_folds == [1]
    with pytest.raises(LinrecError, match="block 5: NaN or Inf activations in batches 2-2"):
        sink.moments()


def test_a_sample_needs_to_know_its_stream():
    with pytest.raises(LinrecError, match="start"):
        RowSample(3).add(0, torch.zeros(2, 2), torch.zeros(2, 2), BatchRows.of_folds(0, 0, torch.zeros(2).long()))


def test_linear_baselines_read_the_device_once_per_logged_segment():
    """Per segment of 20 steps: whether a loss was non-finite, and the test R² (its variance check and value);
    not a check per step. (The optimiser's own reads of its host step counter are not device reads.)"""
    runs = {steps: BaselineConfig(steps=steps, log_every=20, lr_factors=(1.0,)) for steps in (40, 120)}
    counts = {
        steps: _syncs(lambda c=config: train_linear(_rows(), 0, "adam", "raw", c)) for steps, config in runs.items()
    }
    assert (counts[120] - counts[40]) / ((120 - 40) // 20) <= 3, counts


def test_probes_read_the_device_once_per_evaluation():
    counts = {}
    for steps in (50, 150):
        config = ProbeConfig(rank=2, steps=steps, eval_every=25, patience=100, batch_size=64)
        counts[steps] = _syncs(lambda c=config: bilinear_probe(_rows(), config=c))
    assert (counts[150] - counts[50]) / ((150 - 50) // 25) <= 1, counts


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_batches_run_without_a_synchronising_call():
    gpu = torch.device("cuda")
    model = tiny_model("gpt2").to(gpu)
    capture_with_sample(model, _batches(1), sample_rows=40, folds=2, progress=False)  # what a first run sets up
    counts = []
    for n in (3, 6):
        batches = _batches(n)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                capture_with_sample(model, batches, sample_rows=40, folds=2, progress=False)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        with warnings.catch_warnings(record=True) as forward:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                with torch.no_grad():
                    for b in batches:
                        model(
                            input_ids=to_device(b.input_ids, gpu),
                            attention_mask=to_device(b.attention_mask, gpu),
                            use_cache=False,
                        )
            finally:
                torch.cuda.set_sync_debug_mode("default")
        counts.append(len(caught) - len(forward))
    assert counts[1] <= counts[0], counts  # three batches more add no sync (the H200 counted 63 and 62)
