"""linrec.interventions.replacement.texts: Which text (and which part of it) fitted a replacement's maps or scored
them, as its record names it."""

from __future__ import annotations

import dataclasses

import pytest

from linrec.interventions.replacement.texts import TextPart
from support.cli import heavy_imports


def test_a_text_part_is_a_fixed_record_read_without_torch():
    part = TextPart("notes.txt", "its first 80 characters (lines 1 to 3)", "ab" * 32)
    assert dataclasses.asdict(part) == {"name": "notes.txt", "part": part.part, "sha256": "ab" * 32}
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.name = "other.txt"  # type: ignore[misc]
    assert heavy_imports("linrec.interventions.replacement.texts") == []
