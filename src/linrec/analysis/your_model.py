"""Chapter 9 (your model): reading a recoverability table as a practitioner.

Which blocks to try replacing, what measuring costs, and the numbers the appendix sets beside the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from linrec.core.measure import replacement_candidates as replacement_candidates  # re-exported: chapter 9 uses it
from linrec.report.claims import Claim


def moment_bytes(d_in: int, d_out: int, blocks: int, folds: int) -> int:
    """Bytes of the float64 moments kept while measuring: O(d²) per block and fold, independent of tokens."""
    return 8 * (d_in * d_in + d_in * d_out + d_out * d_out + d_in + d_out) * blocks * folds


def cost_table(models: dict[str, tuple[int, int]], folds: int = 5) -> pd.DataFrame:
    """Moment memory for ``{name: (width, n_blocks)}``: all blocks in one pass, and one block per pass."""
    rows = []
    for name, (width, blocks) in models.items():
        rows.append(
            {
                "model": name,
                "width": width,
                "blocks": blocks,
                "folds": folds,
                "all blocks at once (GiB)": moment_bytes(width, width, blocks, folds) / 2**30,
                "one block per pass (GiB)": moment_bytes(width, width, 1, folds) / 2**30,
            }
        )
    return pd.DataFrame(rows)


def your_model_claims(swaps: pd.DataFrame, timing: Mapping[str, float], name: str) -> list[Claim]:
    """Headline numbers for the measured model: ΔPPL of swapping its highest-R²_lin block of ``swaps`` (a
    :func:`linrec.interventions.perplexity.swap_deltas` table with ``r2_lin``) for its affine map, beside the
    paper's GPT-2 figure, and the capture's time over a bare forward's (:func:`linrec.bench.capture_overhead`)."""
    best = swaps.sort_values("r2_lin", ascending=False).iloc[0]
    return [
        Claim.measure(
            "ΔPPL of the highest-R² block swapped for its affine map",
            best.delta_ppl,
            paper="+0.77 (GPT-2 early block, 8× fewer parameters)",
            unit="perplexity",
            note=f"{name} block {int(best.block)}, R²_lin {best.r2_lin:.3f}, {best.ratio:.1f}× fewer numbers",
        ),
        Claim.measure(
            "capture time / bare forward time",
            timing["capture_s"] / timing["bare_s"],
            unit="ratio",
            note=f"{name}, {int(timing['tokens']):,} tokens",
        ),
    ]
