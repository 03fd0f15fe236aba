"""How much of a block's output variance its largest rows carry: the top 0.1 % of rows, found in the one pass.

A block's output variance is Σᵢ ‖yᵢ − ȳ‖² over its rows. Where a handful of rows carry most of it (the attention
sink's position, or a few outlier tokens after it), a held-out R² is decided by which fold draws them, and its mean
over folds says little. The table's ``top_rows_share`` columns say so: the share of that sum carried by the largest
:data:`TOP_FRACTION` of rows, over every row and over the rows after each window's first position.

Rows are not kept and ȳ is known only at the end, so :class:`TailSink` keeps, per block and part, a pool of the
rows farthest from the running mean of the rows so far (at least :data:`POOL` of them). At the end the kept rows'
distances from the final mean are exact. A row dropped on the way was no farther from the mean of that moment than
the bound recorded as it went (about the pool's smallest distance), so (triangle inequality) no farther from the
final mean than that plus how far the two means lie apart; when the k-th largest kept distance reaches this bound
for every drop, the k largest rows of the whole stream are certainly among those kept, and their sum is exact. Where
it does not (a pool too small for so flat a spread of distances, where the share is close to k/n anyway), the share
is NaN: unknown, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from linrec.core.rows import BatchRows, RowSink, to_device

TOP_FRACTION = 0.001
"""The share of rows counted as a block's largest: 0.1 %, rounded up to whole rows."""

POOL = 512
"""Rows kept per block and part at least (:class:`TailSink`); more when 8 × the top rows would exceed it."""


def top_count(rows: int) -> int:
    """How many rows are the largest :data:`TOP_FRACTION` of ``rows`` (at least one of any)."""
    return math.ceil(TOP_FRACTION * rows) if rows > 0 else 0


def pool_rows(rows: int) -> int:
    """The rows a pool keeps for a part of ``rows`` rows: :data:`POOL`, or 8 × its top rows where that is more."""
    return max(POOL, 8 * top_count(rows))


@dataclass(frozen=True)
class Tail:
    """The largest rows of one part of a block's rows (every row, or those after the first position)."""

    rows: int  # rows in the part
    top: int  # how many of them count as the largest (top_count)
    top_ss: float  # their Σ ‖y − ȳ‖², ȳ the part's mean; NaN when the pass could not single them out


@dataclass(frozen=True)
class Tails:
    """A block's :class:`Tail` over every row and over the rows after each window's first captured position."""

    every: Tail
    later: Tail


class _Pool:
    """The rows of one part of one block farthest from the running mean, and what certifies them at the end.

    The rows are kept as captured, in the model's dtype (exact: the distances at the end are taken from them in
    float64). Each batch ranks rows by an upper bound on their distance from the mean of the rows so far, taken in
    float32 (float64 rows in float64): the distance in that format plus its error over ``d`` squares and the mean's
    own rounding (:func:`_upper_bounds`). The batch's ``size`` largest are ranked again beside the pool's rows, by the
    same bounds, and the ``size`` largest of them all stay; every row let go, from the batch or the pool, is no
    farther from that batch's mean than the largest bound let go, which is recorded for it. No row is cast to
    float64 on the way."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.rows: torch.Tensor | None = None  # (≤ size, d), as captured
        self.n = 0
        self.sum: torch.Tensor | None = None  # float64 sum of every row so far
        self.drops: list[tuple[torch.Tensor, torch.Tensor]] = []  # per batch: (bound on the rows let go, the mean)

    def add(self, y: torch.Tensor, total: torch.Tensor, leave_out: torch.Tensor | None = None) -> None:
        """Take the rows of ``y`` but those at ``leave_out`` (indices); ``total``: their float64 sum."""
        n = y.shape[0] - (0 if leave_out is None else leave_out.shape[0])
        if not n:
            return
        self.sum = total if self.sum is None else self.sum + total
        self.n += n
        mean = self.sum / self.n
        bound = _upper_bounds(mean, y.dtype)
        near = bound(y)
        let_go = []
        wanted = min(n, self.size)
        if y.shape[0] > wanted:  # the batch's own ranking: only the rows that may be among the farthest go on
            if leave_out is not None:
                near = near.index_fill(0, leave_out, -math.inf)
            screen = torch.topk(near, wanted + 1, sorted=True)
            y, near = y.index_select(0, screen.indices[:wanted]), screen.values[:wanted]
            let_go.append(screen.values[wanted])
        if self.rows is not None:
            y = torch.cat([self.rows, y.to(self.rows.dtype)])
            near = torch.cat([bound(self.rows), near])
        if y.shape[0] > self.size:
            top = torch.topk(near, self.size + 1, sorted=True)
            y = y.index_select(0, top.indices[: self.size])
            let_go.append(top.values[self.size])
        self.rows = y
        if let_go:
            self.drops.append((torch.stack(let_go).max(), mean))

    def resolve(self, mean: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the ``top`` largest squared distances of the kept rows from ``mean``, descending and padded with -inf;
        the distance from ``mean`` that no row left out exceeds), on the rows' device."""
        device = mean.device
        kept = torch.zeros(0, dtype=torch.float64, device=device) if self.rows is None else _distances(self.rows, mean)
        largest = torch.topk(kept, min(top, kept.shape[0]), sorted=True).values
        pad = torch.full((top - largest.shape[0],), -math.inf, dtype=torch.float64, device=device)
        bounds = [d + (m - mean).norm() for d, m in self.drops]
        bound = torch.stack(bounds).max() if bounds else torch.tensor(-math.inf, dtype=torch.float64, device=device)
        return torch.cat([largest, pad]), bound * (1 + 4 * mean.shape[0] * _EPS64)  # (their float64 rounding)


def _upper_bounds(mean: torch.Tensor, dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """A bound on rows of ``dtype``: each row's float64 distance from ``mean`` at most its distance in float32
    (float64 rows in float64; rows of 16 or 32 bits are exact there), raised by that format's error over the row's
    squares and by the rounding of ``mean`` to it (the rounding taken once, for every row the batch ranks)."""
    work = torch.float64 if dtype == torch.float64 else torch.float32
    rounded = mean.to(work)
    slack = (mean - rounded.to(torch.float64)).norm()
    raised = 1 + mean.shape[0] * torch.finfo(work).eps
    return lambda rows: torch.linalg.vector_norm(rows.to(work) - rounded, dim=1).to(torch.float64) * raised + slack


_EPS64 = torch.finfo(torch.float64).eps


def _distances(rows: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
    """‖row − mean‖² of every row, in float64 (the rows cast exactly)."""
    return (rows.to(torch.float64) - mean).pow(2).sum(1)


def _largest(pool: _Pool, distributed: bool) -> tuple[int, int, torch.Tensor]:
    """(rows, top rows, a device pair: their Σ ‖y − ȳ‖² and whether the pass singled them out) of one part, over
    every process's pool when ``distributed``."""
    device = pool.sum.device if pool.sum is not None else torch.device("cpu")
    total = pool.sum
    rows = pool.n
    if distributed:
        n = torch.tensor(float(pool.n), dtype=torch.float64, device=device)
        width = torch.tensor(float(0 if total is None else total.shape[0]), dtype=torch.float64, device=device)
        dist.all_reduce(width, op=dist.ReduceOp.MAX)
        total = torch.zeros(int(width.item()), dtype=torch.float64, device=device) if total is None else total.clone()
        dist.all_reduce(n)
        dist.all_reduce(total)
        rows = int(n.item())
    top = top_count(rows)
    if total is None or top == 0:
        return rows, top, torch.tensor([math.nan, 0.0], dtype=torch.float64)
    largest, bound = pool.resolve(total / rows, top)
    if distributed:
        gathered = [torch.empty_like(largest) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, largest)
        largest = torch.topk(torch.cat(gathered), top, sorted=True).values
        dist.all_reduce(bound, op=dist.ReduceOp.MAX)
    return rows, top, torch.stack([largest.sum(), (largest[-1].sqrt() >= bound).to(torch.float64)])


class TailSink(RowSink):
    """Keeps, per block, the rows that may be its largest :data:`TOP_FRACTION` (module docstring): over every row
        and over the rows after each window's first kept position (:attr:`BatchRows.firsts`; every row when the rows
        come from no windows). Its pools hold the output rows only, as captured (on the CPU when they come from MPS,
    which lacks float64). Nothing it does per batch makes the host wait for a GPU."""

    def __init__(self) -> None:
        self.size = POOL
        self.pools: dict[int, tuple[_Pool, _Pool]] = {}
        self._uploads: tuple[int, dict[torch.device, torch.Tensor]] | None = None  # a batch's first rows per device

    def start(self, rows_per_block: int) -> None:
        self.size = pool_rows(rows_per_block)

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        every, later = self.pools.setdefault(block, (_Pool(self.size), _Pool(self.size)))
        y = y.detach() if y.device.type != "mps" else y.detach().cpu()  # (MPS has no float64)
        total = y.sum(0, dtype=torch.float64)
        every.add(y, total)
        if rows.firsts:
            firsts = self._firsts(rows, y.device)
            later.add(y, total - y.index_select(0, firsts).sum(0, dtype=torch.float64), leave_out=firsts)
        else:
            later.add(y, total)

    def _firsts(self, rows: BatchRows, device: torch.device) -> torch.Tensor:
        """The batch's first rows as an index tensor on ``device``, uploaded once per batch and device."""
        if self._uploads is None or self._uploads[0] != rows.index:
            self._uploads = (rows.index, {})
        uploads = self._uploads[1]
        if device not in uploads:
            uploads[device] = to_device(torch.tensor(rows.firsts, dtype=torch.long), device)
        return uploads[device]

    def tails(self) -> dict[int, Tails]:
        """Each block's :class:`Tails`; under ``torch.distributed`` every rank's pools together (a collective:
        every rank calls it, blocks in the same order)."""
        distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        blocks = sorted(self.pools)
        parts = [_largest(pool, distributed) for b in blocks for pool in self.pools[b]]
        if not parts:
            return {}
        values = torch.stack([p[2].to(parts[0][2].device) for p in parts]).cpu().tolist()  # one host read in all
        tails = [Tail(rows, top, ss if certain else math.nan) for (rows, top, _), (ss, certain) in zip(parts, values)]
        return {b: Tails(tails[2 * i], tails[2 * i + 1]) for i, b in enumerate(blocks)}
