"""linrec.core.routed: Float64 moments of the rows a gate routes to the map, per block, fold and band of the gate's
score."""

from __future__ import annotations

import math

import torch

from conftest import tiny_model
from linrec.core.capture import run_capture
from linrec.core.gated import LogisticGate, NormGate, threshold_for
from linrec.core.moments import Moments, merge_folds
from linrec.core.routed import RoutedSink
from linrec.core.rows import BatchRows
from linrec.data.tokens import TokenBatches
from linrec.models.arch import ffn_blocks
from support.moments import _close, hooked_rows

FOLDS = 3


def planted_stream(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[BatchRows]]:
    """Rows (float32, norms spread over a wide range) in five batches, each dealt to folds in runs as a capture
    deals them: (x, y, the fold of every row, the batches' plans)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(500, 6, generator=g) * torch.linspace(0.5, 3, 500)[:, None] + 0.5
    y = torch.randn(500, 4, generator=g) + x[:, :4] ** 2
    sizes, plans, folds, offset = [90, 130, 60, 120, 100], [], [], 0
    for index, size in enumerate(sizes):
        fold = torch.sort(torch.randint(0, FOLDS, (size,), generator=g)).values  # (sorted: one run per fold)
        plans.append(BatchRows.of_folds(index, offset, fold))
        folds.append(fold)
        offset += size
    return x, y, torch.cat(folds), plans


def streamed(sink: RoutedSink, block: int, x: torch.Tensor, y: torch.Tensor, plans: list[BatchRows]) -> None:
    for plan in plans:
        sink.add(block, x[plan.offset : plan.offset + plan.n], y[plan.offset : plan.offset + plan.n], plan)


def test_the_bands_partition_the_rows_at_their_cuts():
    x, y, fold, plans = planted_stream()
    gate = NormGate()
    scores = gate(x)
    cuts = [threshold_for(scores, s) for s in (0.2, 0.5, 0.9)]  # (scores themselves: rows lie on every cut)
    sink = RoutedSink({4: gate}, {4: cuts}, FOLDS)
    streamed(sink, 4, x, y, plans)
    routed = sink.moments(4)
    assert routed.thresholds == tuple(cuts) and len(routed.bands) == FOLDS and len(routed.bands[0]) == 4
    assert sum(m.n for per_fold in routed.bands for m in per_fold) == len(x)
    _close(merge_folds([m for per_fold in routed.bands for m in per_fold]), Moments.from_rows(x, y, False), 1e-10)
    edges = [-torch.inf, *cuts, torch.inf]
    for j in range(4):
        in_band = (scores > edges[j]) & (scores <= edges[j + 1])
        for f in range(FOLDS):
            rows = in_band & (fold == f)
            assert routed.bands[f][j].n == int(rows.sum()) > 0
            _close(routed.bands[f][j], Moments.from_rows(x[rows], y[rows], False), 1e-10)
    for upto, share in enumerate((0.2, 0.5, 0.9, 1.0)):
        routed_rows = scores <= edges[upto + 1]
        assert routed.share(upto) == int(routed_rows.sum()) / len(x) == math.ceil(share * len(x)) / len(x)
        for f, m in enumerate(routed.folds(upto)):
            _close(m, Moments.from_rows(x[routed_rows & (fold == f)], y[routed_rows & (fold == f)], False), 1e-10)
    for f, m in enumerate(routed.every_fold()):
        _close(m, Moments.from_rows(x[fold == f], y[fold == f], False), 1e-10)


def test_a_band_no_row_falls_in_holds_no_rows_and_blocks_without_a_gate_are_ignored():
    x, y, _, plans = planted_stream(1)
    gate = LogisticGate(torch.ones(6), torch.tensor(0.0))
    scores = gate(x)
    high = float(scores.max()) + 1
    sink = RoutedSink({0: gate}, {0: [float(scores.min()) - 1, high]}, 2)
    one_fold = [BatchRows.of_folds(p.index, p.offset, torch.zeros(p.n, dtype=torch.long)) for p in plans]
    streamed(sink, 0, x, y, one_fold)
    streamed(sink, 1, x, y, one_fold)  # (no gate for block 1: nothing kept)
    assert list(sink.accumulators) == [0]
    routed = sink.moments(0)
    assert [m.n for m in routed.bands[0]] == [0, len(x), 0] and [m.n for m in routed.bands[1]] == [0, 0, 0]
    assert routed.share(0) == 0.0 and routed.share(1) == 1.0 and routed.share(2) == 1.0


def test_a_capture_routes_the_rows_the_block_saw():
    """Through run_capture, the bands of a tiny GPT-2's block 1 (its ln_2 weights varied, so its input norms vary)
    against the rows gathered by hooks of this test's own."""
    model = tiny_model("gpt2")
    with torch.no_grad():
        model.transformer.h[1].ln_2.weight.copy_(0.3 + 2 * torch.rand(32, generator=torch.Generator().manual_seed(1)))
    ids = torch.randint(0, 320, (24, 16), generator=torch.Generator().manual_seed(0))
    batches = TokenBatches(ids, torch.ones_like(ids), 5)
    xs, ys = hooked_rows(model, batches, 1)
    x, y = xs.reshape(-1, 32), ys.reshape(-1, 32)
    scores = NormGate()(x.float())
    cuts = [threshold_for(scores, 0.3), threshold_for(scores, 0.7)]
    dealt = batches.folds(FOLDS, 0)
    sink = RoutedSink({1: NormGate()}, {1: cuts}, FOLDS)
    run_capture(model, batches, ffn_blocks(model), [sink], dealt, progress=False)
    fold = dealt.repeat_interleave(16)  # (every window's rows in its fold)
    routed = sink.moments(1)
    edges = [-torch.inf, *cuts, torch.inf]
    for j in range(3):
        for f in range(FOLDS):
            rows = (scores > edges[j]) & (scores <= edges[j + 1]) & (fold == f)
            _close(routed.bands[f][j], Moments.from_rows(x[rows], y[rows], False), 1e-8)
