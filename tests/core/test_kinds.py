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


@pytest.mark.parametrize(
    ("text", "rule", "routed", "canonical"),
    [
        ("gated:norm:0.9", "norm", 0.9, "gated:norm:0.9"),
        ("gated:logistic:90%", "logistic", 0.9, "gated:logistic:0.9"),
        ("gated:norm:0", "norm", 0.0, "gated:norm:0"),
        ("gated:norm:1", "norm", 1.0, "gated:norm:1"),
        ("gated:logistic:100%", "logistic", 1.0, "gated:logistic:1"),
        ("gated:norm:0.25", "norm", 0.25, "gated:norm:0.25"),
        ("gated:norm:0.9999999", "norm", 0.9999999, "gated:norm:0.9999999"),  # (not rounded to share 1)
    ],
)
def test_gated_kinds_parse_and_print_canonically(text, rule, routed, canonical):
    kind = Kind.parse(text)
    assert kind == Kind("gated", rule=rule, routed=routed)
    assert (kind.rank, kind.share, kind.first) == (None, None, None)
    assert str(kind) == canonical and Kind.parse(str(kind)) == kind


def test_gated_first_is_the_first_position_apart_with_the_blocks_own_output():
    assert Kind.parse("gated:first") == Kind("first-apart", first="own") == Kind.parse("first-apart:own")
    assert str(Kind.parse("gated:first")) == "first-apart:own"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gated", "'gated' names no gate"),
        ("gated:", "names no gate"),
        ("gated:foo:0.5", "'gated:foo:0.5' names no gate: write gated:RULE:SHARE with RULE one of norm, logistic"),
        ("gated:norm", "names no gate"),
        ("gated:norm:", "names no gate"),
        ("gated:first:0.5", "names no gate"),
        ("gated:norm:1.5", "the share of 'gated:norm:1.5' must be a fraction from 0 to 1"),
        ("gated:norm:-0.1", "must be a fraction from 0 to 1"),
        ("gated:norm:101%", "must be a fraction from 0 to 1"),
        ("gated:norm:abc", "must be a fraction from 0 to 1"),
        ("gated:norm:nan", "must be a fraction from 0 to 1"),
        ("gated:norm:0.5:0.5", "must be a fraction from 0 to 1"),
    ],
)
def test_bad_gated_kinds_are_refused(text, message):
    with pytest.raises(LinrecError, match=message):
        Kind.parse(text)


def test_a_measurement_refuses_a_gated_kind(measured):
    for kind in ("gated:norm:0.9", "gated:logistic:50%"):
        with pytest.raises(LinrecError, match=r"fitted on the rows its gate routes.*linrec\.gated_replacements"):
            measured.replacements(kind)
    assert sorted(measured.replacements("gated:first")) == [0, 1]  # (first-apart:own: a measurement fits it)
