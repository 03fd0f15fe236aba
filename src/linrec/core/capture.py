"""One frozen forward pass over token batches, streaming each FFN block's (X, Y) rows to sinks.

Hooks only observe (they return nothing, so no module output is replaced). Padding rows are
dropped, every row carries the fold of its sequence, and the forward is cut short right after
the deepest block asked for (:func:`stop_after`), so neither later layers nor the LM head run.

Nothing on this path makes the host wait for a GPU within a batch: which rows are kept and which
fold each belongs to is decided on the host from the attention mask before the forward
(:class:`linrec.core.rows.BatchRows`), the rows of a fold are a slice, token ids travel from pinned memory without
blocking, and NaN/Inf activations are found from the float64 sums every ``check_every`` batches
(:class:`linrec.core.moment_sink.MomentSink`), not row by row. :class:`linrec.core.syncs.SyncCounter` tests it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from linrec.core.extras import OUTPUT_COVARIANCE, SCORES, parse_extras
from linrec.core.moment_sink import MomentSink
from linrec.core.moments import BlockMoments, PositionMoments, all_reduce_moments
from linrec.core.residual import ResidualSink
from linrec.core.rows import BatchRows, RowSink, to_device
from linrec.core.sample import RowSample
from linrec.core.schemes import FLOAT64
from linrec.core.tails import TailSink
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.models.arch import BlockSpec, Spec, ffn_blocks, select_blocks
from linrec.progress import progress_bar

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class CaptureOptions:
    """How a capture runs, whichever entry point asked for it (:func:`linrec.measure`,
    :meth:`linrec.Measurement.capture`, :func:`capture_moments`): made once there and handed down unchanged, through
    the plan's groups (:mod:`linrec.core.planned`) to each pass (:func:`capture_positions`).

    ``folds``, ``seed``: the k-fold split of the sequences (:meth:`TokenBatches.folds`); ``spec``: the FFN blocks of
    an architecture the library does not know (:mod:`linrec.models.arch`); ``progress``: a tqdm bar per pass;
    ``positions``: only the rows at these window positions (:func:`run_capture`; the forward pass is unchanged);
    ``spill``: a directory where finished folds wait on disk (:class:`linrec.core.moment_files.SpilledMoments`);
    ``extra_sinks``: more sinks that see the same rows in the same pass (e.g. a
    :class:`linrec.core.sample.RowSample`); ``extras``: what to compute beyond what the fit needs
    (:mod:`linrec.core.extras`: the whole output covariance, the residual-stream scores of
    :class:`linrec.core.residual.ResidualSink`; without them their columns are NaN and the rest of the table the
    same); ``keep_on_gpu``: finished folds' moments stay on the GPU that summed them, not in pinned host memory (for a
    table whose fits run there, as its plan chose: :attr:`linrec.core.plan.Footprint.kept_on_gpu`; not with
    ``spill``); ``products``: how each chunk of shifted rows is multiplied into the float64 sums
    (:mod:`linrec.core.schemes`: exact ``float64`` by default, ``float32``, ``ozaki:S``)."""

    folds: int = 5
    seed: int = 0
    spec: Spec = None
    progress: bool = True
    positions: slice | None = None
    spill: str | Path | None = None
    extra_sinks: Sequence[RowSink] = ()
    extras: frozenset[str] = frozenset()
    keep_on_gpu: bool = False
    products: str = FLOAT64


class StopForward(Exception):
    """Raised by a hook after the last module a forward needs (the deepest wanted block): nothing after it runs."""


def _stop(*_: Any) -> None:
    """The forward hook of :func:`stop_after`."""
    raise StopForward


def stop_after(model: nn.Module, module: str) -> RemovableHandle:
    """Cut every forward of ``model`` short right after its module named ``module`` (a hook raising
    :class:`StopForward`, which :func:`forward_until_stopped` catches): what the capture skips, later layers and the
    LM head, never runs. Hooks on that module registered before this one still run; remove the handle to undo it."""
    return dict(model.named_modules())[module].register_forward_hook(_stop)


def forward_until_stopped(model: nn.Module, **inputs: Any) -> None:
    """``model(**inputs)``, a :class:`StopForward` from a hook (:func:`stop_after`) ending it early without error."""
    try:
        model(**inputs)
    except StopForward:
        pass


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a
    raise LinrecError("the FFN input module was called without a tensor argument")


def input_device(model: nn.Module) -> torch.device:
    """Where token ids must go: the device of the input embeddings (first device under device_map)."""
    # nn.Module types its attributes as Tensor | Module: say what this model (a transformers one) holds.
    embeddings = cast("PreTrainedModel", model).get_input_embeddings()
    return cast(torch.Tensor, embeddings.weight).device


def device_of(module: nn.Module) -> torch.device | None:
    """Where ``module``'s first parameter (else buffer) is; None for a module with neither."""
    return next((t.device for t in [*module.parameters(), *module.buffers()]), None)


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
    stop: bool = True,
) -> None:
    """Run ``model`` over ``batches`` once, handing each block's non-padding rows to every sink.

    Sequences are ordered by fold first (:meth:`TokenBatches.grouped`). ``positions``: hand over only
    the rows at these positions of each window (column indices, e.g. ``slice(1, None)`` leaves out
    position 0). The mask is applied to what is captured, never to the forward pass: every token
    still attends to, and is computed from, the whole window. ``stop=False``: the forward is not cut short after
    the deepest block; a hook of the caller's ends it (:func:`linrec.core.resume.recording`).
    """
    if not blocks:
        raise LinrecError("no FFN blocks selected")
    require_eval(model, "the captured activations")
    modules = dict(model.named_modules())
    deepest = max((s.reaches(b) for s in sinks for b in blocks), key=_ending(modules))  # (a spec's indices need not
    # follow depth)
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

    def kept(t: torch.Tensor) -> tuple[torch.Tensor, BatchRows]:
        return kept_rows(t), batch["rows"]

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

        return hook

    handles = []
    for b in blocks:
        handles.append(modules[b.input].register_forward_pre_hook(make_pre_hook(b), with_kwargs=True))
        handles.append(modules[b.output].register_forward_hook(make_hook(b)))
    for sink in sinks:
        handles.extend(sink.hooks(model, blocks, kept))
    if stop:
        handles.append(stop_after(model, deepest))  # after the sinks' hooks on it, which still run
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
                forward_until_stopped(
                    model,
                    input_ids=to_device(chunk.input_ids, device),
                    attention_mask=to_device(chunk.attention_mask, device),
                    **extra,
                )
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


def _ending(modules: dict[str, nn.Module]) -> Callable[[str], tuple[int, int]]:
    """A key that orders module names by when their forward ends, taking the modules to run in the order they are
    defined: a module ends with the last module inside it, and after it (a decoder layer after its FFN)."""
    order = list(modules)
    last = {name: i for i, name in enumerate(order)}
    for i, name in enumerate(order):  # each module's descendants follow it: the last one seen is its end
        parts = name.split(".")
        for cut in range(len(parts)):
            last[".".join(parts[:cut])] = i
    return lambda name: (last[name], -name.count("."))


def _columns(width: int, positions: slice | None) -> torch.Tensor:
    """(1, width) bool: the window positions kept by ``positions`` (all when None)."""
    kept = torch.zeros(width, dtype=torch.bool)
    kept[positions if positions is not None else slice(None)] = True
    if not kept.any():
        raise LinrecError(f"positions {positions} keep no position of a {width}-token window")
    return kept[None]


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
    options: CaptureOptions | None = None,
    *,
    stop: bool = True,
) -> PositionMoments:
    """Per-block, per-fold moments of one pass over ``batches`` (returned on CPU, or on the GPU with
    ``options.keep_on_gpu``), the rows at each window's first captured position apart from the later ones
    (:class:`linrec.core.moment_sink.MomentSink`), with each block's largest rows (:class:`linrec.core.tails.TailSink`),
    run as ``options`` say (:class:`CaptureOptions`, None: its defaults; with ``spill``, memory holds only the live
    fold of every block: for models whose moments would not fit). ``stop``: as in :func:`run_capture`.

    Under ``torch.distributed`` (e.g. ``torchrun``), each rank takes every world-th sequence and
    the moments are all-reduced, so every rank returns the moments of the whole set.
    """
    require_eval(model, "the captured activations")  # before any other work
    options = options or CaptureOptions()
    folds, seed, spec, progress = options.folds, options.seed, options.spec, options.progress
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
    full_output = OUTPUT_COVARIANCE in options.extras
    sink = MomentSink(folds, spill=options.spill, keep_on_gpu=options.keep_on_gpu, full_output=full_output,
                      products=options.products)  # fmt: skip
    tails = TailSink()
    residual = residual_sink(model, chosen, folds, spec, seed) if SCORES in options.extras else None
    sinks = [sink, tails, *([] if residual is None else [residual]), *options.extra_sinks]
    run_capture(model, batches, chosen, sinks, fold_of_sequence, progress, options.positions, stop)
    silent = sorted({b.index for b in chosen} - set(sink.accumulators))
    if silent:
        raise LinrecError(
            f"blocks {silent} got no rows: their modules never ran in the forward pass. Check the spec's module names "
            "(each block's input and output modules must be called by the model's forward)"
        )
    split = sink.positions()
    scores = {} if residual is None else residual.scores(progress)  # (a bar over the layer linearity's fits)
    if distributed:
        return PositionMoments(
            all_reduce_moments(dict(split.first)), all_reduce_moments(dict(split.later)), tails.tails(), scores
        )
    return replace(split, tails=tails.tails(), scores=scores)


def residual_sink(model: nn.Module, blocks: list[BlockSpec], folds: int, spec: Spec, seed: int) -> ResidualSink | None:
    """The sink of the residual-stream scores (:class:`linrec.core.scores.ResidualSink`), or None where the library
    cannot see the stream (blocks named by hand, an architecture that normalises after the add): the scores are then
    unknown, and the capture otherwise the same."""
    try:
        return ResidualSink(model, blocks, folds, spec, seed=seed)
    except LinrecError:
        return None


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
    extras: str | Iterable[str] | None = None,
) -> BlockMoments:
    """Per-block, per-fold moments of every row of one pass over ``batches`` (:func:`capture_positions`, its two
    parts merged); the options are :class:`CaptureOptions`' (``extras`` as :func:`linrec.core.extras.parse_extras`
    reads them: ``"output-covariance"`` for the whole Cyy; the scores are not kept here)."""
    options = CaptureOptions(folds, seed, spec, progress, positions, extra_sinks=extra_sinks,
                             extras=parse_extras(extras) - {SCORES})  # fmt: skip
    return capture_positions(model, batches, blocks, options).merge()


def capture_with_sample(
    model: nn.Module,
    batches: TokenBatches,
    sample_rows: int,
    blocks: Sequence[int] | None = None,
    folds: int = 5,
    seed: int = 0,
    spec: Spec = None,
    progress: bool = True,
    extras: str | Iterable[str] | None = None,
) -> tuple[BlockMoments, RowSample]:
    """One pass: the per-fold moments of every row (``extras`` as for :func:`capture_moments`), and a ``sample_rows``
    sample of rows per block."""
    sample = RowSample(sample_rows, seed)
    moments = capture_moments(model, batches, blocks, folds, seed, spec, extra_sinks=[sample], progress=progress,
                              extras=extras)  # fmt: skip
    return moments, sample
