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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from linrec.core.capture import CaptureOptions, capture_positions, input_device
from linrec.core.moment_files import SpilledMoments
from linrec.core.moment_sink import joined_firsts, trim_heap
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.core.pinned import every_gpu_done
from linrec.core.plan import (
    CapturePlan,
    config_weights_bytes,
    device_free,
    footprint,
    gigabytes,
    group_span,
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
from linrec.progress import busy_hint, duration

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


def announce(plan: CapturePlan, progress: bool, work: Estimate | None = None) -> None:
    """Say before the work starts (on stderr, with progress) what a plan of several groups will do, and what the work
    should take (``work``: :func:`estimate`)."""
    if len(plan.groups) > 1 and progress:
        print(plan.describe(), file=sys.stderr)
    if work is not None and progress:
        print(work.describe(), file=sys.stderr)


TIMED_WIDTH = 512
"""The widest block table an estimate times (:func:`estimate`): a wider block's fits are scaled from it by the cube of
the widths, as eigendecompositions grow, so that the timing takes a fraction of a second for any model."""


OTHER_WORK = 1.0
"""The forward's work besides its products (norms, activations, softmax, the hooks' copies), as a multiple of the
products' time at the speed one of them runs alone: 0.9 for smollm2-135m and 0.8 for gemma3-270m, measured on one
CPU thread (4,096 rows; their table's fits were estimated at 20 s and took 16 s)."""


@dataclass(frozen=True)
class Estimate:
    """Seconds a plan's work should take on this machine, by stage (:func:`estimate`)."""

    capture: float  # the forward passes and the float64 sums
    linearity: float  # the layer-linearity fits at the capture's end (0 without the residual-stream scores)
    fits: float  # the table's fits, every block

    def describe(self, what: str = "estimate") -> str:
        """``what``, then the time in one line, and a second where the machine is busy
        (:func:`linrec.progress.busy_hint`)."""
        parts = [("capture", self.capture), ("layer linearity", self.linearity), ("fits", self.fits)]
        each = ", ".join(f"{name} {duration(s)}" for name, s in parts if s)
        line = f"{what}: about {duration(sum(s for _, s in parts))} ({each}), at the speed of products timed now"
        hint = busy_hint()
        return line if hint is None else f"{line}\n  {hint}"


def estimate(
    config: object,
    batches: TokenBatches,
    plan: CapturePlan,
    dtype: torch.dtype,
    device: torch.device,
    fits_on: torch.device | None = None,
) -> Estimate:
    """What ``plan``'s work over ``batches`` should take on ``device`` (the fits on ``fits_on``, by default there too)
    with the model of ``config`` at ``dtype``: the plan's arithmetic at the speed of products timed now, one of each
    kind (a fraction of a second). The capture: the forward's products (its layers' weights and the attention over the
    window, for every token of each layer the plan runs) at the speed of one of the FFN's, and the float64 sums of
    each block (XᵀX, XᵀY and YᵀY's diagonal or whole) at the speed of one of them, the forward's other work (norms,
    activations, the hooks) counted as :data:`OTHER_WORK` times its products. The fits and the layer linearity: one
    block's, timed on moments of random rows at its width (at most :data:`TIMED_WIDTH`, then scaled), times the
    blocks."""
    from linrec.core.cost import seconds

    fp = plan.footprint
    width, windows, seq_len = fp.width, *batches.attention_mask.shape
    wide = int(getattr(config, "intermediate_size", 0) or getattr(config, "n_inner", 0) or 4 * width)
    rows = min(batches.batch_size * seq_len, 1024)  # a batch's rows, or enough of them to run at full speed

    def speed(a: torch.Tensor, b: torch.Tensor) -> float:
        """Flops per second of ``a @ b`` here: the best of three after one to warm up."""
        a @ b
        return 2 * a.shape[0] * a.shape[1] * b.shape[1] / min(seconds(lambda: a @ b, device) for _ in range(3))

    def drawn(*shape: int, at: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float64, device=device).to(at)

    forward_speed = speed(drawn(rows, min(width, 2048), at=dtype), drawn(min(width, 2048), min(wide, 4096), at=dtype))
    sums_speed = speed(drawn(min(width, 2048), rows), drawn(rows, min(width, 2048)))
    layer = _layer_weights(config, fp.weights_host + fp.weights_device, dtype, width, wide)
    forward = windows * seq_len * plan.forward_passes * fp.layers * 2 * (layer + 2 * seq_len * width)
    sums = int(batches.attention_mask.sum()) * fp.blocks * (4 if fp.full_output else 3) * width**2
    timed = min(width, TIMED_WIDTH)
    table, linearity = _block_fits(timed, fp.folds, fits_on or device)
    scale = fp.blocks * (width / timed) ** 3
    return Estimate(
        capture=(1 + OTHER_WORK) * forward / forward_speed + sums / sums_speed,
        linearity=linearity * scale if fp.sample else 0.0,
        fits=table * scale,
    )


def _layer_weights(config: object, weight_bytes: int, dtype: torch.dtype, width: int, wide: int) -> float:
    """The weights of one decoder layer of ``config``'s model: all of them (``weight_bytes`` at ``dtype``) less the
    token embeddings (twice where the head has its own), per layer; where that cannot be read, an attention's four
    width² matrices and a gated FFN's three."""
    layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or 1)
    heads = 1 if getattr(config, "tie_word_embeddings", True) else 2
    embeddings = heads * int(getattr(config, "vocab_size", 0) or 0) * width
    per_layer = (weight_bytes / dtype.itemsize - embeddings) / layers
    return per_layer if per_layer > 0 else 4 * width**2 + 3 * width * wide


def _block_fits(width: int, folds: int, device: torch.device) -> tuple[float, float]:
    """Seconds of one block's table (:func:`linrec.core.fit.recoverability`, the first position kept apart as a
    capture keeps it) and of its layer-linearity fits (:class:`linrec.core.residual.ResidualSink`'s: the held-out
    fits and one on every row), on moments of random rows of ``width`` in ``folds`` folds on ``device``."""
    from linrec.core.cost import seconds
    from linrec.core.fit import DEFAULT_RCOND, fit_affine, held_out_r2, leave_one_out, recoverability

    generator = torch.Generator(device=device).manual_seed(0)
    mix = torch.randn(width, width, dtype=torch.float64, device=device, generator=generator)

    def fold(n: int) -> Moments:
        x = torch.randn(n, width, dtype=torch.float64, device=device, generator=generator)
        return Moments.from_rows(x, torch.tanh(x @ mix))

    first, later = [fold(8) for _ in range(folds)], [fold(2 * width + 2) for _ in range(folds)]

    def linearity() -> None:
        held_out_r2(later, leave_one_out(folds), DEFAULT_RCOND)
        fit_affine(merge_folds(later), condition=False)

    table = seconds(lambda: recoverability(PositionMoments({0: first}, {0: later})), device)
    return table, seconds(linearity, device)


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
        if options.progress and len(plan.groups) > 1:  # each group's bars count its own blocks: say which they are
            blocks = f"block{'s' * (len(group) > 1)} {group_span(group)}"
            print(f"group {i + 1} of {len(plan.groups)}: {blocks}", file=sys.stderr)
        recorded: list[Any] = []
        with ExitStack() as stack:
            if layers is not None and below:
                stack.enter_context(skipping(layers[:below], kept))
            if layers is not None and not last:
                stack.enter_context(recording(layers[group[-1]], recorded))
            split = capture_positions(model, batches, list(group), options, stop=layers is None or last)
        if layers is not None and not last:
            every_gpu_done()  # the recorded stream's pinned copies have landed, on whichever GPUs the layers are
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
