"""Separating inputs from weights: is a block's R²_lin set by its weights or by the inputs it sees?

Two experiments answer the review's objection that each model's profile is measured on its
own activations:

* Cross-feeding (:func:`crossfeed`, :func:`crossfeed_grid`): block j of model B is run on the
  inputs captured at block i of model A (same width), Y' = FFN_B(X'), and R²_lin of (X', Y') is
  measured with the core's k-fold recovery, on the folds the rows came with; the grid does it for
  every pair of blocks of the given models. A's inputs carry A's norm gain and bias, so by default
  they are first moved into B's norm coordinates (:func:`align_inputs`): the normalised features
  z = (x - β_A) / γ_A (β = 0 for RMSNorm) are put on B's norm surface (centred when B's norm is a
  LayerNorm, at the length B's own rows have) and mapped out as γ_B ⊙ z + β_B, the row B's norm would
  have produced from the same features; B's FFN then sees inputs on its own manifold and only the
  features differ.
* Input normalisation (:func:`normalised_table`): each block is run on its own inputs
  standardised (every dimension to a common variance) or whitened (every non-null direction
  to a common variance) and R²_lin of (Z, FFN(Z)) is measured the same way.

Normalisation keeps each block's input mean and, by default, its average variance
tr(Σ)/d, so the FFN stays in its operating range and only the *shape* of the input
distribution changes; pass ``variance=`` for one common scale across blocks and models. The
statistics come from all sampled rows of the block: they define the input distribution (they
never see Y), and the k-fold split then fits and scores on it as usual.

Both normalisations keep the raw null direction at the mean (:mod:`linrec.core.normalise`), and the
normalised rows are then put back on the block's norm surface (:class:`~linrec.core.normalise.NormManifold`:
the LayerNorm hyperplane and sphere, or the RMSNorm sphere), so the FFN is fed rows its norm could produce.

Rows come from a row sample (a :class:`~linrec.core.sample.RowSample` or a mapping block -> Rows), so these R² are
on the sampled rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from linrec.core.fit import DEFAULT_RCOND, BlockReport, kfold
from linrec.core.moments import Moments
from linrec.core.normalise import NormManifold, input_transform
from linrec.core.sample import Rows, Samples, sample_rows
from linrec.errors import LinrecError
from linrec.interventions.surgery import ffn_site
from linrec.models.arch import Spec, ffn_norm, ffn_norm_gain
from linrec.progress import progress_bar


def _module_dtype(module: nn.Module) -> tuple[torch.device, torch.dtype]:
    for t in module.parameters():
        return t.device, t.dtype
    return torch.device("cpu"), torch.float32


def feed(ffn: nn.Module, x: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """FFN outputs for rows ``x`` (n, d), run in the module's dtype and device; returned float32 on CPU."""
    device, dtype = _module_dtype(ffn)
    outs = []
    with torch.no_grad():
        for start in range(0, x.shape[0], chunk):
            part = x[start : start + chunk].to(device=device, dtype=dtype)
            try:
                y = ffn(part[None])  # a (1, n, d) "batch", as the model calls it
            except RuntimeError as err:
                raise LinrecError(
                    f"the FFN cannot take rows of width {x.shape[1]} ({err}); "
                    f"cross-feeding needs models of the same width"
                ) from err
            y = y[0] if isinstance(y, tuple) else y
            outs.append(y[0].to("cpu", torch.float32))
    return torch.cat(outs)


def norm_manifold(model: nn.Module, block: int, x: torch.Tensor) -> NormManifold:
    """The surface of the norm FFN block ``block`` reads (from the architecture): its gain γ (1 + weight for Gemma's
    RMSNorm), its bias β (zeros for RMSNorm or a norm without one), whether it centres (``nn.LayerNorm``) or not
    (an RMSNorm), and the length of ``x``, the rows it produced (the block's captured inputs)."""
    norm, gain = ffn_norm(model, block), ffn_norm_gain(model, block)
    bias = getattr(norm, "bias", None)
    if gain is None:
        raise LinrecError(f"block {block}'s norm ({type(norm).__name__}) has no gain to align by; pass align=False")
    if not isinstance(norm, nn.LayerNorm) and not type(norm).__name__.endswith("RMSNorm"):
        raise LinrecError(f"block {block}'s norm ({type(norm).__name__}) is neither a LayerNorm nor an RMSNorm")
    gain = gain.to("cpu", torch.float64)
    shift = torch.zeros_like(gain) if bias is None else bias.detach().to("cpu", torch.float64)
    return NormManifold.of_rows(x, gain, shift, isinstance(norm, nn.LayerNorm))


def align_inputs(x: torch.Tensor, source: NormManifold, target: NormManifold) -> torch.Tensor:
    """Rows of ``source``'s norm re-expressed as ``target``'s norm would have produced them from the same
    normalised features, in float64: z = (x - β_A)/γ_A placed on the target surface (centred if it is a
    LayerNorm, at its length), then γ_B ⊙ z + β_B (a feature with γ_A = 0 carries nothing)."""
    if not source.gain.shape == target.gain.shape == x.shape[1:]:
        raise LinrecError(
            f"cannot align rows of width {x.shape[1]} from a norm of width {source.gain.shape[0]} to one of width "
            f"{target.gain.shape[0]}; cross-feeding needs models of the same width"
        )
    return target.place(source.features(x))


def _recover(block: int, rows: Rows, y: torch.Tensor, folds: int, rcond: float) -> BlockReport:
    return kfold(block, Rows(rows.x, y, rows.fold).fold_moments(folds), rcond)


def crossfeed(rows: Rows, ffn: nn.Module, folds: int, block: int = 0, rcond: float = DEFAULT_RCOND) -> BlockReport:
    """k-fold R²_lin of ``ffn`` run on ``rows.x`` (another block's captured inputs), on their folds."""
    return _recover(block, rows, feed(ffn, rows.x), folds, rcond)


def crossfeed_grid(
    samples: Mapping[str, Mapping[int, Rows]],
    models: Mapping[str, nn.Module],
    folds: int,
    blocks: Sequence[int] | None = None,
    rcond: float = DEFAULT_RCOND,
    progress: bool = False,
    align: bool = True,
) -> pd.DataFrame:
    """k-fold R²_lin of every block's FFN on every block's captured inputs (every model of ``samples``).

    ``samples[m]`` are model m's sampled rows per block (``Measurement.samples``) and ``models[m]``
    the model itself; all must share one width. ``blocks``: which blocks of each model take part
    (default: all sampled). A cell with the same model and block is the block on its own inputs.
    ``align``: move each input into the receiving block's norm coordinates first (:func:`align_inputs`;
    needs an architecture whose norms are known, :func:`linrec.models.arch.ffn_norm`).
    Columns: ``input_model, input_block, weight_model, weight_block, r2_lin, r2_lin_std, aligned``.
    """
    missing = sorted(set(samples) - set(models))
    if missing:
        raise LinrecError(f"no model given for {missing}; pass every model whose inputs are in the grid")
    for m in samples:
        absent = sorted(set(blocks or ()) - set(samples[m]))
        if absent:
            raise LinrecError(f"model '{m}' has no sampled rows for blocks {absent}; it has {sorted(samples[m])}")
    inputs = [(m, b) for m in samples for b in sorted(samples[m]) if blocks is None or b in blocks]
    norms = {(m, b): norm_manifold(models[m], b, samples[m][b].x) for m, b in inputs} if align else {}
    rows = []
    bar = progress_bar(total=len(inputs) ** 2, desc="cross-feeding", disable=not progress)
    for ma, i in inputs:
        fed = samples[ma][i]  # read once per input block (a measurement's samples come from disk)
        for mb, j in inputs:
            moved = align and (ma, i) != (mb, j)
            x = align_inputs(fed.x, norms[(ma, i)], norms[(mb, j)]).float() if moved else fed.x
            report = crossfeed(Rows(x, fed.y, fed.fold), ffn_site(models[mb], j)[2], folds, j, rcond)
            bar.update()
            rows.append(
                {
                    "input_model": ma,
                    "input_block": i,
                    "weight_model": mb,
                    "weight_block": j,
                    "r2_lin": report.r2_lin,
                    "r2_lin_std": report.r2_lin_std,
                    "aligned": moved,
                }
            )
    bar.close()
    return pd.DataFrame(rows)


def normalised_inputs(
    model: nn.Module,
    block: int,
    rows: Rows,
    kind: str,
    variance: float | None = None,
    rcond: float = DEFAULT_RCOND,
    project: bool = True,
) -> tuple[torch.Tensor, int]:
    """Block ``block``'s sampled inputs standardised or whitened (``kind``;
    :func:`linrec.core.normalise.input_transform`) and, with ``project``, put back on its norm's surface
    (:func:`norm_manifold`); float32, with the number of null directions the transform kept null."""
    transform = input_transform(Moments.from_rows(rows.x, rows.y), kind, variance, rcond=rcond)
    z = transform(rows.x)
    if project:
        z = norm_manifold(model, block, rows.x).project(z)
    return z.to(torch.float32), transform.null_dims


def normalised_table(
    model: nn.Module,
    sample: Samples,
    kind: str,
    folds: int,
    blocks: Sequence[int] | None = None,
    variance: float | None = None,
    spec: Spec = None,
    rcond: float = DEFAULT_RCOND,
    project: bool = True,
) -> pd.DataFrame:
    """Per block: R²_lin on its own sampled inputs, and on them standardised or whitened (``kind``).

    ``project``: put the normalised rows back on each block's norm surface (:func:`normalised_inputs`; the
    norms are read from the architecture, so a model given by ``spec`` needs ``project=False``).
    Columns: ``block, r2_lin`` (own inputs, captured outputs), ``r2_lin_norm, r2_lin_norm_std``
    (normalised inputs pushed through the same FFN), ``normalisation, null_dims``.
    """
    if project and spec is not None:
        raise LinrecError("the norms of blocks named by spec are unknown; pass project=False")
    out = []
    for b, rows in sample_rows(sample, blocks).items():
        z, null_dims = normalised_inputs(model, b, rows, kind, variance, rcond, project)
        normed = _recover(b, Rows(z, rows.y, rows.fold), feed(ffn_site(model, b, spec)[2], z), folds, rcond)
        own = kfold(b, rows.fold_moments(folds), rcond)
        out.append(
            {
                "block": b,
                "r2_lin": own.r2_lin,
                "r2_lin_norm": normed.r2_lin,
                "r2_lin_norm_std": normed.r2_lin_std,
                "normalisation": kind,
                "null_dims": null_dims,
            }
        )
    return pd.DataFrame(out)


def spread_blocks(depth: int, count: int | None) -> list[int] | None:
    """``count`` block indices spread evenly over ``depth`` blocks, first and last included (fewer where rounding
    merges two); None (every block, as :func:`crossfeed_grid` reads it) when ``count`` is None."""
    if count is None:
        return None
    import numpy as np

    return sorted({round(x) for x in np.linspace(0, depth - 1, count)})
