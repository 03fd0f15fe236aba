"""What the ``linrec`` commands share: the help format, argparse types, and checking and writing ``--out`` tables.

One home for these keeps each command's module down to its own parser and handler.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from linrec.errors import LinrecError


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


def block_indices(value: str) -> list[int]:
    """argparse type of ``--blocks``: comma-separated block indices."""
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--blocks takes comma-separated block indices like 0,3,5; got '{value}'"
        ) from None


def check_output(path: Path, option: str = "--out") -> None:
    """Fail before the work when the table could not be written to ``path``: a wrong suffix, a
    directory in its place, or no directory it could be created in with write access."""
    if path.is_dir():
        raise LinrecError(f"{option} {path} is a directory; give a file in it, e.g. {path / 'table.csv'}")
    if path.suffix not in (".csv", ".json"):
        raise LinrecError(f"{option} must end in .csv or .json; got '{path}'")
    existing = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not existing.is_dir():
        raise LinrecError(f"cannot write {option} {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise LinrecError(
            f"cannot write {option} {path}: no write permission in {existing.resolve()}; choose another place"
        )


def write_table(table: pd.DataFrame, path: Path) -> None:
    """Write ``table`` as JSON records for a .json suffix, else as CSV (full float precision).

    The table goes to a temporary file beside ``path`` that is renamed into place, so an
    interrupted write never leaves a partial table under the final name.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            table.to_json(tmp, orient="records", indent=1, double_precision=15)
        else:
            table.to_csv(tmp, index=False, float_format="%.17g")
        os.replace(tmp, path)
    except OSError as err:
        raise LinrecError(f"could not write {path}: {err}") from err
    finally:
        if tmp.exists():
            tmp.unlink()
