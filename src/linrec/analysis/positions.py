"""The attention sink in every block's numbers: how much of a block's R²_lin rests on the first position of a window.

Some models put very large activations at the first token of every window, whatever it is (other positions park
attention there); a block whose first-position rows are large and easy to predict can show a high global R²_lin
that says little about ordinary tokens. Every measurement's table carries, from the one capture, the share of each
block's output variance at the first position (``first_position_share``, about the all-rows mean) and R²_lin with
that position left out of fit and evaluation (``r2_lin_after_first``; :func:`linrec.core.fit.recoverability`).
:func:`sink_table` sets them side by side, :func:`sink_blocks` names the blocks whose headline depends on the first
position, and :func:`position_claims` states the extremes as headline numbers. Without the first position a few
rows can still carry most of what is left (``top_rows_share_after_first``, :mod:`linrec.core.tails`): there
:func:`few_row_blocks` names the blocks whose R²_lin without the first position is decided by which fold draws them.
"""

from __future__ import annotations

import pandas as pd

from linrec.errors import LinrecError
from linrec.report.claims import Claim

DEPENDS = 0.05
"""A block's headline R²_lin depends on the first position when leaving it out moves R²_lin by this much or more."""

FEW = 0.5
"""A block's R²_lin without the first position rests on a few rows when its largest 0.1 % of those rows carry this
share or more of their output variance."""

COLUMNS = [
    "model", "block", "r2_lin", "r2_lin_after_first", "change", "first_position_share", "rows_first",
    "top_rows_share_after_first",
]  # fmt: skip


def sink_table(table: pd.DataFrame, seq_len: int) -> pd.DataFrame:
    """Per block of a depth table (:func:`linrec.analysis.depth.depth_table`): R²_lin on all rows and without the
    first position of each ``seq_len``-token window, their ``change`` (without minus with), the first position's
    share of the output variance and of the rows (``rows_first``), and the share the largest 0.1 % of the later
    rows carry of theirs (``top_rows_share_after_first``)."""
    needed = {"model", "block", "r2_lin", "r2_lin_after_first", "first_position_share", "top_rows_share_after_first"}
    missing = sorted(needed - set(table.columns))
    if missing:
        raise LinrecError(f"the sink table needs the measurement table's columns {missing}")
    if table["r2_lin_after_first"].isna().any():
        raise LinrecError("some blocks have no first-position numbers: measure them afresh (their capture kept none)")
    out = table.assign(change=table.r2_lin_after_first - table.r2_lin, rows_first=1 / seq_len)
    return out[COLUMNS].reset_index(drop=True)


def sink_blocks(sinks: pd.DataFrame, depends: float = DEPENDS) -> pd.DataFrame:
    """The rows of a :func:`sink_table` whose R²_lin moves by ``depends`` or more without the first position."""
    return sinks[sinks.change.abs() >= depends]


def few_row_blocks(sinks: pd.DataFrame, few: float = FEW) -> pd.DataFrame:
    """The rows of a :func:`sink_table` whose largest 0.1 % of rows after the first position carry ``few`` or more of
    those rows' output variance: R²_lin without the first position is decided by the fold that draws them."""
    return sinks[sinks.top_rows_share_after_first >= few]


def position_extremes(sinks: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The rows of a :func:`sink_table` whose first position carries the largest share of the output variance, and
    whose R²_lin moves most without it."""
    return sinks.iloc[sinks.first_position_share.argmax()], sinks.iloc[sinks.change.abs().argmax()]


def position_claims(sinks: pd.DataFrame, depends: float = DEPENDS, few: float = FEW) -> list[Claim]:
    """Headline numbers of a :func:`sink_table` (one model or several stacked): the largest share of a block's output
    variance at the first position, the largest change of R²_lin without it, how many blocks move by ``depends``
    or more, and in how many a few rows decide R²_lin without it (:func:`few_row_blocks`). The paper reports none
    of them."""
    heavy, moved = position_extremes(sinks)
    moving = sink_blocks(sinks, depends)
    few_rows = few_row_blocks(sinks, few)
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
        Claim.measure(
            f"blocks whose largest 0.1 % of rows after the first position carry {few:.0%} or more of their variance",
            f"{len(few_rows)} of {len(sinks)}",
            note=", ".join(
                f"{m} {int(b)} ({share:.0%})"
                for m, b, share in zip(few_rows.model, few_rows.block, few_rows.top_rows_share_after_first)
            )
            or "none",
        ),
    ]


def dependence_reading(sinks: pd.DataFrame, depends: float = DEPENDS) -> str:
    """How to read the blocks' headline R²_lin against the first position: that none moves by ``depends`` or more
    without it, or which blocks do (:func:`sink_blocks`) and that their numbers are read with the column beside."""
    depending = sink_blocks(sinks, depends)
    if depending.empty:
        return f"no block's R²_lin moves by {depends} or more without the first position"
    blocks = ", ".join(f"{m} {int(b)}" for m, b in zip(depending.model, depending.block))
    return (
        f"{len(depending)} of {len(sinks)} blocks ({blocks}) have a headline R²_lin that rests on the first position: "
        "read their numbers with the column beside them"
    )
