"""linrec.core.kinds: Replacement kinds as the command line names them: what each kind is, read and checked."""

from __future__ import annotations

import pytest

from linrec.core.kinds import Kind
from linrec.errors import LinrecError
from support.cli import heavy_imports


def test_kinds_are_read_without_torch():
    assert heavy_imports("linrec.core.kinds") == []


def test_low_rank_budgets_parse_resolve_and_refuse():
    kind = Kind.parse("lowrank:25%")
    assert (kind.share, str(kind)) == (0.25, "lowrank:25%")
    assert kind.within(3 * 576 * 1536, 576, 576) == Kind("lowrank", 575)  # 575·1152 + 576 ≤ 25 %, capped at d - 1
    assert Kind.parse("lowrank:5%").within(3 * 576 * 1536, 576, 576) == Kind("lowrank", 114)
    assert Kind.parse("affine").within(10, 4, 4) == Kind("affine")
    for bad in ("lowrank:0%", "lowrank:100%", "lowrank:x%", "lowrank:nan%"):
        with pytest.raises(LinrecError, match="must be a number of percent"):
            Kind.parse(bad)
    with pytest.raises(LinrecError, match="leaves no rank: a rank-1 map stores 1728 numbers"):
        Kind.parse("lowrank:0.01%").within(3 * 576 * 1536, 576, 576)
