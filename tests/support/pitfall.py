"""A planted toy, fake measurements and the chapter's configuration, for the pitfall runs, controls and claims."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from conftest import measurement_info
from linrec.analysis.pitfall import (
    pitfall_runs,
    representative_blocks,
)
from linrec.analysis.pitfall_claims import pitfall_claims
from linrec.analysis.pitfall_controls import planted_rows
from linrec.core.sample import Rows
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import get_profile
from linrec.experiment.resolve import baseline_config
from linrec.interventions.baseline import BaselineConfig
from linrec.report.claims import claims_table

FOLDS = 5


def toy(decades: float, seed: int = 0) -> Rows:
    """Inputs of condition number 10^(2·decades) along rotated directions; an exact linear target plus noise."""
    return planted_rows(decades, n=2000, d=8, seed=seed)


def fake_measurement(blocks: dict[int, Rows], model: str) -> ProfileMeasurement:
    return ProfileMeasurement.assembled(
        measurement_info(model, corpus="planted"), {b: r.fold_moments(FOLDS) for b, r in blocks.items()}, dict(blocks)
    )


@pytest.fixture(scope="session")
def measured() -> dict[str, ProfileMeasurement]:
    return {"a": fake_measurement({0: toy(0), 1: toy(2), 2: toy(1)}, "a"), "b": fake_measurement({0: toy(0.5, 1)}, "b")}


def chapter_config(lr_factors: tuple[float, ...]) -> BaselineConfig:
    """The offline profile's budget (steps, Adam rate, logging) on a shorter learning-rate grid."""
    return replace(baseline_config(get_profile("offline").probe, device="cpu"), lr_factors=lr_factors)


def verdicts(measured: dict[str, ProfileMeasurement], config: BaselineConfig, optimizers, inputs) -> dict[str, str]:
    table = pd.concat([m.table() for m in measured.values()], ignore_index=True)
    runs, _ = pitfall_runs(measured, representative_blocks(table), config, optimizers, inputs, progress=False)
    return claims_table(pitfall_claims(runs, config.tolerance)).set_index("claim").reproduced.to_dict()
