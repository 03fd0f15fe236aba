"""The capture's main sink: float64 moments per block and fold, accumulated as the rows stream by.

:class:`MomentSink` keeps each window's first-position rows apart (where the attention sink sits),
closes each fold as soon as the capture moves on to the next (on a GPU its moments go to pinned host
memory while the capture goes on, or to disk with a spill directory), and finds NaN/Inf activations
from the float64 sums every ``check_every`` batches, not row by row, so the host never waits on a GPU
within a batch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import torch

from linrec.core.accumulator import MomentAccumulator
from linrec.core.moment_files import SpilledMoments
from linrec.core.moments import BlockMoments, Moments, PositionMoments
from linrec.core.rows import BatchRows, RowSink, to_device
from linrec.core.schemes import FLOAT64, parse_products
from linrec.errors import LinrecError


def _non_finite_advice(dtype: torch.dtype) -> str:
    """What to do about NaN/Inf activations, given the dtype the model computes in."""
    if dtype == torch.float16:
        return "A float16 model can overflow: load it in float32 or bfloat16 (--dtype float32)."
    if dtype == torch.bfloat16:
        return "A bfloat16 model can lose range: load it in float32 (--dtype float32)."
    return (
        f"The model already computes in {str(dtype).removeprefix('torch.')}, so this is no low-precision overflow: "
        "its weights hold NaN/Inf (check torch.isfinite on model.parameters()) or the checkpoint is damaged."
    )


@dataclass
class _Split:
    """One batch's rows split into each window's first row and the later ones (:meth:`BatchRows.later`)."""

    index: int  # the batch's number
    later: np.ndarray  # the later rows' indices in the batch
    runs: tuple[tuple[int, int, int], ...]  # their fold runs, in the later rows' order
    window: int  # rows per window when every window keeps all its rows (strided views suffice), else 0
    uploads: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def indices(self, firsts: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(first rows, later rows) as index tensors on ``device``, uploaded once per device."""
        if device not in self.uploads:
            index = lambda a: to_device(torch.from_numpy(np.asarray(a, dtype=np.int64)), device)  # noqa: E731
            self.uploads[device] = (index(firsts), index(self.later))
        return self.uploads[device]


class MomentSink(RowSink):
    """Accumulates float64 moments per block and fold (on CPU when rows come from MPS, which lacks float64).

    The rows at each window's first kept position (:attr:`BatchRows.firsts`: the attention sink, where some
    models put most of a block's output variance) are kept apart: they are few (one per window), so they are
    kept as rows, and their moments are made at the end; every other row streams into the sums. Every row is
    accumulated once, so the split costs no arithmetic; :meth:`positions` gives both parts and
    :meth:`moments` their union, every row.

    Folds come one after the other (:func:`linrec.core.capture.run_capture` orders rows by fold), so at the end
    of each batch every fold but the batch's last is finished and closed (:meth:`MomentAccumulator.close`): on a
    GPU only the live fold's sums stay on the device, and the finished moments travel to the host while the
    capture goes on.

    NaN/Inf activations are looked for in the sums, not the rows (a non-finite row makes its fold's
    sums non-finite): once every ``check_every`` batches and in :meth:`moments`, one host read for
    all blocks, naming the first bad block and the batches since the last check.

    ``spill``: a directory where finished folds wait on disk; ``keep_on_gpu``: they stay on the GPU
    that summed them (:class:`MomentAccumulator`; not with ``spill``); ``full_output``: the whole YᵀY, not only its
    diagonal, and ``products``: how the rows are multiplied (:mod:`linrec.core.schemes`), both as
    :class:`MomentAccumulator` takes them.
    """

    def __init__(
        self,
        k: int,
        check_every: int = 64,
        spill: str | Path | None = None,
        keep_on_gpu: bool = False,
        full_output: bool = False,
        products: str = FLOAT64,
    ) -> None:
        if spill is not None and keep_on_gpu:
            raise ValueError("finished folds either go to disk (spill) or stay on the GPU (keep_on_gpu), not both")
        self.k = k
        self.keep_on_gpu = keep_on_gpu
        self.full_output = full_output
        self.products = parse_products(products)  # a name it does not know is refused before any row
        self.check_every = check_every
        self.accumulators: dict[int, MomentAccumulator] = {}
        self._spilled = None if spill is None else SpilledMoments(spill, k)  # finished folds on disk
        self._firsts: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # per block: (x, y) of first rows
        self._first_folds: list[np.ndarray] = []  # the fold of each first row, batch by batch (all blocks alike)
        self._first_finite: dict[int, torch.Tensor] = {}  # per block: a device flag, all first rows finite
        self._plan: _Split | None = None  # the split of the batch being added
        self._dtypes: dict[int, torch.dtype] = {}
        self._batches = 0  # batches ended so far
        self._checked = 0  # batches known to be finite

    def _split(self, rows: BatchRows) -> _Split:
        """This batch's first and later rows, worked out once on the host (the first block of a batch asks)."""
        if self._plan is None or self._plan.index != rows.index:
            later, runs = rows.later()
            width = rows.n // len(rows.firsts)  # every window keeps `width` rows when the firsts fall every `width`
            regular = width > 1 and rows.firsts == tuple(range(0, rows.n, width)) and rows.n % width == 0
            self._plan = _Split(rows.index, later, runs, width if regular else 0)
        return self._plan

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        if x.device.type == "mps":
            x, y = x.cpu(), y.cpu()
        acc = self.accumulators.get(block)
        if acc is None:
            acc = self.accumulators[block] = MomentAccumulator(
                x.shape[1], y.shape[1], x.device, self.k, self.keep_on_gpu, self.full_output, self.products
            )
            self._dtypes[block] = y.dtype
            self._firsts[block] = []
        runs = rows.runs
        x, y = x.detach(), y.detach()
        if rows.firsts:
            plan = self._split(rows)
            if plan.window:  # (windows, width, d) views: the firsts are column 0, the later rows the rest
                x, y = x.reshape(-1, plan.window, x.shape[-1]), y.reshape(-1, plan.window, y.shape[-1])
                xf, yf, x, y = x[:, 0].clone(), y[:, 0].clone(), x[:, 1:], y[:, 1:]
            else:
                firsts, later = plan.indices(rows.firsts, x.device)
                xf, yf = x.index_select(0, firsts), y.index_select(0, firsts)
                x, y = x.index_select(0, later), y.index_select(0, later)
            self._firsts[block].append((xf, yf))
            finite = torch.isfinite(xf).all() & torch.isfinite(yf).all()
            self._first_finite[block] = finite & self._first_finite.get(block, finite)
            runs = plan.runs
        if x.numel():
            shifted = acc.shifted(x, y)
            for fold, start, stop in runs:
                acc.add_shifted(shifted[start:stop], fold)

    def end_batch(self, rows: BatchRows) -> None:
        self._batches = rows.index + 1
        if rows.firsts:
            self._first_folds.append(rows.fold_ids().numpy()[list(rows.firsts)])
        if rows.runs:
            last = rows.runs[-1][0]
            if self._spilled is not None:
                self._spill(range(last))  # block by block: one block's finished fold in memory at a time
            else:
                for acc in self.accumulators.values():
                    for fold in acc.live_folds:
                        if fold != last:
                            acc.close(fold)
        if self._batches - self._checked >= self.check_every:
            self.check()

    def finish(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise if a block's sums or first rows are non-finite: one host read of one flag per block."""
        if not self.accumulators or self._checked == self._batches:
            return
        blocks = sorted(self.accumulators)
        flags = [self.accumulators[b].finite() for b in blocks]
        flags = [
            f & self._first_finite[b].to(f.device) if b in self._first_finite else f for b, f in zip(blocks, flags)
        ]
        finite = torch.stack([f.to(flags[0].device) for f in flags]).cpu().tolist()  # one read, devices gathered
        if not all(finite):
            block = blocks[finite.index(False)]
            raise LinrecError(
                f"block {block}: NaN or Inf activations in batches {self._checked}-{self._batches - 1} of the capture. "
                f"{_non_finite_advice(self._dtypes[block])}"
            )
        self._checked = self._batches

    def positions(self) -> PositionMoments:
        """Centred moments per block and fold of the first rows and of the later rows apart (every fold is closed:
        no more rows can be added): on CPU, but for the later rows' with ``keep_on_gpu``, left on their GPU."""
        self.check()
        if self._spilled is not None:
            self._spill(range(self.k))  # block by block, as at a fold's end
        else:
            for acc in self.accumulators.values():
                for fold in range(self.k):
                    acc.close(fold)
        for device in {acc.device for acc in self.accumulators.values() if acc.device.type == "cuda"}:
            torch.cuda.synchronize(device)  # the pinned copies have landed
        folds = np.concatenate(self._first_folds) if self._first_folds else np.zeros(0, dtype=np.int64)
        order = torch.from_numpy(np.argsort(folds, kind="stable"))  # the first rows, fold by fold
        bounds = np.searchsorted(folds[order.numpy()], np.arange(self.k + 1))
        first: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for b, acc in self.accumulators.items():
            if not self._firsts[b]:
                first[b] = (torch.zeros(0, acc.d_in), torch.zeros(0, acc.d_out))
                continue
            x = torch.cat([xf for xf, _ in self._firsts[b]])
            y = torch.cat([yf for _, yf in self._firsts[b]])
            on = to_device(order, x.device)
            first[b] = (x.index_select(0, on).cpu(), y.index_select(0, on).cpu())
        later: Mapping[int, list[Moments]] = (
            {b: [acc.moments(f) for f in range(self.k)] for b, acc in self.accumulators.items()}
            if self._spilled is None
            else self._spilled
        )
        return PositionMoments(_RowMoments(first, bounds, self.full_output), later)

    def _spill(self, folds: Iterable[int]) -> None:
        """With a spill directory, move ``folds``' finished moments of every block to disk (each fold once)."""
        if self._spilled is None:
            return
        moved = False
        for block, acc in self.accumulators.items():
            for fold in folds:
                acc.close(fold)  # a fold that got no rows of this block has zero moments
                if fold not in self._spilled.folds_of(block):
                    if acc.device.type == "cuda":
                        torch.cuda.synchronize(acc.device)  # its pinned copy has landed
                    self._spilled.put(block, fold, acc.release(fold))
                    moved = True
        if moved:
            trim_heap()

    def moments(self) -> BlockMoments:
        """Centred moments of every row per block and fold, on CPU (:meth:`positions`, merged)."""
        return self.positions().merge()


def trim_heap() -> None:
    """Give the heap's freed pages back to the system where the C library can (glibc's ``malloc_trim``): a fold's
    sums are tens of MB per block, below glibc's mmap threshold, so without it the memory of every spilled fold stays
    resident (about 1 GB per fold for a 1.5B model) though nothing holds it."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator returns memory its own way
        pass


class _RowMoments(Mapping[int, list[Moments]]):
    """Block -> per-fold float64 moments of its first-position rows, made from the rows (one per window, on CPU) each
    time a block is read: a few rows, not a d x d matrix per fold, are what is kept."""

    def __init__(
        self, rows: dict[int, tuple[torch.Tensor, torch.Tensor]], bounds: np.ndarray, full_output: bool = True
    ) -> None:
        self._rows, self._bounds = rows, bounds  # rows ordered by fold; fold f is rows bounds[f]:bounds[f + 1]
        self._full_output = full_output  # Cyy whole, or its diagonal

    def __getitem__(self, block: int) -> list[Moments]:
        return list(self.each_fold(block))

    def each_fold(self, block: int) -> Iterator[Moments]:
        """``block``'s moments fold by fold, each made when reached (:meth:`PositionMoments.first_folds`)."""
        x, y = self._rows[block]
        for lo, hi in zip(self._bounds[:-1], self._bounds[1:], strict=True):
            yield Moments.from_rows(x[lo:hi], y[lo:hi], self._full_output)

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def joined_firsts(parts: Sequence[Mapping[int, list[Moments]]]) -> Mapping[int, list[Moments]]:
    """The first rows' moments of several captures of the same windows and folds (a plan's groups, each of its own
    blocks) as one mapping; still made from the rows, fold by fold, when a block is read."""
    if parts and all(isinstance(p, _RowMoments) for p in parts):
        rows = {b: r for p in parts for b, r in cast(_RowMoments, p)._rows.items()}
        first = cast(_RowMoments, parts[0])
        return _RowMoments(rows, first._bounds, first._full_output)
    return {b: m for p in parts for b, m in p.items()}
