"""How a cache entry is read back: its tables from JSON that keeps every bit, and its moments and row samples
from disk one block at a time, never held.

A measurement's entry (:mod:`linrec.experiment.measurement`) and a cached result's
(:mod:`linrec.experiment.results`) store their tables with :func:`write_frame`. A measurement returned from the
cache reads its moments and samples through :class:`OnDisk`, which refuses an entry changed since it was opened
(:func:`linrec.cache.intact`), so holding many measurements costs little more than their tables; what an entry
did not keep is a :class:`NotKept`, which says how to ask for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import NoReturn, TypeVar

import pandas as pd

from linrec.cache import intact
from linrec.core.moment_files import saved_blocks
from linrec.errors import LinrecError


def write_frame(table: pd.DataFrame, path: Path) -> None:
    """Write a table as JSON, column by column: floats keep every bit (JSON writes their shortest exact repr), and a
    missing value of a nullable column (pandas' NA) is written as null."""
    path.write_text(json.dumps({c: [None if v is pd.NA else v for v in table[c].tolist()] for c in table.columns}))


def read_frame(path: Path) -> pd.DataFrame:
    """Read what :func:`write_frame` wrote."""
    return pd.DataFrame(json.loads(path.read_text()))


_V = TypeVar("_V")


class OnDisk(Mapping[int, _V]):
    """Block -> value of one safetensors file, read from disk at each access and not kept."""

    def __init__(self, path: Path, read: Callable[[Path, list[int]], dict[int, _V]]) -> None:
        self._path, self._read, self._blocks = path, read, saved_blocks(path)

    def __getitem__(self, block: int) -> _V:
        if block not in self._blocks:
            raise KeyError(f"block {block} is not in {self._path.name}, which holds blocks {self._blocks}")
        if not intact(self._path.parent):  # a changed byte is never served (cheap while the files are unchanged)
            raise LinrecError(
                f"the cache entry {self._path.parent} changed on disk after it was opened; "
                "ask for the measurement again to capture it afresh"
            )
        return self._read(self._path, [block])[block]

    def __iter__(self) -> Iterator[int]:
        return iter(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)


class NotKept(Mapping[int, NoReturn]):
    """What a measurement did not keep: any use says how to ask for it."""

    def __init__(self, measured: str, kept: str, wanted: str) -> None:
        """``measured``: what the measurement is of, as its message names it; ``kept``: what it kept instead."""
        self._message = (
            f"the measurement of {measured} kept only its "
            f"{kept}, not its {wanted}; ask for them with measurement(..., keep='{wanted}')"
        )

    def __getitem__(self, block: int) -> NoReturn:
        raise LinrecError(self._message)

    def __iter__(self) -> Iterator[int]:
        raise LinrecError(self._message)

    def __len__(self) -> int:
        raise LinrecError(self._message)
