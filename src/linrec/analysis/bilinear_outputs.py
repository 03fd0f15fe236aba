"""Chapter 4 (bilinear): where a block's output variance sits, and how well the closed form predicts it there.

:func:`output_concentration` and :func:`output_dims`: global R²_lin weights every output dim by
its variance, the median per-feature R² weights them equally. Where the two differ, a few
high-variance dims decide the global number; these say which dims, how much of the variance
they carry and how well the map predicts them. The R² of a set of dims S is the
variance-weighted mean of their per-feature R² (k-fold means), Σ_S v_j R²_j / Σ_S v_j, so over
all dims it is (up to the fold averaging) the global R²_lin.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import torch

from linrec.core.fit import DEFAULT_RCOND, BlockReport, recoverability
from linrec.core.moments import merge_folds
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement


def _variance(m: ProfileMeasurement, block: int) -> torch.Tensor:
    total = merge_folds(m.moments[block])
    return total.output_ss / total.n


def output_concentration(
    measurements: Mapping[str, ProfileMeasurement], top: int = 4, rcond: float = DEFAULT_RCOND
) -> pd.DataFrame:
    """Per model and block: global and median per-feature R², effective rank of the outputs, and the
    ``top`` highest-variance output dims' share of the variance and R² against the rest's.

    Columns: ``model, block, r2_lin, r2_feature_median, gap`` (global - median),
    ``effective_rank_out, d_out, top, top_share, uniform_share`` (top / d_out, the share of
    equal dims), ``r2_top, r2_rest``.
    """
    rows = []
    for model, m in measurements.items():
        for report in recoverability(m.moments, rcond):
            if not 1 <= top < report.d_out:
                raise LinrecError(
                    f"top must be between 1 and {report.d_out - 1} (the output width less one); got {top}"
                )
            dims = _dims(m, report)
            head, rest = dims.iloc[:top], dims.iloc[top:]
            rows.append(
                {
                    "model": model,
                    "block": report.block,
                    "r2_lin": report.r2_lin,
                    "r2_feature_median": report.r2_feature_median,
                    "gap": report.r2_lin - report.r2_feature_median,
                    "effective_rank_out": report.effective_rank_out,
                    "d_out": report.d_out,
                    "top": top,
                    "top_share": float(head.share.sum()),
                    "uniform_share": top / report.d_out,
                    "r2_top": _weighted(head),
                    "r2_rest": _weighted(rest),
                }
            )
    return pd.DataFrame(rows)


def _weighted(dims: pd.DataFrame) -> float:
    return float((dims.variance * dims.r2).sum() / dims.variance.sum())


def _dims(m: ProfileMeasurement, report: BlockReport) -> pd.DataFrame:
    variance = _variance(m, report.block).cpu()
    dims = pd.DataFrame(
        {
            "dim": range(report.d_out),
            "variance": variance.numpy(),
            "share": (variance / variance.sum()).numpy(),
            "r2": report.r2_per_feature.numpy(),
        }
    )
    dims = dims.sort_values(["variance", "dim"], ascending=[False, True], ignore_index=True)
    return dims.assign(rank=range(1, len(dims) + 1))


def output_dims(m: ProfileMeasurement, block: int, rcond: float = DEFAULT_RCOND) -> pd.DataFrame:
    """Every output dim of one block, highest variance first: ``dim, variance, share`` (of the block's
    total output variance), ``r2`` (per-feature held-out R², k-fold mean), ``rank`` (1 = largest)."""
    if block not in m.moments:
        raise LinrecError(f"no block {block} in this measurement; blocks: {m.blocks}")
    (report,) = recoverability({block: m.moments[block]}, rcond)
    return _dims(m, report)


def widest_gap(concentration: pd.DataFrame) -> pd.Series:
    """The row of :func:`output_concentration` whose global and median per-feature R² differ most."""
    if concentration.empty:
        raise LinrecError("the concentration table is empty")
    return concentration.iloc[concentration.gap.abs().argmax()]
