"""Planted probe tables and fake measurements for the bilinear probe's sweeps, controls, outputs and claims."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import torch

from conftest import measurement_info
from linrec.analysis.bilinear_claims import bilinear_claims
from linrec.core.sample import Rows
from linrec.experiment.measurement import ProfileMeasurement
from linrec.report.claims import claims_table

N, D, FOLDS = 3000, 8, 5


def fake_measurement(blocks: dict[int, Rows], model: str = "toy", sequence: int = 30) -> ProfileMeasurement:
    """A ProfileMeasurement of planted rows: per-fold moments from the rows, the rows as the sample (every row kept, in
    ``sequence``-row sequences)."""
    n = len(next(iter(blocks.values())))
    info = replace(measurement_info(model, corpus="planted", rows=n), seq_len=sequence, sample_rows=n)
    return ProfileMeasurement.assembled(info, {b: r.fold_moments(FOLDS) for b, r in blocks.items()}, dict(blocks))


def linear(seed: int = 0) -> Rows:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, D, generator=g)
    return Rows(
        x, x @ torch.randn(D, D, generator=g) + 0.01 * torch.randn(N, D, generator=g), torch.arange(N) // 30 % FOLDS
    )


def controls_table(quadratic: float, ffn: tuple[float, float], odd: float) -> pd.DataFrame:
    """A probe_controls-shaped table: each control's share with a ±0.02 interval (the FFNs: ``ffn``)."""
    rows = [("quadratic", quadratic, quadratic - 0.02, quadratic + 0.02), ("gelu-mlp", sum(ffn) / 2, *ffn),
            ("swiglu-mlp", sum(ffn) / 2, *ffn), ("odd", odd, odd - 0.02, odd + 0.02)]  # fmt: skip
    return pd.DataFrame(rows, columns=["kind", "captured", "captured_low", "captured_high"])


def table_sweep(captured: list[float], half_width: float = 0.03) -> pd.DataFrame:
    """A probe_sweep-shaped table of five blocks with the given shares."""
    sweep = pd.DataFrame({"r2_lin": [0.99, 0.9, 0.97, 0.6, 0.8], "gate": [0.01, 0.2, 0.02, 0.5, 0.3]})
    sweep["nonlinearity"] = 1 - sweep.r2_lin
    sweep["gain"] = 0.05 * sweep.nonlinearity  # perfectly correlated: r = 1
    share = pd.Series(captured)
    return sweep.assign(captured=share, captured_low=share - half_width, captured_high=share + half_width,
                        at_budget=[False, True, False, False, False])  # fmt: skip


CONCENTRATION = pd.DataFrame(
    {"model": "m", "block": [0, 1], "effective_rank_out": [1.1, 20.0], "gap": [0.2, 0.01], "top_share": [0.9, 0.1]}
)


WORKS = controls_table(0.97, (0.3, 0.5), 0.0)


def verdicts(sweep: pd.DataFrame, **kwargs) -> pd.Series:
    return claims_table(bilinear_claims(sweep, CONCENTRATION, 0.1, **kwargs)).set_index("claim").reproduced


SHARE = "the residual is not low-rank quadratic (share below a random FFN's)"


GATE = "seeded-poly gate on near-linear blocks"
