"""Float64 moments of the rows a gate routes to the map, per block, fold and band of the gate's score.

:class:`RoutedSink` is a capture sink (:func:`linrec.core.capture.run_capture`) that scores each row with its block's
gate (:mod:`linrec.core.gated`) and accumulates it into the band its score falls in, bands cut at the thresholds of
the shares wanted. Moments add, so one pass gives every share at once: the rows sent to the map at the j-th
threshold are the bands up to j (:meth:`RoutedMoments.folds`), fitted in closed form as any moments are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from linrec.core.accumulator import MomentAccumulator
from linrec.core.moments import Moments, merge_folds
from linrec.core.rows import BatchRows, RowSink


@dataclass
class RoutedMoments:
    """One block's moments per fold and band (``bands[fold][band]``), the bands cut at ``thresholds`` (ascending):
    band j holds the rows scoring above threshold j - 1 and at most threshold j; the last, those above every one."""

    thresholds: tuple[float, ...]
    bands: list[list[Moments]]

    def folds(self, upto: int) -> list[Moments]:
        """Per fold, the moments of the rows routed to the map at threshold ``upto`` (bands 0..upto); ``upto`` equal
        to the number of thresholds: every row."""
        return [merge_folds(fold[: upto + 1]) for fold in self.bands]

    def every_fold(self) -> list[Moments]:
        """Per fold, the moments of every row."""
        return self.folds(len(self.thresholds))

    def share(self, upto: int) -> float:
        """The share of the captured rows routed to the map at threshold ``upto``."""
        routed = sum(m.n for m in self.folds(upto))
        return routed / max(1, sum(m.n for m in self.every_fold()))


class RoutedSink(RowSink):
    """Accumulates each block's rows into float64 moments per fold and score band (:class:`RoutedMoments`).

    ``gates``: block -> gate (a module giving each row's score); ``thresholds``: block -> its cuts, ascending;
    ``folds``: how many folds the capture deals. Reads each batch's bands on the host, so a GPU waits once per block
    and batch: an analysis pass, not the measurement's hot loop.
    """

    def __init__(
        self, gates: Mapping[int, nn.Module], thresholds: Mapping[int, Sequence[float]], folds: int = 1
    ) -> None:
        self.gates, self.folds = dict(gates), folds
        self.thresholds = {b: tuple(float(t) for t in thresholds[b]) for b in self.gates}
        self.accumulators: dict[int, MomentAccumulator] = {}

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        if block not in self.gates:
            return
        cuts = self.thresholds[block]
        bands = len(cuts) + 1
        acc = self.accumulators.get(block)
        if acc is None:
            acc = self.accumulators[block] = MomentAccumulator(x.shape[1], y.shape[1], x.device, self.folds * bands)
        gate = self.gates[block].to(x.device)
        with torch.no_grad():
            band = torch.bucketize(gate(x), torch.tensor(cuts, dtype=torch.float32, device=x.device)).cpu()
        shifted = acc.shifted(x, y)
        for fold, start, stop in rows.runs:
            run = band[start:stop]
            for j in run.unique().tolist():
                index = ((run == j).nonzero().flatten() + start).to(x.device)
                acc.add_shifted(shifted.index_select(index), fold * bands + j)

    def moments(self, block: int) -> RoutedMoments:
        """``block``'s moments per fold and band (on its device)."""
        acc, bands = self.accumulators[block], len(self.thresholds[block]) + 1
        per_fold = [[acc.moments(f * bands + j) for j in range(bands)] for f in range(self.folds)]
        return RoutedMoments(self.thresholds[block], per_fold)
