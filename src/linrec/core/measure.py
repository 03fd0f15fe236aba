"""The one-call measurement: capture moments, then k-fold closed-form recovery, as a table."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn

from linrec.core.capture import capture_moments
from linrec.core.fit import check_rcond, half_precision_note, rcond_for, recoverability, report_table
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecWarning
from linrec.models.arch import Spec


def measure(
    model: nn.Module,
    batches: TokenBatches,
    *,
    blocks: Sequence[int] | None = None,
    folds: int = 5,
    seed: int = 0,
    rcond: float | None = None,
    spec: Spec = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Per-block linear recoverability of ``model`` on ``batches``: one row per FFN block.

    Columns: ``block, r2_lin`` (k-fold mean held-out R², variance-weighted), ``r2_lin_std``
    (its std over folds), ``r2_feature_median`` (median per-output-dim R²),
    ``effective_rank_out, effective_rank_map`` (participation ratios of the output covariance and
    of the fitted map's predictions), ``input_condition`` (over the non-null spectrum),
    ``null_dims`` (input directions dropped), ``n_train, n_test`` (rows per fold split),
    ``d_in, d_out``.

    ``rcond``: the null-direction cutoff (:func:`linrec.core.fit.fit_affine`); None follows the model's dtype
    (:func:`linrec.core.fit.rcond_for`), and a 16-bit model draws a warning
    (:func:`linrec.core.fit.half_precision_note`); a NaN, infinite or negative one is refused.
    A model in training mode is refused (call ``model.eval()``): its dropout would lower R² at random.
    """
    if rcond is not None:
        check_rcond(rcond)  # before the capture, not after it
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    note = half_precision_note(dtype)
    if note is not None and rcond is None:
        warnings.warn(note, LinrecWarning, stacklevel=2)
    moments = capture_moments(model, batches, blocks=blocks, folds=folds, seed=seed, spec=spec, progress=progress)
    return report_table(recoverability(moments, rcond_for(dtype) if rcond is None else rcond))
