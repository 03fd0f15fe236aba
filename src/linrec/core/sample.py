"""A bounded, seeded sample of each block's (X, Y) rows, kept on CPU for whatever trains by gradient.

Moments suffice for the closed-form map; a bilinear probe or an SGD baseline needs rows. A
:class:`RowSample` is a capture sink (pass it to ``capture_moments(..., extra_sinks=[sample])``, or
call :func:`linrec.core.capture.capture_with_sample`) that keeps at most ``sample_rows`` rows per block. Every row
gets a priority from a hash of (seed, block, its position in the block's row stream) and the rows with the
smallest priorities are kept: a uniform sample without replacement that depends only on the seed
and the row stream, never on the batch size. Each row keeps its fold, so a probe trains on the
same sequences as the moments' training split and is scored on the same held-out fold.

Rows are stored in float32 (enough for gradient training); closed-form baselines for comparison
come from float64 moments (:func:`closed_form`). One process: under ``torch.distributed`` each
rank samples its own shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from linrec.core.fit import DEFAULT_RCOND, AffineFit, fit_affine
from linrec.core.moments import Moments, merge_folds
from linrec.core.rows import BatchRows, RowSink, to_device
from linrec.core.tensorfile import write_tensors
from linrec.errors import LinrecError

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on uint64 (a fixed, well-mixed hash)."""
    z = (z + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
    return z ^ (z >> np.uint64(31))


def row_priority(seed: int, block: int, index: torch.Tensor) -> torch.Tensor:
    """Pseudo-random int64 priority of the rows at positions ``index`` of a block's stream."""
    if seed < 0:
        raise LinrecError(f"the sampling seed must be non-negative; got {seed}")
    key = _splitmix64(_splitmix64(np.array([seed], dtype=np.uint64)) ^ np.uint64(block))
    h = _splitmix64(index.numpy().astype(np.uint64) ^ key)
    return torch.from_numpy((h >> np.uint64(1)).astype(np.int64))


@dataclass
class Rows:
    """Rows of one block: x (n, d_in), y (n, d_out), fold (n,) — the fold of each row's sequence."""

    x: torch.Tensor
    y: torch.Tensor
    fold: torch.Tensor

    def __len__(self) -> int:
        return self.x.shape[0]

    def select(self, mask: torch.Tensor) -> Rows:
        return Rows(self.x[mask], self.y[mask], self.fold[mask])

    def to(self, device: str | torch.device) -> Rows:
        """These rows on ``device`` (the same object when they are there already)."""
        device = torch.device(device)
        if self.x.device == device:
            return self
        return Rows(self.x.to(device), self.y.to(device), self.fold.to(device))

    def split(self, test_fold: int) -> tuple[Rows, Rows]:
        """(training rows: every other fold, test rows: ``test_fold``)."""
        folds = sorted(self.fold.unique().tolist())
        if test_fold not in folds:
            raise LinrecError(f"test fold {test_fold} has no sampled rows; folds present: {folds}")
        test = self.fold == test_fold
        if test.all():
            raise LinrecError("every sampled row is in the test fold; capture with at least 2 folds")
        return self.select(~test), self.select(test)

    def holdout(self, fraction: float, seed: int) -> tuple[Rows, Rows]:
        """(rows to fit, a seeded random ``fraction`` of rows for validation / early stopping)."""
        if not 0 < fraction < 1:
            raise LinrecError(f"the validation fraction must lie in (0, 1); got {fraction}")
        n_val = max(1, round(fraction * len(self)))
        perm = torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        val = torch.zeros(len(self), dtype=torch.bool)
        val[perm[:n_val]] = True
        return self.select(~val), self.select(val)

    def fold_moments(self, k: int) -> list[Moments]:
        """Float64 moments of these rows, one per fold 0..k-1 (the layout :func:`linrec.core.fit.kfold` takes)."""
        return [Moments.from_rows(self.x[self.fold == f], self.y[self.fold == f]) for f in range(k)]


def train_moments(train: Rows, folds: list[Moments] | None = None, test_fold: int = 0) -> Moments:
    """Float64 moments of the training split.

    With ``folds`` (the block's captured per-fold moments): every fold but ``test_fold``, i.e.
    all captured training rows. Without: the moments of the sampled training rows ``train``
    (the rows a gradient-trained model sees, so both start from the same data).
    """
    if folds is None:
        return Moments.from_rows(train.x, train.y)
    if not 0 <= test_fold < len(folds):
        raise LinrecError(f"test fold {test_fold} out of range; the moments have folds 0..{len(folds) - 1}")
    return merge_folds([m for f, m in enumerate(folds) if f != test_fold])


def closed_form(
    train: Rows, folds: list[Moments] | None = None, test_fold: int = 0, rcond: float = DEFAULT_RCOND
) -> AffineFit:
    """The closed-form affine map (:func:`linrec.core.fit.fit_affine`) of the training moments
    (:func:`train_moments`)."""
    return fit_affine(train_moments(train, folds, test_fold), rcond)


def minibatches(n: int, batch_size: int, seed: int, device: torch.device | str = "cpu") -> Iterator[torch.Tensor]:
    """Endless row indices for gradient steps: seeded shuffles of ``range(n)``, ``batch_size`` at a time.

    Each epoch is a fresh permutation (drawn on the CPU, so alike on every device), sent to ``device``
    once per epoch without the host waiting; its last partial batch is dropped (a batch larger than
    ``n`` is cut to ``n``).
    """
    batch_size = min(batch_size, n)
    g = torch.Generator().manual_seed(seed)
    while True:
        order = to_device(torch.randperm(n, generator=g), torch.device(device))
        for start in range(0, n - batch_size + 1, batch_size):
            yield order[start : start + batch_size]


class RowSample(RowSink):
    """Capture sink keeping up to ``sample_rows`` rows per block (seeded, batch-size independent) of ``blocks`` (None:
    of every block).

    A row's priority depends only on (seed, block, its stream position), and :func:`run_capture` says
    how many rows each block will hand over before the first batch, so the kept rows are known before
    the forward runs: per batch, exactly the kept rows are gathered on the device and copied, without
    the host waiting, into preallocated host buffers (pinned when they come from a GPU) at their final
    places in stream order. Nothing is copied twice and nothing that is not kept leaves the device.
    """

    def __init__(self, sample_rows: int, seed: int = 0, blocks: Iterable[int] | None = None) -> None:
        if sample_rows < 1:
            raise LinrecError(f"sample_rows (rows kept per block) must be at least 1; got {sample_rows}")
        self.sample_rows = sample_rows
        self.seed = seed
        self.wanted = None if blocks is None else frozenset(blocks)
        self._stream: int | None = None  # rows per block, from start()
        self._kept: dict[int, np.ndarray] = {}  # stream positions of the kept rows, ascending
        self._rows: dict[int, Rows] = {}  # their buffers, filled in stream order
        self._filled: dict[int, int] = {}
        self._pending: set[torch.device] = set()  # GPUs with copies in flight

    @property
    def blocks(self) -> list[int]:
        return sorted(self._rows)

    def start(self, rows_per_block: int) -> None:
        """A capture begins: a new stream of rows, unless it is the next group of a planned capture over the same
        rows (:mod:`linrec.core.planned`), whose earlier groups' blocks keep what they hold."""
        if self._stream != rows_per_block or any(self._filled.get(b) != len(k) for b, k in self._kept.items()):
            self._kept, self._rows, self._filled = {}, {}, {}
        self._stream = rows_per_block

    def kept_positions(self, block: int) -> np.ndarray:
        """Stream positions of the rows kept for ``block``: the ``sample_rows`` smallest priorities, ascending."""
        if self._stream is None:
            raise LinrecError("RowSample.start(rows_per_block) must run before rows are added (run_capture calls it)")
        if block not in self._kept:
            priority = row_priority(self.seed, block, torch.arange(self._stream)).numpy()
            if self._stream > self.sample_rows:
                chosen = np.argpartition(priority, self.sample_rows - 1)[: self.sample_rows]
            else:
                chosen = np.arange(self._stream)
            self._kept[block] = np.sort(chosen)
        return self._kept[block]

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        if self.wanted is not None and block not in self.wanted:
            return
        kept = self.kept_positions(block)
        lo, hi = np.searchsorted(kept, [rows.offset, rows.offset + rows.n])
        if lo == hi:
            return
        if block not in self._rows:
            pin = x.device.type == "cuda"
            empty = lambda *s: torch.empty(*s, dtype=torch.float32, pin_memory=pin)  # noqa: E731
            self._rows[block] = Rows(
                empty(len(kept), x.shape[1]), empty(len(kept), y.shape[1]), torch.empty(len(kept), dtype=torch.long)
            )
            self._filled[block] = 0
        local = torch.from_numpy(kept[lo:hi] - rows.offset)
        if hi - lo < rows.n:  # only some rows are kept: gather exactly those on the device
            index = to_device(local, x.device)
            x, y = x.index_select(0, index), y.index_select(0, index)
        out = self._rows[block]
        out.x[lo:hi].copy_(x.detach().to(torch.float32), non_blocking=True)
        out.y[lo:hi].copy_(y.detach().to(torch.float32), non_blocking=True)
        out.fold[lo:hi] = rows.fold_ids()[local]
        self._filled[block] += int(hi - lo)
        if x.device.type == "cuda":
            self._pending.add(x.device)

    def finish(self) -> None:
        """Wait for the copies still in flight, so the buffers hold every kept row."""
        for device in self._pending:
            torch.cuda.synchronize(device)
        self._pending.clear()

    def rows(self, block: int) -> Rows:
        """The sampled rows of ``block``, in stream order."""
        if block not in self._rows:
            raise LinrecError(f"no rows sampled for block {block}; sampled blocks: {self.blocks}")
        if self._filled[block] < len(self._rows[block]) or self._pending:
            raise LinrecError(f"the capture of block {block} did not finish; its sample is incomplete")
        return self._rows[block]

    def take(self, block: int) -> Rows:
        """:meth:`rows` of ``block``, let go by the sample: for a caller that needs them once."""
        rows = self.rows(block)
        del self._rows[block], self._filled[block], self._kept[block]
        return rows


Samples = RowSample | Mapping[int, Rows]
"""Sampled rows per block: a capture's :class:`~linrec.core.sample.RowSample`, or a mapping block -> Rows
(such as ``linrec.experiment.measurement.ProfileMeasurement.samples``)."""


def sample_rows(sample: Samples, blocks: Sequence[int] | None = None) -> dict[int, Rows]:
    """The sampled rows of ``blocks`` (every sampled block by default), from either form of sample."""
    if isinstance(sample, RowSample):
        chosen = sample.blocks if blocks is None else list(blocks)
        return {b: sample.rows(b) for b in chosen}
    chosen = sorted(sample) if blocks is None else list(blocks)
    missing = [b for b in chosen if b not in sample]
    if missing:
        raise LinrecError(f"no rows sampled for blocks {missing}; sampled blocks: {sorted(sample)}")
    return {b: sample[b] for b in chosen}


_ROW_FIELDS = ("x", "y", "fold")


def save_rows(samples: Mapping[int, Rows], path: str | Path) -> None:
    """Write sampled rows per block to one safetensors file, in their own dtypes, one block at a time."""

    def tensors() -> Iterator[tuple[str, torch.Tensor]]:
        for b in samples:
            rows = samples[b]
            for k in _ROW_FIELDS:
                yield f"{b}.{k}", getattr(rows, k)

    write_tensors(path, tensors)


def load_rows(path: str | Path, blocks: Iterable[int] | None = None) -> dict[int, Rows]:
    """Read what :func:`save_rows` wrote: every block, or only ``blocks`` (the rest is never read)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        held = sorted({int(k.split(".")[0]) for k in f.keys()})
        chosen = held if blocks is None else [b for b in held if b in set(blocks)]
        return {b: Rows(*(f.get_tensor(f"{b}.{k}") for k in _ROW_FIELDS)) for b in chosen}
