"""Planted depth tables (two models, checkpoints, corpora) for the depth, activation and corpus figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

MODELS = ["m-b", "m-a"]  # not alphabetical: the order given must be kept


def table_of(checkpoints=("final",), corpora=("c1",), blocks=3) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {
            "model": m,
            "checkpoint": c,
            "corpus": k,
            "block": b,
            "step": {"init": 0, "step5": 5, "final": 10}.get(c),
            "r2_lin": rng.uniform(0.2, 1),
            "r2_lin_std": rng.uniform(0.001, 0.02),
        }
        for m in MODELS
        for c in checkpoints
        for k in corpora
        for b in range(blocks)
    ]
    return pd.DataFrame(rows)
