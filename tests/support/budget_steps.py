"""A planted greedy run under a perplexity budget, for the compression analysis and its figure."""

from __future__ import annotations

import pandas as pd


def budget_steps() -> pd.DataFrame:
    """Two models' greedy steps: "a" keeps two blocks, leaves one out, keeps the next and leaves the last out; "b"
    keeps its only block."""
    rows = [
        ("a", 0, None, 0.0, 10.0, 0.0, True),
        ("a", 1, 3, 0.1, 10.2, 0.2, True),
        ("a", 2, 1, 0.2, 10.4, 0.4, True),
        ("a", 3, 0, 0.3, 11.0, 1.0, False),
        ("a", 4, 5, 0.25, 10.45, 0.45, True),
        ("a", 5, 4, 0.35, 10.9, 0.9, False),
        ("b", 0, None, 0.0, 20.0, 0.0, True),
        ("b", 1, 2, 0.15, 20.5, 0.5, True),
    ]
    table = pd.DataFrame(rows, columns=["model", "step", "block", "model_saved_fraction", "ppl", "delta_ppl", "kept"])
    table["delta_ppl_low"], table["delta_ppl_high"] = table.delta_ppl - 0.1, table.delta_ppl + 0.1
    base = table.groupby("model").ppl.transform("first")
    return table.assign(relative=table.delta_ppl / base)
