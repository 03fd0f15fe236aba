"""What the ``linrec`` commands share: the help format, argparse types, and checking and writing ``--out`` tables.

One home for these keeps each command's module down to its own parser and handler.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from linrec.errors import LinrecError
from linrec.files import check_new_file, remove_stale_temporaries, write_atomically


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends an option's default to its help, except where it has none (None, or an unset flag)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def positive_int(value: str) -> int:
    """argparse type: a positive integer."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got '{value}'")
    return int(value)


def seed(value: str) -> int:
    """argparse type of ``--seed``: an integer a torch generator takes (:func:`linrec.data.tokens.check_seed`),
    checked when the options are read, not after the model loads."""
    from linrec.data.tokens import check_seed

    try:
        return check_seed(int(value))
    except ValueError as err:  # int()'s, or check_seed's LinrecError
        raise argparse.ArgumentTypeError(
            str(err) if isinstance(err, LinrecError) else f"not an integer: '{value}'"
        ) from None


def block_indices(value: str) -> list[int]:
    """argparse type of ``--blocks``: comma-separated block indices."""
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--blocks takes comma-separated block indices like 0,3,5; got '{value}'"
        ) from None


def check_output(path: Path, option: str = "--out") -> None:
    """Fail before the work when the table could not be written to ``path``: a wrong suffix, a directory in its
    place, or a place where a file cannot be created and written (tried: :func:`linrec.files.check_new_file`);
    temporaries that a killed run left beside it are removed."""
    if os.path.isdir(path):  # False, not an error, for a name too long: check_new_file reports that
        raise LinrecError(f"{option} {path} is a directory; give a file in it, e.g. {path / 'table.csv'}")
    if path.suffix not in (".csv", ".json"):
        raise LinrecError(f"{option} must end in .csv or .json; got '{path}'")
    check_new_file(path, option)
    remove_stale_temporaries(path)


def write_table(table: pd.DataFrame, path: Path) -> None:
    """Write ``table`` as JSON records for a .json suffix, else as CSV (full float precision), whole or not at all
    (:func:`linrec.files.write_atomically`)."""
    if path.suffix == ".json":
        write_atomically(path, lambda file: table.to_json(file, orient="records", indent=1, double_precision=15))
    else:
        write_atomically(path, lambda file: table.to_csv(file, index=False, float_format="%.17g"))
