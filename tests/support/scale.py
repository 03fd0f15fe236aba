"""Planted profiles of several model sizes, for the scale analysis and its figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

from linrec.analysis import scale

PARAMS = {"small": 10**6, "mid": 10**8, "large": 10**9}


def planted(spread: dict[str, float], share: dict[str, float], blocks: int = 24, seed: int = 0) -> pd.DataFrame:
    """Profiles of ``blocks`` blocks per model: R²_lin evenly spread over ``spread[model]`` below 0.99 (shuffled),
    first-position share ``share[model]`` with a little noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in spread:
        r2 = rng.permutation(0.99 - np.linspace(0, spread[model], blocks))
        for block in range(blocks):
            rows.append({"model": model, "block": block, "r2_lin": r2[block], "r2_lin_std": 0.01,
                         "r2_lin_after_first": r2[block] - 0.01, "r2_lin_half_rows": r2[block] - 0.02,
                         "first_position_share": share[model] + rng.normal(0, 1e-3),
                         "d_in": 64, "n_train": 4096, "n_test": 1024})  # fmt: skip
    return scale.with_depth(pd.DataFrame(rows))
