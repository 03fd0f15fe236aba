"""Separating inputs from weights: is a block's R²_lin set by its weights or by the inputs it sees?

Two experiments answer the review's objection that each model's profile is measured on its
own activations:

* Cross-feeding (:func:`crossfeed`, :func:`crossfeed_grid`): block j of model B is run on the
  inputs captured at block i of model A (same width), Y' = FFN_B(X_A), and R²_lin of
  (X_A, Y') is measured with the core's k-fold recovery, on the folds the rows came with;
  the grid does it for every pair of blocks of the given models.
* Input normalisation (:func:`normalised_table`): each block is run on its own inputs
  standardised (every dimension to a common variance) or whitened (every non-null direction
  to a common variance) and R²_lin of (Z, FFN(Z)) is measured the same way.

Normalisation keeps each block's input mean and, by default, its average variance
tr(Σ)/d, so the FFN stays in its operating range and only the *shape* of the input
distribution changes; pass ``variance=`` for one common scale across blocks and models. The
statistics come from all sampled rows of the block: they define the input distribution (they
never see Y), and the k-fold split then fits and scores on it as usual.

Whitening uses the same rank-revealing eigendecomposition of the correlation matrix as
``recover.fit_affine`` (same ``rcond``): directions it treats as null stay at the mean, the
others get identity covariance. The result is rotated back to the input basis
(Z = x̄ + (x - x̄) D⁻¹ V Λ^{-1/2} Vᵀ · √(n·variance), with D = diag(Cxx)^{1/2}, R = D⁻¹ Cxx D⁻¹
= V Λ Vᵀ over its non-null eigenvalues), so it can be fed to the FFN; its covariance is
``variance`` times the projector onto the non-null directions.

Rows come from a row sample (a :class:`~linrec.core.sample.RowSample` or a mapping block -> Rows), so these R² are
on the sampled rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from linrec.core.fit import DEFAULT_RCOND, BlockReport, kfold
from linrec.core.moments import Moments
from linrec.core.normalise import input_transform
from linrec.core.sample import Rows, Samples, sample_rows
from linrec.errors import LinrecError
from linrec.interventions.surgery import ffn_site
from linrec.models.arch import Spec


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
) -> pd.DataFrame:
    """k-fold R²_lin of every block's FFN on every block's captured inputs (every model of ``samples``).

    ``samples[m]`` are model m's sampled rows per block (``Measurement.samples``) and ``models[m]``
    the model itself; all must share one width. ``blocks``: which blocks of each model take part
    (default: all sampled). A cell with the same model and block is the block on its own inputs.
    Columns: ``input_model, input_block, weight_model, weight_block, r2_lin, r2_lin_std``.
    """
    missing = sorted(set(samples) - set(models))
    if missing:
        raise LinrecError(f"no model given for {missing}; pass every model whose inputs are in the grid")
    for m in samples:
        absent = sorted(set(blocks or ()) - set(samples[m]))
        if absent:
            raise LinrecError(f"model '{m}' has no sampled rows for blocks {absent}; it has {sorted(samples[m])}")
    inputs = [(m, b) for m in samples for b in sorted(samples[m]) if blocks is None or b in blocks]
    rows = []
    bar = tqdm(total=len(inputs) ** 2, desc="cross-feeding", disable=not progress)
    for ma, i in inputs:
        fed = samples[ma][i]  # read once per input block (a measurement's samples come from disk)
        for mb, j in inputs:
            report = crossfeed(fed, ffn_site(models[mb], j)[2], folds, j, rcond)
            bar.update()
            rows.append(
                {
                    "input_model": ma,
                    "input_block": i,
                    "weight_model": mb,
                    "weight_block": j,
                    "r2_lin": report.r2_lin,
                    "r2_lin_std": report.r2_lin_std,
                }
            )
    bar.close()
    return pd.DataFrame(rows)


def normalised_table(
    model: nn.Module,
    sample: Samples,
    kind: str,
    folds: int,
    blocks: Sequence[int] | None = None,
    variance: float | None = None,
    spec: Spec = None,
    rcond: float = DEFAULT_RCOND,
) -> pd.DataFrame:
    """Per block: R²_lin on its own sampled inputs, and on them standardised or whitened (``kind``).

    Columns: ``block, r2_lin`` (own inputs, captured outputs), ``r2_lin_norm, r2_lin_norm_std``
    (normalised inputs pushed through the same FFN), ``normalisation, null_dims``.
    """
    out = []
    for b, rows in sample_rows(sample, blocks).items():
        transform = input_transform(Moments.from_rows(rows.x, rows.y), kind, variance, rcond=rcond)
        z = transform(rows.x).to(torch.float32)
        normed = _recover(b, Rows(z, rows.y, rows.fold), feed(ffn_site(model, b, spec)[2], z), folds, rcond)
        own = kfold(b, rows.fold_moments(folds), rcond)
        out.append(
            {
                "block": b,
                "r2_lin": own.r2_lin,
                "r2_lin_norm": normed.r2_lin,
                "r2_lin_norm_std": normed.r2_lin_std,
                "normalisation": kind,
                "null_dims": transform.null_dims,
            }
        )
    return pd.DataFrame(out)
