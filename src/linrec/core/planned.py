"""A capture run by its plan: the groups of :mod:`linrec.core.plan` one after the other, each resumed from the
residual stream the previous one stopped at (:mod:`linrec.core.resume`).

Each group is one capture of its blocks (:func:`linrec.core.capture.capture_positions`) over the same batches, in
the same order, with the same fold of every row; the layers below it hand on the stream the group before kept, bit
for bit what they would compute. So every block's moments are those of one pass over every block, to the last bit:
a block's sums depend only on its own rows, in their order.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from linrec.core.capture import CaptureOptions, capture_positions, input_device
from linrec.core.moment_files import SpilledMoments
from linrec.core.moment_sink import joined_firsts, trim_heap
from linrec.core.moments import Moments, PositionMoments
from linrec.core.plan import (
    CapturePlan,
    config_weights_bytes,
    device_free,
    footprint,
    gigabytes,
    plan_capture,
    rerun_passes,
    weights_bytes,
)
from linrec.core.resume import decoder_layers, recording, skipping
from linrec.core.scores import StreamScores
from linrec.core.tails import Tails
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError, LinrecWarning
from linrec.models.arch import Spec, ffn_blocks, select_blocks

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def plan_for(
    model: nn.Module,
    batches: TokenBatches,
    blocks: Sequence[int] | None,
    folds: int,
    spec: Spec = None,
    memory: int | None = None,
    saved: bool = False,
    table: bool = False,
    extras: frozenset[str] = frozenset(),
) -> CapturePlan | None:
    """The plan of capturing ``blocks`` (all by default) of the loaded ``model`` over ``batches`` within ``memory``
    bytes (None: what is free on the host and on the GPU that accumulates) with ``extras`` (:mod:`linrec.core.extras`);
    None for a model without a transformers config to size it by (one pass over every block, unplanned). ``saved``,
    ``table``: as for :func:`linrec.core.plan.plan_capture`."""
    config = getattr(model, "config", None)
    if not getattr(config, "hidden_size", None):
        return None
    every = ffn_blocks(model, spec)
    chosen = sorted(b.index for b in select_blocks(every, blocks))
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    resumes = decoder_layers(model, every) is not None
    return _plan(config, batches, chosen, folds, dtype, input_device(model), weights_bytes(model), memory, resumes,
                 saved, table, extras)  # fmt: skip


def plan_before_loading(
    config: PretrainedConfig,
    batches: TokenBatches,
    blocks: Sequence[int] | None,
    folds: int,
    dtype: torch.dtype,
    device: torch.device,
    memory: int | None = None,
    saved: bool = False,
    table: bool = False,
    extras: frozenset[str] = frozenset(),
) -> CapturePlan:
    """:func:`plan_for` from ``config`` alone, before any weights load (their bytes counted on a model built on the
    meta device, all on ``device``), for an architecture :func:`linrec.models.arch.ffn_blocks` knows: a budget that
    cannot work is refused before the loading."""
    chosen = list(range(config.num_hidden_layers)) if blocks is None else sorted(blocks)
    weight = config_weights_bytes(config, dtype)
    weights = (0, weight) if device.type == "cuda" else (weight, 0)
    return _plan(config, batches, chosen, folds, dtype, device, weights, memory, True, saved, table, extras)


def _plan(
    config: object,
    batches: TokenBatches,
    chosen: list[int],
    folds: int,
    dtype: torch.dtype,
    device: torch.device,
    weights: tuple[int, int],
    memory: int | None,
    resumes: bool,
    saved: bool,
    table: bool,
    extras: frozenset[str],
) -> CapturePlan:
    """The plan of :func:`plan_for` and :func:`plan_before_loading`, from what both know."""
    windows, seq_len = batches.attention_mask.shape
    sizes = {"windows": windows, "seq_len": seq_len, "batch_size": batches.batch_size}
    fp = footprint(config, blocks=len(chosen), folds=folds, **sizes, dtype=dtype, on_gpu=device.type == "cuda",
                   weights=weights, extras=extras)  # fmt: skip
    return plan_capture(
        fp, chosen, memory, resumes=resumes, saved=saved, table=table, device_budget=device_free(device)
    )


def announce(plan: CapturePlan, progress: bool) -> None:
    """Say what a plan of several groups will do before it starts (on stderr, with progress)."""
    if len(plan.groups) > 1 and progress:
        print(plan.describe(), file=sys.stderr)


def _warn_of_passes(plan: CapturePlan, layers: int) -> None:
    """Warn, before the work, that groups which cannot resume multiply the forward work."""
    warnings.warn(
        f"the capture runs in {len(plan.groups)} groups, each from the model's input (its decoder layers cannot "
        f"be found, so no group resumes from the previous one): {rerun_passes(plan.groups, layers):.1f} forward "
        "passes in all. "
        "A larger memory budget (--memory) needs fewer.",
        LinrecWarning,
        stacklevel=4,
    )


def capture_groups(
    model: nn.Module, batches: TokenBatches, plan: CapturePlan, options: CaptureOptions
) -> Iterator[PositionMoments]:
    """Each group of ``plan`` captured in turn (its :class:`PositionMoments`: on CPU, or the later rows' on the GPU
    with ``options.keep_on_gpu``), the next group started only
    when the caller asks for it: what the caller keeps of one group is all that stays of it. ``options``' extra sinks
    see every group's rows (each group is a capture of its own: :meth:`RowSink.start` is called once per group); with
    ``spill``, each group's finished folds wait there (:func:`linrec.core.capture.capture_positions`)."""
    every = ffn_blocks(model, options.spec)
    layers = decoder_layers(model, every) if plan.resumes else None
    if layers is None and len(plan.groups) > 1:
        _warn_of_passes(plan, len(every))
    kept: list[Any] = []  # the output of layer `below - 1` for every forward call
    below = 0
    for i, group in enumerate(plan.groups):
        last = i == len(plan.groups) - 1
        recorded: list[Any] = []
        with ExitStack() as stack:
            if layers is not None and below:
                stack.enter_context(skipping(layers[:below], kept))
            if layers is not None and not last:
                stack.enter_context(recording(layers[group[-1]], recorded))
            split = capture_positions(model, batches, list(group), options, stop=layers is None or last)
        if layers is not None and not last:
            if torch.cuda.is_available():
                torch.cuda.synchronize()  # the stream's pinned copies have landed
            kept, below = recorded, group[-1] + 1
        yield split


def capture_to_disk(
    model: nn.Module, batches: TokenBatches, plan: CapturePlan, options: CaptureOptions
) -> PositionMoments:
    """The moments of a capture run by ``plan``'s groups, each group's later rows' moments put on disk under
    ``options.spill`` (the system's temporary directory when None) as it ends; the first rows, one per window, stay
    in memory. The disk's room is checked first (:func:`check_disk`)."""
    import tempfile

    where = Path(options.spill) if options.spill is not None else Path(tempfile.gettempdir())
    check_disk(where, plan.disk)
    announce(plan, options.progress)
    store = SpilledMoments(where, options.folds)
    firsts: list[Mapping[int, list[Moments]]] = []
    tails: dict[int, Tails] = {}
    scores: dict[int, StreamScores] = {}
    for part in capture_groups(model, batches, plan, replace(options, spill=None)):
        for block in sorted(part.later):
            for fold, moments in enumerate(part.later[block]):
                store.put(block, fold, moments)
        firsts.append(part.first)
        tails.update(part.tails)
        scores.update(part.scores)
        del part
        trim_heap()
    return PositionMoments(joined_firsts(firsts), store, tails, scores)


def check_disk(where: Path, needed: int) -> None:
    """Refuse, before the work, to spill ``needed`` bytes under ``where`` when its disk has less room free."""
    import shutil

    if not needed:
        return
    probe = where
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < needed:
        raise LinrecError(
            f"the plan writes {gigabytes(needed)} of moments under {where}, whose disk has {gigabytes(free)} free: "
            "give a directory on a larger disk (--spill DIR) or measure fewer blocks (--blocks)"
        )
