"""One frozen forward pass over token batches, streaming each FFN block's (X, Y) rows to sinks.

Hooks only observe (they return nothing, so no module output is replaced). Padding rows are
dropped, every row carries the fold of its sequence, and the forward is cut short right after
the deepest block asked for, so neither later layers nor the LM head run.

Nothing on this path makes the host wait for a GPU within a batch: which rows are kept and which
fold each belongs to is decided on the host from the attention mask before the forward
(:class:`linrec.core.rows.BatchRows`), the rows of a fold are a slice, token ids travel from pinned memory without
blocking, and NaN/Inf activations are found from the float64 sums every ``check_every`` batches
(:class:`MomentSink`), not row by row. :class:`linrec.core.syncs.SyncCounter` tests it.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from linrec.core.accumulator import MomentAccumulator
from linrec.core.moment_files import SpilledMoments
from linrec.core.moments import BlockMoments, Moments, PositionMoments, all_reduce_moments
from linrec.core.rows import BatchRows, RowSink, to_device
from linrec.core.tails import TailSink
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.models.arch import BlockSpec, Spec, ffn_blocks, select_blocks
from linrec.progress import progress_bar

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class StopForward(Exception):
    """Raised by a hook after the last module a forward needs (the deepest wanted block): nothing after it runs."""


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a
    raise LinrecError("the FFN input module was called without a tensor argument")


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


def input_device(model: nn.Module) -> torch.device:
    """Where token ids must go: the device of the input embeddings (first device under device_map)."""
    # nn.Module types its attributes as Tensor | Module: say what this model (a transformers one) holds.
    embeddings = cast("PreTrainedModel", model).get_input_embeddings()
    return cast(torch.Tensor, embeddings.weight).device


def require_eval(model: nn.Module, what: str) -> None:
    """Refuse a model in training mode: its dropout would make ``what`` random (and lower R², as noise does)."""
    if model.training:
        raise LinrecError(f"the model is in training mode (dropout would make {what} random); call model.eval() first")


def run_capture(
    model: nn.Module,
    batches: TokenBatches,
    blocks: list[BlockSpec],
    sinks: Sequence[RowSink],
    fold_of_sequence: torch.Tensor,
    progress: bool = True,
    positions: slice | None = None,
) -> None:
    """Run ``model`` over ``batches`` once, handing each block's non-padding rows to every sink.

    Sequences are ordered by fold first (:meth:`TokenBatches.grouped`). ``positions``: hand over only
    the rows at these positions of each window (column indices, e.g. ``slice(1, None)`` leaves out
    position 0). The mask is applied to what is captured, never to the forward pass: every token
    still attends to, and is computed from, the whole window.
    """
    if not blocks:
        raise LinrecError("no FFN blocks selected")
    require_eval(model, "the captured activations")
    modules = dict(model.named_modules())
    deepest = max(blocks, key=lambda b: b.index)
    grouped = batches.grouped(fold_of_sequence)
    masks = (grouped.attention_mask.bool() & _columns(batches.seq_len, positions)).numpy()
    pending: dict[int, torch.Tensor] = {}
    batch: dict[str, Any] = {}  # this batch's BatchRows, the kept row indices (None: all) and their device copies

    def kept_rows(t: torch.Tensor) -> torch.Tensor:
        flat = t.reshape(-1, t.shape[-1])
        if batch["keep"] is None:
            return flat
        if flat.device not in batch["uploads"]:  # one upload per batch and device (blocks may sit on several)
            batch["uploads"][flat.device] = to_device(batch["keep"], flat.device)
        return flat.index_select(0, batch["uploads"][flat.device])

    def make_pre_hook(block: BlockSpec) -> Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None]:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            pending[block.index] = _first_tensor(args, kwargs)

        return hook

    def make_hook(block: BlockSpec) -> Callable[[nn.Module, tuple[Any, ...], Any], None]:
        def hook(_module: nn.Module, _args: tuple[Any, ...], output: Any) -> None:
            y = output[0] if isinstance(output, tuple) else output
            x = pending.pop(block.index)
            rows: BatchRows = batch["rows"]
            if rows.n:
                x, y = kept_rows(x), kept_rows(y)
                for sink in sinks:
                    sink.add(block.index, x, y, rows)
            if block is deepest:
                raise StopForward

        return hook

    handles = []
    for b in blocks:
        handles.append(modules[b.input].register_forward_pre_hook(make_pre_hook(b), with_kwargs=True))
        handles.append(modules[b.output].register_forward_hook(make_hook(b)))
    device = input_device(model)
    extra = {"use_cache": False} if getattr(getattr(model, "config", None), "use_cache", None) is not None else {}
    for sink in sinks:
        sink.start(int(masks.sum()))
    bar = progress_bar(total=int(masks.sum()), unit="tok", desc="capture", disable=not progress)
    offset = 0
    try:
        with torch.no_grad():
            for i, chunk in enumerate(grouped):
                mask = masks[i * grouped.batch_size : (i + 1) * grouped.batch_size]
                rows = BatchRows.of_mask(i, offset, mask, fold_of_sequence[chunk.seq_index])
                keep = None if rows.n == mask.size else torch.from_numpy(np.flatnonzero(mask))
                batch.update(rows=rows, keep=keep, uploads={})
                try:
                    model(
                        input_ids=to_device(chunk.input_ids, device),
                        attention_mask=to_device(chunk.attention_mask, device),
                        **extra,
                    )
                except StopForward:
                    pass
                pending.clear()
                for sink in sinks:
                    sink.end_batch(rows)
                offset += rows.n
                bar.update(rows.n)
        for sink in sinks:
            sink.finish()
    finally:
        bar.close()
        for h in handles:
            h.remove()


def _columns(width: int, positions: slice | None) -> torch.Tensor:
    """(1, width) bool: the window positions kept by ``positions`` (all when None)."""
    kept = torch.zeros(width, dtype=torch.bool)
    kept[positions if positions is not None else slice(None)] = True
    if not kept.any():
        raise LinrecError(f"positions {positions} keep no position of a {width}-token window")
    return kept[None]


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

    Folds come one after the other (``run_capture`` orders rows by fold), so at the end of each batch
    every fold but the batch's last is finished and closed (:meth:`MomentAccumulator.close`): on a GPU
    only the live fold's sums stay on the device, and the finished moments travel to the host while
    the capture goes on.

    NaN/Inf activations are looked for in the sums, not the rows (a non-finite row makes its fold's
    sums non-finite): once every ``check_every`` batches and in :meth:`moments`, one host read for
    all blocks, naming the first bad block and the batches since the last check.
    """

    def __init__(self, k: int, check_every: int = 64, spill: str | Path | None = None) -> None:
        self.k = k
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
            acc = self.accumulators[block] = MomentAccumulator(x.shape[1], y.shape[1], x.device, self.k)
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
            xs, ys = acc.shifted(x, y)
            for fold, start, stop in runs:
                acc.add_shifted(xs[start:stop], ys[start:stop], fold)

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
        """Centred moments per block and fold, on CPU, of the first rows and of the later rows apart (every fold
        is closed: no more rows can be added)."""
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
        return PositionMoments(_RowMoments(first, bounds), later)

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

    def __init__(self, rows: dict[int, tuple[torch.Tensor, torch.Tensor]], bounds: np.ndarray) -> None:
        self._rows, self._bounds = rows, bounds  # rows ordered by fold; fold f is rows bounds[f]:bounds[f + 1]

    def __getitem__(self, block: int) -> list[Moments]:
        x, y = self._rows[block]
        return [
            Moments.from_rows(x[lo:hi], y[lo:hi]) for lo, hi in zip(self._bounds[:-1], self._bounds[1:], strict=True)
        ]

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def rows_needed(width: int, folds: int, seq_len: int = 1) -> int:
    """Rows per block, in whole sequences of ``seq_len``, so that every training split has width + 1 rows.

    Folds are whole sequences dealt round-robin, so with n sequences the smallest training split
    (all folds but the largest) holds n - ceil(n / folds) = floor(n (folds - 1) / folds) of them,
    and it must hold m = ceil((width + 1) / seq_len): n >= m folds / (folds - 1), and n >= folds.
    """
    if folds < 2:
        raise LinrecError(f"folds must be at least 2; got {folds}")
    per_split = math.ceil((width + 1) / seq_len)
    return max(folds, math.ceil(per_split * folds / (folds - 1))) * seq_len


def check_training_rows(batches: TokenBatches, width: int, folds: int, seed: int) -> None:
    """Every training split of the actual fold assignment must have width + 1 rows (padding excluded)."""
    need = rows_needed(width, folds, batches.seq_len)
    n_seq = batches.n_sequences_total
    found = f"{n_seq} sequences cannot fill {folds} folds"
    if n_seq >= folds:
        fold_of_sequence = batches.folds(folds, seed)[batches.seq_index]
        rows = torch.zeros(folds, dtype=torch.long).index_add_(0, fold_of_sequence, batches.attention_mask.sum(1))
        smallest = int(rows.sum() - rows.max())
        if smallest >= width + 1:
            return
        found = f"the smallest has {smallest}"
    whole = "sequences" if batches.document is None else "documents, each dealt whole to one fold"
    advice = f"Use at least {need // batches.seq_len} sequences: max_rows={need} (--max-rows {need})"
    if batches.document is not None:
        advice += ", more where one document holds many of them"
    raise LinrecError(
        f"{batches.n_rows} rows per block in {n_seq} sequences of {batches.seq_len} tokens are too few "
        f"for width {width} "
        f"with {folds} folds: folds are whole {whole}, and every training split (all folds but one) needs "
        f"width + 1 = {width + 1} rows; {found}. {advice}, or fewer folds."
    )


def capture_positions(
    model: nn.Module,
    batches: TokenBatches,
    blocks: Sequence[int] | None = None,
    folds: int = 5,
    seed: int = 0,
    spec: Spec = None,
    extra_sinks: Sequence[RowSink] = (),
    progress: bool = True,
    positions: slice | None = None,
    spill: str | Path | None = None,
) -> PositionMoments:
    """Per-block, per-fold moments of one pass over ``batches`` (returned on CPU), the rows at each window's first
    captured position apart from the later ones (:class:`MomentSink`), with each block's largest rows
    (:class:`linrec.core.tails.TailSink`); ``positions``: only the rows at these window positions
    (:func:`run_capture`; the forward pass is unchanged). ``spill``: a directory where each fold's finished moments
    wait on disk (:class:`linrec.core.moment_files.SpilledMoments`), so that memory holds only the live fold of every
    block: for models whose moments would not fit.

    Under ``torch.distributed`` (e.g. ``torchrun``), each rank takes every world-th sequence and
    the moments are all-reduced, so every rank returns the moments of the whole set.
    """
    require_eval(model, "the captured activations")  # before any other work
    chosen = select_blocks(ffn_blocks(model, spec), blocks)
    width = getattr(getattr(model, "config", None), "hidden_size", None)
    if width is not None:
        check_training_rows(batches, width, folds, seed)
    get_embeddings = getattr(model, "get_input_embeddings", None)
    embeddings = get_embeddings() if callable(get_embeddings) else None
    if isinstance(embeddings, nn.Embedding):
        batches.check_vocabulary(embeddings.num_embeddings)
    fold_of_sequence = batches.folds(folds, seed)
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    if distributed:
        batches = batches.shard(dist.get_rank(), dist.get_world_size())
        progress = progress and dist.get_rank() == 0
    sink, tails = MomentSink(folds, spill=spill), TailSink()
    run_capture(model, batches, chosen, [sink, tails, *extra_sinks], fold_of_sequence, progress, positions)
    split = sink.positions()
    if distributed:
        return PositionMoments(
            all_reduce_moments(dict(split.first)), all_reduce_moments(dict(split.later)), tails.tails()
        )
    return replace(split, tails=tails.tails())


def capture_moments(
    model: nn.Module,
    batches: TokenBatches,
    blocks: Sequence[int] | None = None,
    folds: int = 5,
    seed: int = 0,
    spec: Spec = None,
    extra_sinks: Sequence[RowSink] = (),
    progress: bool = True,
    positions: slice | None = None,
) -> BlockMoments:
    """Per-block, per-fold moments of every row of one pass over ``batches`` (:func:`capture_positions`, its two
    parts merged)."""
    return capture_positions(model, batches, blocks, folds, seed, spec, extra_sinks, progress, positions).merge()
