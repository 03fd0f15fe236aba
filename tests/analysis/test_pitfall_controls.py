"""linrec.analysis.pitfall_controls: Chapter 6 (the pitfall): planted controls, the ways other than conditioning to
fall short."""

from __future__ import annotations

import pytest

from linrec.analysis.pitfall_controls import planted_rows
from support.pitfall import chapter_config, fake_measurement, verdicts


@pytest.mark.slow
def test_an_input_offset_is_not_read_as_conditioning():
    """The issue's false case: κ 1.2 with inputs offset by 30 (against κ 1) defeats raw runs, and centring shows that
    the conditioning has no part in it; κ 1.2 alone leaves no shortfall to explain."""
    offset = fake_measurement(
        {0: planted_rows(0, n=2000, d=8), 1: planted_rows(0.04, n=2000, d=8, input_offset=30)}, "offset"
    )
    found = verdicts({"offset": offset}, chapter_config((1.0, 10.0)), ("sgd", "adam"), ("raw", "centred"))
    for optimizer in ("sgd", "adam"):
        assert found[f"raw baselines fall short ({optimizer})"] == "yes"
        assert found[f"the conditioning causes the gap ({optimizer})"] == "no"
        assert found[f"whitening closes the gap ({optimizer})"] == "untestable"  # no gap on centred inputs
    plain = fake_measurement({0: planted_rows(0.04, n=2000, d=8)}, "plain")
    found = verdicts({"plain": plain}, chapter_config((1.0, 10.0)), ("sgd",), ("raw",))
    assert found["raw baselines fall short (sgd)"] == "no"


@pytest.mark.slow
def test_axis_aligned_conditioning_is_closed_by_standardising():
    """κ 10⁴ along the coordinate axes holds SGD back on centred inputs, and standardising removes it: the
    conditioning is there, but it is not rotated."""
    axis = fake_measurement({0: planted_rows(0, n=2000, d=8), 1: planted_rows(2, n=2000, d=8, rotated=False)}, "axis")
    found = verdicts({"axis": axis}, chapter_config((1.0, 10.0)), ("sgd",), ("centred", "standardised", "whitened"))
    assert found["the conditioning causes the gap (sgd)"] == "yes"
    assert found["standardising does not close it (sgd)"] == "no"
