"""linrec.analysis.pitfall_claims: Chapter 6 (the pitfall): the claims about trained linear baselines, each against
this run."""

from __future__ import annotations

import pandas as pd

from linrec.analysis.pitfall import (
    reach_table,
)
from linrec.analysis.pitfall_claims import pitfall_claims


def test_reach_table_cells_and_claims_without_best_blocks():
    runs = pd.DataFrame(
        {
            "model": ["m"] * 4,
            "block": [3, 3, 3, 3],
            "role": ["worst-conditioned"] * 4,
            "input_condition": [1e4] * 4,
            "optimizer": ["adam"] * 4,
            "inputs": ["raw", "whitened", "whitened", "centred"],
            "tuned": [True, True, False, True],
            "gap_final": [0.3, 0.4, 0.0, 0.3],
            "status": ["diverged", "reached", "reached", "not within budget"],
            "steps_to_ceiling": [None, 125, 5, None],
            "seconds_to_ceiling": [None, 0.5, 0.01, None],
        }
    )
    reach = reach_table(runs).iloc[0]
    assert reach["adam, raw"] == "diverged (gap 0.3)" and reach["adam, whitened"] == "125 steps, 0.50 s"
    claims = {c.claim: c for c in pitfall_claims(runs)}
    assert claims["raw baselines fall short (adam)"].verdict == "yes"
    cause = claims["the conditioning causes the gap (adam)"]  # no best-conditioned block: never against a NaN
    assert cause.verdict == "untestable" and "no model has a best-conditioned block" in cause.measured
    assert claims["whitening closes the gap (adam)"].verdict == "no"  # the tuned 0.4 is not within 0.01
    unclosed = claims["standardising does not close it (adam)"]  # whitening does not close it: no conditioning
    assert unclosed.verdict == "untestable" and "whitening closes" in unclosed.measured
    whitened = claims["whitening closes the gap (adam)"]
    assert (whitened.value, whitened.interval) == (0.4, (0.4, 0.4)) and "coverage" in whitened.note
    closes = runs.assign(gap_final=[0.3, 0.005, 0.0, 0.3])
    claims = {c.claim: c for c in pitfall_claims(closes)}
    assert claims["whitening closes the gap (adam)"].verdict == "yes"
    missing = claims["standardising does not close it (adam)"]
    assert missing.verdict == "untestable" and "no standardised-input runs" in missing.measured
