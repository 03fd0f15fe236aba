"""The capture's sink of the residual-stream scores (:mod:`linrec.core.scores` says what each is and whose it is).

Its hooks see each block's decoder layer input, what the layer adds to its residual stream for the FFN, and the
layer's output, on the capture's own rows (:meth:`linrec.core.rows.RowSink.hooks`); sums are float64 on the rows'
device, read once at the end, and the layer-linearity sample is fitted then, on that device (a GPU's float64
solvers: six fits of width² per block, each a Cholesky solve where that provably gives the eigendecomposition's map
(:mod:`linrec.core.solve`), else an eigendecomposition; minutes on a host for a 7B model), and let go.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from linrec.core import plan
from linrec.core.fit import fit_affine, held_out, held_out_r2, leave_one_out, rcond_for
from linrec.core.moments import merge_folds
from linrec.core.rows import BatchRows, RowSink
from linrec.core.sample import RowSample
from linrec.core.scores import StreamScores
from linrec.models.arch import BlockSpec, Spec, residual_sites
from linrec.progress import progress_bar

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle


def _angle(cos: torch.Tensor) -> torch.Tensor:
    return torch.arccos(cos.clamp(-1, 1)) / math.pi


EPS = 1e-8
"""The smallest norm a cosine divides by, as ``torch.nn.functional.cosine_similarity``'s: a zero row scores 0."""


def _cosine(uv: torch.Tensor, uu: torch.Tensor, vv: torch.Tensor) -> torch.Tensor:
    """Each row's cosine from its float64 products u·v, u·u and v·v."""
    return uv / (uu.sqrt().clamp_min(EPS) * vv.sqrt().clamp_min(EPS))


def stream_sums(
    entering: torch.Tensor, added: torch.Tensor, leaving: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch's float64 sums of the scores from its rows (n, d) of the stream entering a layer (h), what its FFN
    adds (a) and the stream leaving (o): (Σ cos(h, o), Σ angle(h, o), the same of b = o − a and o, Σ‖a‖², Σ‖b‖²), and
    Σ a. Five products per row, h·h, o·o, a·a, h·o and a·o, summed in float64; b enters only through them
    (b·o = o·o − a·o, b·b = o·o − 2 a·o + a·a). Rows of 16 bits (a bfloat16 or float16 model's) are multiplied element
    by element in float32, where their products (at most 22 bits) are exact, so none is cast to float64; wider rows
    are cast to float64 (float32 products would move a near-identity layer's 1 − cos by 1e-4 of itself)."""
    work = torch.float32 if leaving.dtype in (torch.bfloat16, torch.float16) else torch.float64
    h, a, out = (t.detach().to(work) for t in (entering, added, leaving))
    dot = lambda u, v: (u * v).sum(1, dtype=torch.float64)  # noqa: E731
    hh, oo, aa, ho, ao = dot(h, h), dot(out, out), dot(a, a), dot(h, out), dot(a, out)
    bb = (oo - 2 * ao + aa).clamp_min(0)  # (a stream that all but vanishes before the FFN: rounding, never below 0)
    layer, ffn = _cosine(ho, hh, oo), _cosine(oo - ao, bb, oo)
    sums = torch.stack([layer.sum(), _angle(layer).sum(), ffn.sum(), _angle(ffn).sum(), aa.sum(), bb.sum()])
    return sums, a.sum(0, dtype=torch.float64)


class ResidualSink(RowSink):
    """Capture sink of the residual-stream scores (module docstring) of ``blocks`` of ``model``: its hooks see each
    decoder layer's input, what the layer adds for the FFN, and its output, on the capture's rows.

    Needs the layout of :func:`linrec.models.arch.residual_sites` (a LinrecError saying why where there is none).
    ``folds``: the capture's, for the layer linearity held out; ``sample_rows``: its sample's rows per block (None:
    :func:`linrec.core.plan.sample_rows`, which the capture's plan counts); ``seed``: the sample's."""

    def __init__(
        self, model: nn.Module, blocks: list[BlockSpec], folds: int, spec: Spec = None, sample_rows: int | None = None,
        seed: int = 0,
    ) -> None:  # fmt: skip
        self.sites = residual_sites(model, [b.index for b in blocks], spec)
        width = int(getattr(model, "config").hidden_size)  # noqa: B009 (a PreTrainedModel's config: typed as Any)
        self.folds = folds
        self.sample = RowSample(sample_rows or plan.sample_rows(width), seed)
        self.sums: dict[int, torch.Tensor] = {}  # per block, float64 on the rows' device: Σ cos and Σ angle of the
        # layer, the same of the FFN sublayer, Σ‖a‖², Σ‖h' − a‖²
        self.added: dict[int, torch.Tensor] = {}  # per block: Σ a, float64
        self.rows: dict[int, int] = {}
        self.dtype: torch.dtype | None = None

    def start(self, rows_per_block: int) -> None:
        self.sample.start(rows_per_block)

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        """The FFN's own rows are not needed: the hooks read the stream."""

    def reaches(self, block: BlockSpec) -> str:
        """The module a forward must reach for ``block``'s scores: its decoder layer, whose output is the stream."""
        return self.sites[block.index][0]

    def hooks(
        self, model: nn.Module, blocks: list[BlockSpec], kept: Callable[[torch.Tensor], tuple[torch.Tensor, BatchRows]]
    ) -> list[RemovableHandle]:
        """Hooks on each block's decoder layer (its input; its output, ahead of any hook already there, such as a
        planned capture's :func:`linrec.core.resume.recording`) and on the module whose output it adds."""
        modules = dict(model.named_modules())
        pending: dict[int, dict[str, torch.Tensor]] = {}
        handles = []
        for b in blocks:
            layer, added = self.sites[b.index]

            def enter(_m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], i: int = b.index) -> None:
                stream = args[0] if args else kwargs["hidden_states"]
                pending[i] = {"entering": kept(stream)[0]}

            def add(_m: nn.Module, _args: tuple[Any, ...], output: Any, i: int = b.index) -> None:
                pending[i]["added"] = kept(output[0] if isinstance(output, tuple) else output)[0]

            def leave(_m: nn.Module, _args: tuple[Any, ...], output: Any, i: int = b.index) -> None:
                leaving, rows = kept(output[0] if isinstance(output, tuple) else output)
                seen = pending.pop(i)
                if rows.n:
                    self._add(i, seen["entering"], seen["added"], leaving, rows)

            handles.append(modules[layer].register_forward_pre_hook(enter, with_kwargs=True))
            handles.append(modules[added].register_forward_hook(add))
            handles.append(modules[layer].register_forward_hook(leave, prepend=True))
        return handles

    def _add(
        self, block: int, entering: torch.Tensor, added: torch.Tensor, leaving: torch.Tensor, rows: BatchRows
    ) -> None:
        """One batch's rows of ``block``: the stream entering its layer, what the FFN adds, the stream leaving."""
        self.dtype = self.dtype or leaving.dtype
        sums, added_sum = stream_sums(entering, added, leaving)
        if block in self.sums:
            self.sums[block] += sums
            self.added[block] += added_sum
        else:
            self.sums[block], self.added[block] = sums, added_sum
        self.rows[block] = self.rows.get(block, 0) + rows.n
        self.sample.add(block, entering, leaving, rows)

    def finish(self) -> None:
        self.sample.finish()

    def scores(self, progress: bool = False) -> dict[int, StreamScores]:
        """Each block's :class:`StreamScores` (its sums read from the device once for every block; its sample fitted
        and let go, with ``progress`` a bar over the blocks: a 7B block's fits take minutes on a host); under
        ``torch.distributed`` the sums are every rank's (a collective: every rank calls it), the layer linearity each
        rank's own sample's."""
        distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        blocks = sorted(self.sums)
        device = self.sums[blocks[0]].device if blocks else torch.device("cpu")
        values = []
        for block in blocks:
            sums, added = self.sums.pop(block), self.added.pop(block)
            n = torch.tensor(float(self.rows[block]), dtype=torch.float64, device=sums.device)
            if distributed:
                for t in (sums, added, n):
                    dist.all_reduce(t)
            energy = torch.stack([sums[4], sums[4] - added.pow(2).sum() / n]) / sums[5]  # of a, and about its mean
            values.append(torch.cat([n[None], sums[:4] / n, energy]).cpu())
        out = {}
        rows = zip(blocks, torch.stack(values).tolist() if values else [], strict=True)
        fits = progress_bar(rows, total=len(blocks), desc="layer linearity", unit="block", disable=not progress)
        for block, (n, layer_cos, layer_angle, ffn_cos, ffn_angle, energy, spread) in fits:
            held, in_sample, sampled = self._linearity(block, device)
            out[block] = StreamScores(
                rows=int(n),
                block_influence=1 - layer_cos,
                angular_distance=layer_angle,
                ffn_block_influence=1 - ffn_cos,
                ffn_angular_distance=ffn_angle,
                output_energy=energy,
                output_spread=spread,
                layer_linearity=held,
                layer_linearity_in_sample=in_sample,
                sample_rows=sampled,
            )
        return out

    def _linearity(self, block: int, device: torch.device) -> tuple[float, float, int]:
        """(held-out, in-sample layer linearity, rows) of ``block``'s sample, fitted on ``device``; NaN held out where
        a fold's training rows are too few for the width."""
        folds = self.sample.take(block).to(device).fold_moments(self.folds)
        rcond = rcond_for(self.dtype or torch.float32)
        held = None if any(m.n == 0 for m in folds) else held_out_r2(folds, leave_one_out(self.folds), rcond)
        total = merge_folds(folds)
        in_sample = held_out(fit_affine(total, rcond, condition=False), total).r2
        return (math.nan if held is None else float(np.mean(held))), in_sample, total.n
