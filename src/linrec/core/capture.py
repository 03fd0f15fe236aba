"""One frozen forward pass over token batches, streaming each FFN block's (X, Y) rows to sinks.

Hooks only observe (they return nothing, so no module output is replaced). Padding rows are
dropped, every row carries the fold of its sequence, and the forward is cut short right after
the deepest block asked for, so neither later layers nor the LM head run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from linrec.core.moments import BlockMoments, MomentAccumulator, all_reduce_moments
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.models.arch import BlockSpec, Spec, ffn_blocks, select_blocks

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class RowSink(Protocol):
    """Receives the rows of one block for one batch: x (n, d_in), y (n, d_out), fold (n,)."""

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, fold: torch.Tensor) -> None: ...


class _StopForward(Exception):
    """Raised by the hook of the deepest wanted block: nothing after it needs to run."""


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

    ``positions``: hand over only the rows at these positions of each window (column indices, e.g.
    ``slice(1, None)`` leaves out position 0). The mask is applied to what is captured, never to the
    forward pass: every token still attends to, and is computed from, the whole window.
    """
    if not blocks:
        raise LinrecError("no FFN blocks selected")
    require_eval(model, "the captured activations")
    modules = dict(model.named_modules())
    deepest = max(blocks, key=lambda b: b.index)
    pending: dict[int, torch.Tensor] = {}
    state: dict[str, torch.Tensor] = {}

    def make_pre_hook(block: BlockSpec) -> Callable[[nn.Module, tuple[Any, ...], dict[str, Any]], None]:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            pending[block.index] = _first_tensor(args, kwargs)

        return hook

    def make_hook(block: BlockSpec) -> Callable[[nn.Module, tuple[Any, ...], Any], None]:
        def hook(_module: nn.Module, _args: tuple[Any, ...], output: Any) -> None:
            y = output[0] if isinstance(output, tuple) else output
            x = pending.pop(block.index)
            keep = state["mask"].to(x.device)
            x = x.reshape(-1, x.shape[-1])[keep]
            y = y.reshape(-1, y.shape[-1])[keep.to(y.device)]
            if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
                raise LinrecError(
                    f"block {block.index}: NaN or Inf activations (batch of sequences "
                    f"{state['seq'].tolist()[:4]}...). {_non_finite_advice(y.dtype)}"
                )
            fold = state["fold"].to(x.device)
            for sink in sinks:
                sink.add(block.index, x, y, fold)
            if block is deepest:
                raise _StopForward

        return hook

    handles = []
    for b in blocks:
        handles.append(modules[b.input].register_forward_pre_hook(make_pre_hook(b), with_kwargs=True))
        handles.append(modules[b.output].register_forward_hook(make_hook(b)))
    device = input_device(model)
    extra = {"use_cache": False} if getattr(getattr(model, "config", None), "use_cache", None) is not None else {}
    columns = _columns(batches.seq_len, positions)
    bar = tqdm(total=batches.n_rows, unit="tok", desc="capture", disable=not progress)
    try:
        with torch.no_grad():
            for batch in batches.grouped(fold_of_sequence):
                mask = batch.attention_mask.bool() & columns
                state["mask"] = mask.reshape(-1)
                state["seq"] = batch.seq_index
                state["fold"] = fold_of_sequence[batch.seq_index][:, None].expand_as(mask).reshape(-1)[state["mask"]]
                try:
                    model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device), **extra)
                except _StopForward:
                    pass
                pending.clear()
                bar.update(int(mask.sum()))
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


class MomentSink:
    """Accumulates float64 moments per block and fold (on CPU when rows come from MPS, which lacks float64)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.accumulators: dict[int, list[MomentAccumulator]] = {}

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, fold: torch.Tensor) -> None:
        if x.device.type == "mps":
            x, y, fold = x.cpu(), y.cpu(), fold.cpu()
        if block not in self.accumulators:
            self.accumulators[block] = [MomentAccumulator(x.shape[1], y.shape[1], x.device) for _ in range(self.k)]
        per_fold = self.accumulators[block]
        for f in fold.unique().tolist():
            sel = fold == f
            per_fold[f].add(x[sel], y[sel])

    def moments(self) -> BlockMoments:
        """Centred moments per block and fold, on CPU."""
        return {b: [a.moments().to("cpu") for a in accs] for b, accs in self.accumulators.items()}


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
    raise LinrecError(
        f"{batches.n_rows} rows per block in {n_seq} sequences of {batches.seq_len} tokens are too few "
        f"for width {width} "
        f"with {folds} folds: folds are whole sequences, and every training split (all folds but one) needs "
        f"width + 1 = {width + 1} rows; {found}. Use at least {need // batches.seq_len} sequences: max_rows={need} "
        f"(--max-rows {need}), or fewer folds."
    )


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
    """Per-block, per-fold moments of one pass over ``batches`` (returned on CPU); ``positions``: only the rows at
    these window positions (:func:`run_capture`; the forward pass is unchanged).

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
    sink = MomentSink(folds)
    run_capture(model, batches, chosen, [sink, *extra_sinks], fold_of_sequence, progress, positions)
    moments = sink.moments()
    return all_reduce_moments(moments) if distributed else moments
