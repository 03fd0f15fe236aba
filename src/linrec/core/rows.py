"""What a capture hands to its sinks: each batch's rows, planned on the host before the forward (:class:`BatchRows`),
and the sink interface (:class:`RowSink`) that every consumer of rows implements.

Nothing here reads a device value on the host, so a sink that follows these plans never makes a GPU wait.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from linrec.models.arch import BlockSpec

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle


@dataclass(frozen=True)
class BatchRows:
    """What the host knows of one batch's captured rows before its forward (learning it costs the device nothing).

    A batch's rows are its kept token rows (not padding, at a wanted position) in sequence-major order.
    ``run_capture`` orders sequences by fold, so each fold's rows are one contiguous ``runs`` entry.
    ``firsts`` are the rows at the first kept position of each window (position 0, where the attention sink
    sits, unless the capture leaves it out); empty when the rows do not come from windows.
    """

    index: int  # the batch's number in this capture, from 0
    offset: int  # rows handed over in earlier batches: the stream position of this batch's first row
    runs: tuple[tuple[int, int, int], ...]  # (fold, start, stop) in the batch's rows
    firsts: tuple[int, ...] = ()  # the row of each window's first kept position, ascending

    @property
    def n(self) -> int:
        return self.runs[-1][2] if self.runs else 0

    def fold_ids(self) -> torch.Tensor:
        """The fold of every row (CPU, long)."""
        out = torch.empty(self.n, dtype=torch.long)
        for fold, start, stop in self.runs:
            out[start:stop] = fold
        return out

    @classmethod
    def of_folds(cls, index: int, offset: int, fold: torch.Tensor) -> BatchRows:
        """The rows of a batch whose rows are in folds ``fold`` (CPU, one per row): one run per stretch of a fold."""
        f = fold.numpy()
        cuts = [0, *(np.flatnonzero(np.diff(f)) + 1).tolist(), len(f)]
        return cls(index, offset, tuple((int(f[a]), a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a))

    @classmethod
    def of_mask(cls, index: int, offset: int, mask: np.ndarray, fold: torch.Tensor) -> BatchRows:
        """The rows of a batch whose kept positions are ``mask`` (B, T) and whose sequences are in folds ``fold``."""
        counts = mask.sum(1)
        starts = np.cumsum(counts) - counts
        plan = cls.of_folds(index, offset, torch.from_numpy(np.repeat(fold.numpy(), counts)))
        return replace(plan, firsts=tuple(starts[counts > 0].tolist()))

    def later(self) -> tuple[np.ndarray, tuple[tuple[int, int, int], ...]]:
        """The rows that are not :attr:`firsts` (indices, ascending) and their fold runs (in those rows' order)."""
        firsts = np.asarray(self.firsts, dtype=np.int64)
        later = np.setdiff1d(np.arange(self.n), firsts, assume_unique=True)
        before = lambda row: row - int(np.searchsorted(firsts, row))  # noqa: E731 (later rows before ``row``)
        runs = tuple((fold, before(a), before(b)) for fold, a, b in self.runs if before(b) > before(a))
        return later, runs


class RowSink:
    """Receives each block's rows, batch by batch, during :func:`run_capture`; subclasses override :meth:`add`.

    Every call happens while the forward runs, so a sink that wants a GPU never to wait reads no device
    value on the host (``.item()``, ``bool(t)``, boolean masks, copies to pageable host memory).
    """

    def start(self, rows_per_block: int) -> None:
        """Called once before the first batch: how many rows each block will hand over in all."""

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        """The rows of ``block`` for one batch: x (n, d_in), y (n, d_out), on the block's device."""
        raise NotImplementedError

    def reaches(self, block: BlockSpec) -> str:
        """The module whose forward must end before the capture may stop, for this sink's view of ``block``: the
        block's output module (a sink that reads a later module, as the residual stream after the layer, says so)."""
        return block.output

    def hooks(
        self, model: nn.Module, blocks: list[BlockSpec], kept: Callable[[torch.Tensor], tuple[torch.Tensor, BatchRows]]
    ) -> list[RemovableHandle]:
        """Hooks of the sink's own on ``model``, for what the capture's (x, y) rows do not hold; ``kept`` turns one of
        the batch's (batch, position, width) tensors into its captured rows, with the batch's :class:`BatchRows`.
        The capture removes them when it ends. None by default."""
        return []

    def end_batch(self, rows: BatchRows) -> None:
        """Called after every block of a batch was added."""

    def finish(self) -> None:
        """Called once after the last batch."""


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` (on the CPU) on ``device``; to a GPU from pinned memory, queued without the host waiting."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
