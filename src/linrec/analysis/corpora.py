"""Chapter 7: do a model's depth profiles on different corpora overlay?

:func:`corpus_summary` sets, per model, how far a block's R²_lin moves between corpora (the *corpus
spread*) against how far it moves between blocks on one corpus (the *depth range*), with the distance and
the lowest rank correlation between two corpora's profiles; :func:`corpus_claims` checks the paper's
robustness claim against it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from linrec.analysis.depth import rms_difference
from linrec.errors import LinrecError
from linrec.report import paper
from linrec.report.claims import Claim


def corpus_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: how far its profiles on different corpora are apart, against how much depth changes R²_lin.

    Columns: ``corpora``; ``depth_range`` (range of R²_lin over blocks, averaged over corpora);
    ``corpus_spread_mean`` / ``corpus_spread_max`` (per block, max − min of R²_lin over corpora,
    averaged / maximised over blocks); ``spread_to_range`` (their mean spread over the depth range:
    small means the profiles overlay); ``distance_mean`` (mean RMS distance over corpus pairs);
    ``spearman_min`` (the lowest rank correlation across blocks between two corpora's profiles).
    """
    rows = []
    for (model, checkpoint), g in table.groupby(["model", "checkpoint"], sort=False):
        wide = g.pivot(index="block", columns="corpus", values="r2_lin").sort_index()
        if wide.shape[1] < 2:
            raise LinrecError(f"model '{model}' is measured on one corpus only; corpus robustness needs two or more")
        if wide.isna().any().any():
            raise LinrecError(f"model '{model}': not every corpus covers every block")
        spread = wide.max(axis=1) - wide.min(axis=1)
        depth_range = float((wide.max() - wide.min()).mean())
        pairs = list(itertools.combinations(wide.columns, 2))
        rows.append(
            {
                "model": model,
                "checkpoint": checkpoint,
                "corpora": wide.shape[1],
                "depth_range": depth_range,
                "corpus_spread_mean": float(spread.mean()),
                "corpus_spread_max": float(spread.max()),
                "spread_to_range": float(spread.mean() / depth_range) if depth_range > 0 else math.inf,
                "distance_mean": float(np.mean([rms_difference(wide[a], wide[b]) for a, b in pairs])),
                "spearman_min": float(pd.Series([wide[a].corr(wide[b], method="spearman") for a, b in pairs]).min()),
            }
        )
    return pd.DataFrame(rows)


def corpus_claims(summary: pd.DataFrame, overlay: float = 0.5) -> list[Claim]:
    """The paper's corpus-robustness claim against a :func:`corpus_summary`: the profiles overlay when, in every
    model, the mean spread of a block's R²_lin across corpora is below ``overlay`` times the depth range; and
    the largest change of one block across corpora, a headline number."""
    below = summary["spread_to_range"] < overlay
    ratio = summary["spread_to_range"].median()
    worst = summary.iloc[summary["corpus_spread_max"].argmax()]
    return [
        Claim.check(
            "depth profiles overlay across corpora",
            paper.CORPUS_ROBUSTNESS,
            f"corpus spread below {overlay:g} × the depth range in {int(below.sum())} of {len(summary)} models "
            f"(median ratio {ratio:.2f}); lowest rank correlation between two corpora's profiles "
            f"{summary['spearman_min'].min():+.2f}",
            bool(below.all()),
            rule=f"reproduced when, in every model, the mean spread of a block's R²_lin across corpora is below "
            f"{overlay:g} times that model's depth range (the profiles differ less between corpora than along depth)",
            value=ratio,
            unit="corpus spread / depth range",
            note="; ".join(
                f"{r.model}: spread {r.corpus_spread_mean:.3f} vs depth range {r.depth_range:.3f}, "
                f"min Spearman {r.spearman_min:+.2f}"
                for r in summary.itertuples()
            ),
        ),
        Claim.measure(
            "largest change of one block's R²_lin across corpora", worst["corpus_spread_max"], note=worst["model"]
        ),
    ]
