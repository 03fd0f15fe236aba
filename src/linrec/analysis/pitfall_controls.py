"""Chapter 6 (the pitfall): planted controls, the ways other than conditioning to fall short.

:func:`planted_rows` and :func:`target_control`: at condition number about 1, inputs far from zero or at a small
scale defeat raw runs, and a target far from zero or at a large scale defeats Adam at its usual rate; centring the
inputs, standardising the targets and tuning the rate remove them, which is why the verdicts of
:mod:`linrec.analysis.pitfall_claims` do not depend on them.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import torch

from linrec.core.sample import Rows
from linrec.interventions.baseline import (
    BaselineConfig,
    train_linear,
    tuned_runs,
)


def planted_rows(
    decades: float = 0.0,
    offset: float = 0.0,
    scale: float = 1.0,
    n: int = 4000,
    d: int = 16,
    seed: int = 0,
    input_offset: float = 0.0,
    input_scale: float = 1.0,
    rotated: bool = True,
) -> Rows:
    """Rows with a known answer: x with condition number 10^(2·decades) along rotated directions (``rotated=False``:
    along the coordinate axes), times ``input_scale`` plus ``input_offset`` (neither changes the condition number of
    the covariance); y an exact linear map of the latent z (unit output variance per dimension, before ``scale``)
    plus 3 % noise, times ``scale`` plus ``offset``; five folds of 40-row "sequences"."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=g)
    rotation, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    x = z * torch.logspace(0, -decades, d)
    x = (x @ rotation.T if rotated else x) * input_scale + input_offset
    y = z @ torch.randn(d, d, generator=g) / d**0.5 + 0.03 * torch.randn(n, d, generator=g)
    return Rows(x, y * scale + offset, torch.arange(n) // 40 % 5)


def target_control(
    config: BaselineConfig, offset: float = 30.0, scale: float = 30.0, seed: int = 0, optimizer: str = "adam"
) -> pd.DataFrame:
    """``optimizer`` at condition number 1 on a centred target, one shifted by ``offset`` and one multiplied by
    ``scale``: at the base rate on raw targets (the usual practice), and standardised and tuned (as the chapter's
    runs are). Columns: ``target, training, lr, ceiling, r2_final, gap_final, status``."""
    rows = []
    for target, planted in (
        ("centred", planted_rows(seed=seed)),
        (f"shifted by {offset:g}", planted_rows(offset=offset, seed=seed)),
        (f"scaled by {scale:g}", planted_rows(scale=scale, seed=seed)),
    ):
        usual = train_linear(planted, 0, optimizer, "raw", replace(config, standardise_targets=False))
        tuned = next(r for r in tuned_runs(planted, 0, optimizer, "raw", config) if r.tuned)
        for training, run in (("base rate, raw target", usual), ("tuned, standardised target", tuned)):
            final = float(run.log.r2.iloc[-1])
            rows.append(
                {
                    "target": target,
                    "training": training,
                    "lr": run.lr,
                    "ceiling": run.ceiling,
                    "r2_final": final,
                    "gap_final": run.ceiling - final,
                    "status": run.status,
                }
            )
    return pd.DataFrame(rows)
