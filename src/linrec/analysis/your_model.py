"""Chapter 9 (your model): reading a recoverability table as a practitioner.

Which blocks to try replacing, what measuring costs, and the numbers the appendix sets beside the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from linrec.errors import LinrecError
from linrec.report.claims import Claim


def replacement_candidates(table: pd.DataFrame, min_r2: float = 0.95, max_std: float = 0.02) -> pd.DataFrame:
    """The table sorted by R²_lin, with a ``candidate`` flag and the reason for it.

    A block is a candidate for an affine replacement when its held-out R²_lin reaches ``min_r2``
    and the folds agree (``r2_lin_std`` at most ``max_std``). A candidate is only a hypothesis:
    perplexity after the swap (``linrec.interventions.perplexity.swap_deltas``) is the test.
    """
    missing = {"block", "r2_lin", "r2_lin_std"} - set(table.columns)
    if missing:
        raise LinrecError(f"the table lacks columns {sorted(missing)}; pass the output of linrec.core.measure")
    if not 0 < min_r2 <= 1 or max_std < 0:
        raise LinrecError(f"need 0 < min_r2 <= 1 and max_std >= 0; got min_r2={min_r2}, max_std={max_std}")
    out = table.sort_values("r2_lin", ascending=False).copy()
    high = out.r2_lin >= min_r2
    stable = out.r2_lin_std <= max_std
    out["candidate"] = high & stable
    out["reason"] = [
        "R² high, folds agree" if h and s else (f"R² below {min_r2}" if not h else f"folds disagree (std > {max_std})")
        for h, s in zip(high, stable)
    ]
    return out


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
