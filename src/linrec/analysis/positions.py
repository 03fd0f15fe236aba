"""The attention sink in every block's numbers: how much of a block's R²_lin rests on the first position of a window.

Some models put very large activations at the first token of every window, whatever it is (other positions park
attention there); a block whose first-position rows are large and easy to predict can show a high global R²_lin
that says little about ordinary tokens. Every measurement's table carries, from the one capture, the share of each
block's output variance at the first position (``first_position_share``, about the all-rows mean) and R²_lin with
that position left out of fit and evaluation (``r2_lin_after_first``; :func:`linrec.core.fit.recoverability`).
:func:`sink_table` sets them side by side, :func:`sink_blocks` names the blocks whose headline depends on the first
position, and :func:`position_claims` states the extremes as headline numbers.
"""

from __future__ import annotations

import pandas as pd

from linrec.errors import LinrecError
from linrec.report.claims import Claim

DEPENDS = 0.05
"""A block's headline R²_lin depends on the first position when leaving it out moves R²_lin by this much or more."""

COLUMNS = ["model", "block", "r2_lin", "r2_lin_after_first", "change", "first_position_share", "rows_first"]


def sink_table(table: pd.DataFrame, seq_len: int) -> pd.DataFrame:
    """Per block of a depth table (:func:`linrec.analysis.depth.depth_table`): R²_lin on all rows and without the
    first position of each ``seq_len``-token window, their ``change`` (without minus with), the first position's
    share of the output variance and of the rows (``rows_first``)."""
    missing = sorted({"model", "block", "r2_lin", "r2_lin_after_first", "first_position_share"} - set(table.columns))
    if missing:
        raise LinrecError(f"the sink table needs the measurement table's columns {missing}")
    if table["r2_lin_after_first"].isna().any():
        raise LinrecError("some blocks have no first-position numbers: measure them afresh (their capture kept none)")
    out = table.assign(change=table.r2_lin_after_first - table.r2_lin, rows_first=1 / seq_len)
    return out[COLUMNS].reset_index(drop=True)


def sink_blocks(sinks: pd.DataFrame, depends: float = DEPENDS) -> pd.DataFrame:
    """The rows of a :func:`sink_table` whose R²_lin moves by ``depends`` or more without the first position."""
    return sinks[sinks.change.abs() >= depends]


def position_extremes(sinks: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The rows of a :func:`sink_table` whose first position carries the largest share of the output variance, and
    whose R²_lin moves most without it."""
    return sinks.iloc[sinks.first_position_share.argmax()], sinks.iloc[sinks.change.abs().argmax()]


def position_claims(sinks: pd.DataFrame, depends: float = DEPENDS) -> list[Claim]:
    """Headline numbers of a :func:`sink_table` (one model or several stacked): the largest share of a block's output
    variance at the first position, the largest change of R²_lin without it, and how many blocks move by
    ``depends`` or more. The paper reports none of them."""
    heavy, moved = position_extremes(sinks)
    moving = sink_blocks(sinks, depends)
    return [
        Claim.measure(
            "output variance at the first position, largest block share",
            heavy.first_position_share,
            note=f"{heavy.model} block {int(heavy.block)}; the first position is {heavy.rows_first:.1%} of rows",
        ),
        Claim.measure(
            "R²_lin change without the first position, largest",
            moved.change,
            note=f"{moved.model} block {int(moved.block)}: {moved.r2_lin:.3f} → {moved.r2_lin_after_first:.3f}",
        ),
        Claim.measure(
            f"blocks whose R²_lin moves by {depends} or more without the first position",
            f"{len(moving)} of {len(sinks)}",
            note=", ".join(f"{m} {int(b)}" for m, b in zip(moving.model, moving.block)) or "none",
        ),
    ]
