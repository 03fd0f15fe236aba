"""Chapter 3's figures: distances between profiles, the inputs' normalisation and conditioning, cross-feeding."""

from __future__ import annotations

import numpy as np
import pandas as pd

from linrec.plots import activation as figures
from support.depth_tables import MODELS, table_of


def test_crossfeed_heatmap_orders_rows_and_columns_alike():
    keys = [(m, b) for m in MODELS for b in range(2)]
    values = np.arange(16, dtype=float).reshape(4, 4) / 16
    grid = pd.DataFrame(
        [
            {
                "input_model": a[0],
                "input_block": a[1],
                "weight_model": w[0],
                "weight_block": w[1],
                "r2_lin": values[i, j],
            }
            for i, a in enumerate(keys)
            for j, w in enumerate(keys)
        ]
    )
    ax = figures.crossfeed_heatmap(grid.sample(frac=1, random_state=0), order=MODELS).axes[0]
    np.testing.assert_allclose(ax.collections[0].get_array().reshape(4, 4), values)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{m} · {b}" for m, b in keys]


def test_distance_normalisation_and_conditioning_figures():
    distances = pd.DataFrame(
        {"kind": ["seed", "training", "training"], "a": "x", "b": "y", "distance": [0.1, 0.3, 0.5]}
    )
    ax = figures.distance_figure(distances).axes[0]
    np.testing.assert_allclose(sorted(p.get_width() for p in ax.patches), [0.1, 0.4])  # bar = mean per kind
    table = table_of()
    normalised = pd.concat(
        [
            table.assign(normalisation=k, r2_lin_norm=table.r2_lin + s, r2_lin_norm_std=0.01)
            for k, s in (("standardise", 0.0), ("whiten", -0.1))
        ]
    )
    fig = figures.normalisation_figure(normalised, order=MODELS)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]  # one legend beneath all panels
    assert labels == ["own inputs", "inputs standardised", "inputs whitened"]
    conditioning = table.assign(log10_condition=2.0, effective_rank_in=5.0)
    fig = figures.conditioning_figure(conditioning, order=MODELS)
    assert len(fig.axes[0].collections[0].get_offsets()) == len(table)
