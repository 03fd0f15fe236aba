"""What each column of a ``linrec measure`` table means, the columns the command adds (whether a block's rows were
enough, which releases made the table and when), and the few it prints.

The table's columns are :data:`linrec.core.columns.COLUMNS` (the measured ones) and :data:`COLUMNS` (what the command
adds); ``linrec measure --help`` lists them all (:func:`columns_help`). The terminal gets :func:`summary`, a few
columns per block that fit its width; ``--out`` keeps every column.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

from linrec.commands.args import block_spans, short_name
from linrec.errors import LinrecWarning
from linrec.experiment.budgets import ROWS_PER_DIMENSION

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = {
    "model": "the model as given: --model, or the profile's name for it",
    "rows_too_few": f"whether the block had too few rows for r2_lin to have converged: fewer than {ROWS_PER_DIMENSION} "
    "per input dimension, and r2_lin_half_rows more than 0.01 below r2_lin (or NaN); give more rows (--max-rows, a "
    "longer text) before reading r2_lin",
    "revision": "the hub revision asked for; for a GGUF file its sha256 and quantisation",
    "dtype": "dtype of the weights in the forward pass (the statistics are float64 whatever it is)",
    "device": "device of the forward pass",
    "corpus": "the text measured on: a corpus name, or the --text-file path",
    "corpus_sha256": "sha256 of that text",
    "seq_len": "tokens per sequence",
    "skip_first": "positions left out of the capture at the start of every window (--skip-first)",
    "folds": "k of the k-fold split: by document where the text has documents (offline and packaged corpora), "
    "else by sequence",
    "layout": "where the sequences were taken from: spread evenly over the whole text, or its head",
    "seed": "seed of the fold assignment",
    "extras": "what was computed beyond the fit's needs (--extras), comma-separated; empty: none",
    "products": "how the capture multiplied its rows into the float64 sums (--products): float64 (exact, the default), "
    "float32 or ozaki:S",
    "linrec_version": "linrec that measured",
    "torch_version": "torch that ran the forward pass",
    "transformers_version": "transformers that built the model",
    "measured_at": "when the table was made (UTC, ISO 8601)",
}
"""The columns ``linrec measure`` adds to :data:`linrec.core.columns.COLUMNS`: whether the rows sufficed, and where
each number comes from."""

ROWS_GAP = 0.01
"""How far r2_lin_half_rows may sit below r2_lin, in a block with fewer than :data:`ROWS_PER_DIMENSION` rows per input
dimension, before :func:`rows_too_few` calls its rows too few: twice the 0.005 by which the median block of SmolLM2-135M
still falls short of its converged R²_lin at that default (:mod:`linrec.experiment.budgets`)."""

SUMMARY = ("block", "r2_lin", "r2_lin_std", "first_position_share", "r2_lin_after_first", "rows_too_few")
"""The columns ``linrec measure`` prints per block: R²_lin with its spread over the folds, the first position's share of
the output and R²_lin without it, and whether the rows were too few to read them."""


def rows_too_few(table: pd.DataFrame) -> pd.Series:
    """Per row of a measurement table: whether the block had too few rows for its R²_lin to have converged.

    The evidence is the table's own: if held-out R²_lin falls short of its converged value by about c/n at n training
    rows (as an affine fit's does), a fit on half of them falls short by twice that, so ``r2_lin - r2_lin_half_rows``
    (half the rows at k = 5) estimates what more rows would still add. That gap is noisy at any row count, so blocks
    with :data:`ROWS_PER_DIMENSION` rows per input dimension or more (``n_train + n_test`` over ``d_in``: where R²_lin
    has settled, the default) are never flagged; below it, a gap over :data:`ROWS_GAP`, or a NaN one (too few rows
    even to fit on half of them), flags the block."""
    per_dimension = (table.n_train + table.n_test) / table.d_in
    converged = (table.r2_lin - table.r2_lin_half_rows) <= ROWS_GAP  # (False where either is NaN)
    return (per_dimension < ROWS_PER_DIMENSION) & ~converged


def warn_rows_too_few(table: pd.DataFrame) -> None:
    """Warn, naming the blocks, their rows and the largest gap, where one model's ``table`` flags :func:`rows_too_few`
    (its ``rows_too_few`` column)."""
    flagged = table[table.rows_too_few]
    if flagged.empty:
        return
    rows, width = int((flagged.n_train + flagged.n_test).min()), int(flagged.d_in.max())
    gap = (flagged.r2_lin - flagged.r2_lin_half_rows).max()
    warnings.warn(
        f"{short_name(str(table.model.iloc[0]))}: R²_lin of blocks {block_spans(flagged.block)} has not converged at "
        f"{rows:,} rows per block, {rows / width:.1f} per input dimension of {width} (r2_lin_half_rows is "
        + ("NaN: too few rows to fit on half" if math.isnan(gap) else f"up to {gap:.3g} below r2_lin")
        + f"; rows_too_few in the table). Give more rows: --max-rows {ROWS_PER_DIMENSION * width} "
        f"({ROWS_PER_DIMENSION} per dimension, the default) or a longer text.",
        LinrecWarning,
        stacklevel=2,
    )


def summary(table: pd.DataFrame) -> str:
    """What ``linrec measure`` prints of its table: per model a line naming it, its text and rows, then the
    :data:`SUMMARY` columns of each block, fixed-width and four significant digits; ``rows_too_few`` only where some
    block is flagged (the warning names them), so that the usual summary fits a terminal's 80 columns."""
    parts = []
    for model, rows in table.groupby("model", sort=False):
        first = rows.iloc[0]
        n_rows = int(first.n_train + first.n_test)
        parts.append(
            f"{short_name(str(model))} on {short_name(str(first.corpus))}: {len(rows)} blocks, {n_rows:,} rows each "
            f"({n_rows / first.d_in:.1f} per input dimension of {int(first.d_in)}), {int(first.seq_len)} tokens per "
            f"sequence, {int(first.folds)} folds"
        )
        shown = [c for c in SUMMARY if c != "rows_too_few" or rows[c].any()]
        parts.append(rows[shown].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return "\n".join(parts)


def columns_help() -> str:
    """The epilog of ``linrec measure --help``: every output column, in the table's order, and what it means."""
    import textwrap

    from linrec.core.columns import COLUMNS as MEASURED

    columns = {"model": COLUMNS["model"], **MEASURED, **COLUMNS}
    width = max(map(len, columns))
    lines = [
        textwrap.fill(text, 100, initial_indent=f"  {name:<{width}}  ", subsequent_indent=" " * (width + 4))
        for name, text in columns.items()
    ]
    shown = f"output columns, one row per model and block (the terminal shows {', '.join(SUMMARY)}; --out FILE keeps "
    return textwrap.fill(shown + "every one):", 100) + "\n" + "\n".join(lines)


def version_columns() -> dict[str, str]:
    """The versions that made the table and when (its last columns; see :data:`COLUMNS`)."""
    import datetime

    from linrec.versions import versions

    return {
        **{f"{name}_version": version for name, version in versions().items()},
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
