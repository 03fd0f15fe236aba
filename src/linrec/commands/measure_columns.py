"""What each column of a ``linrec measure`` table means, and the columns that say which releases made it and when.

The table's columns are :data:`linrec.core.fit.COLUMNS` (the measured ones) and :data:`COLUMNS` (where each number
comes from); ``linrec measure --help`` lists them all (:func:`columns_help`).
"""

from __future__ import annotations

COLUMNS = {
    "model": "the model as given: --model, or the profile's name for it",
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
    "linrec_version": "linrec that measured",
    "torch_version": "torch that ran the forward pass",
    "transformers_version": "transformers that built the model",
    "measured_at": "when the table was made (UTC, ISO 8601)",
}
"""The columns ``linrec measure`` adds to :data:`linrec.core.fit.COLUMNS`: where each number comes from."""


def columns_help() -> str:
    """The epilog of ``linrec measure --help``: every output column, in the table's order, and what it means."""
    import textwrap

    from linrec.core.fit import COLUMNS as MEASURED

    columns = {"model": COLUMNS["model"], **MEASURED, **COLUMNS}
    width = max(map(len, columns))
    lines = [
        textwrap.fill(text, 100, initial_indent=f"  {name:<{width}}  ", subsequent_indent=" " * (width + 4))
        for name, text in columns.items()
    ]
    return "output columns, one row per model and block (the printed table leaves out revision, corpus_sha256,\n" + (
        "r2_lin_folds, r2_lin_after_first_folds and the versions; a path prints as its last part):\n" + "\n".join(lines)
    )


def version_columns() -> dict[str, str]:
    """The versions that made the table and when (its last columns; see :data:`COLUMNS`)."""
    import datetime

    from linrec.versions import versions

    return {
        **{f"{name}_version": version for name, version in versions().items()},
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
