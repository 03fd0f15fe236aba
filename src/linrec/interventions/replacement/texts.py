"""Which text (and which part of it) fitted a replacement's maps or scored them, as its record names it.

Its own module, free of torch, so that ``linrec replace`` reads and checks its texts before torch loads (a second).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TextPart:
    """Which text (and which part of it) fitted the maps or scored them, for the record."""

    name: str  # a corpus name or a file path
    part: str  # which part of it, in words
    sha256: str  # of that part's text (UTF-8)
