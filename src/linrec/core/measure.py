"""The one-call measurement: capture moments, then k-fold closed-form recovery, as a table."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn

from linrec.core.capture import capture_positions
from linrec.core.fit import check_rcond, half_precision_note, rcond_for, recoverability, report_table
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError, LinrecWarning
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
    skip_first: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Per-block linear recoverability of ``model`` on ``batches``: one row per FFN block.

    Columns: ``block, r2_lin`` (k-fold mean held-out R², variance-weighted), ``r2_lin_std``
    (its std over folds), ``r2_feature_median`` (median per-output-dim R²),
    ``effective_rank_out, effective_rank_map`` (participation ratios of the output covariance and
    of the fitted map's predictions), ``input_condition`` (over the non-null spectrum),
    ``null_dims`` (input directions dropped), ``n_train, n_test`` (rows per fold split),
    ``d_in, d_out``; ``r2_lin_half_rows`` (the same with about half the training rows: a convergence check),
    ``first_position_share`` and ``r2_lin_after_first`` (the first captured position of each window, where
    the attention sink sits: its share of the output variance, and R²_lin without it), ``r2_lin_folds`` (each
    fold's R²_lin). :data:`linrec.core.fit.COLUMNS` says what each means.

    ``skip_first``: leave the first ``skip_first`` positions of every window out of the capture (the forward
    pass is unchanged: every token still attends to the whole window).

    ``rcond``: the null-direction cutoff (:func:`linrec.core.fit.fit_affine`); None follows the model's dtype
    (:func:`linrec.core.fit.rcond_for`), and a 16-bit model draws a warning
    (:func:`linrec.core.fit.half_precision_note`); a NaN, infinite or negative one is refused.
    A model in training mode is refused (call ``model.eval()``): its dropout would lower R² at random.
    """
    if rcond is not None:
        check_rcond(rcond)  # before the capture, not after it
    check_skip_first(skip_first, batches.seq_len)
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    note = half_precision_note(dtype)
    if note is not None and rcond is None:
        warnings.warn(note, LinrecWarning, stacklevel=2)
    positions = slice(skip_first, None) if skip_first else None
    split = capture_positions(model, batches, blocks, folds, seed, spec, progress=progress, positions=positions)
    return report_table(recoverability(split, rcond_for(dtype) if rcond is None else rcond))


def check_skip_first(skip_first: int, seq_len: int) -> int:
    """``skip_first`` when it leaves at least one position of a ``seq_len``-token window, else a LinrecError."""
    if isinstance(skip_first, bool) or not isinstance(skip_first, int) or not 0 <= skip_first < seq_len:
        raise LinrecError(
            f"skip_first (--skip-first) must be an integer from 0 to seq_len - 1 = {seq_len - 1}, so that each "
            f"{seq_len}-token window keeps a position; got {skip_first!r}. Lower it, or raise --seq-len."
        )
    return skip_first
