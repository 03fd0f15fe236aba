"""linrec.analysis.scale: Across scale: how a model's profile of R²_lin over its blocks changes with the model's size
(the chapter ``10_scale``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from linrec import LinrecError
from linrec.analysis import scale
from linrec.experiment.profiles import PROFILES, PYTHIA_LARGE, PYTHIA_SUITE, SCALE_DEPTHS, depth_blocks
from linrec.report.claims import Verdict
from support.scale import PARAMS, planted


def test_the_summary_reads_each_profile_against_numpy():
    table = planted({"large": 0.6, "small": 0.5}, {"small": 0.1, "large": 0.1})
    summary = scale.scale_summary(table, PARAMS)
    assert list(summary.model) == ["small", "large"]  # smallest first, whatever the table's order
    large = table[table.model == "large"].sort_values("block")
    row = summary.iloc[1]
    q1, q3 = np.percentile(large.r2_lin, [25, 75])
    assert row.r2_sd == pytest.approx(np.std(large.r2_lin))
    assert row.r2_iqr == pytest.approx(q3 - q1) and row.r2_range == pytest.approx(0.6)
    assert row.max_jump == pytest.approx(np.abs(np.diff(large.r2_lin)).max())
    assert row.rows_per_dim == 80 and row.r2_half_rows_gap == pytest.approx(0.02)
    assert table[table.model == "small"].depth.tolist() == pytest.approx([b / 23 for b in range(24)])
    with pytest.raises(LinrecError, match="no parameter count"):
        scale.scale_summary(table, {"small": 1})


def test_heterogeneity_persists_when_the_largest_keeps_the_spread_and_fails_when_it_goes_uniform():
    kept = scale.scale_claims(planted({"small": 0.5, "mid": 0.5, "large": 0.5}, dict.fromkeys(PARAMS, 0.1)), PARAMS)
    flat = scale.scale_claims(planted({"small": 0.5, "mid": 0.3, "large": 0.02}, dict.fromkeys(PARAMS, 0.1)), PARAMS)
    assert kept[0].verdict is Verdict.YES and kept[0].interval[0] >= scale.KEEPS and "large" in kept[0].measured
    assert flat[0].verdict is Verdict.NO and flat[0].interval[1] < scale.KEEPS
    assert kept[0].value == pytest.approx(1.0)
    assert "0.5" in kept[0].rule


@pytest.mark.parametrize(("shares", "verdict", "word"), [
    ({"small": 0.05, "mid": 0.15, "large": 0.25}, Verdict.YES, "grows"),
    ({"small": 0.25, "mid": 0.15, "large": 0.05}, Verdict.YES, "shrinks"),
    ({"small": 0.1, "mid": 0.1, "large": 0.1}, Verdict.NO, "no resolved trend"),
])  # fmt: skip
def test_the_sink_claim_finds_a_planted_trend_and_none_where_there_is_none(shares, verdict, word):
    claim = scale.scale_claims(planted(dict.fromkeys(PARAMS, 0.5), shares), PARAMS)[1]
    assert claim.verdict is verdict and word in claim.measured
    if word != "no resolved trend":
        assert claim.value == pytest.approx(0.1 / 1.5 * (1 if word == "grows" else -1), rel=0.1)  # per decade


def test_one_size_is_untestable_and_a_slope_needs_two_sizes():
    table = planted({"small": 0.5, "mid": 0.4}, {"small": 0.1, "mid": 0.2})
    same = {"small": 10**6, "mid": 10**6}
    assert [c.verdict for c in scale.scale_claims(table, same)] == [Verdict.UNTESTABLE] * 2
    with pytest.raises(LinrecError, match="two sizes"):
        scale.size_slope(table, same, "first_position_share")
    without = table.assign(first_position_share=np.nan)  # the first position not kept apart
    assert scale.scale_claims(without, PARAMS)[1].verdict is Verdict.UNTESTABLE


def test_the_slope_is_least_squares_on_log_parameters_and_its_interval_is_seeded():
    table = planted(dict.fromkeys(PARAMS, 0.5), {"small": 0.0, "mid": 0.2, "large": 0.3})
    slope, interval = scale.size_slope(table, PARAMS, "first_position_share", seed=3)
    medians = [table[table.model == m].first_position_share.median() for m in PARAMS]
    assert slope == pytest.approx(np.polyfit([6, 8, 9], medians, 1)[0])
    assert interval == scale.size_slope(table, PARAMS, "first_position_share", seed=3)[1]
    assert interval[0] <= slope <= interval[1]


def test_fixed_depths_pick_the_same_places_in_models_of_any_depth():
    assert depth_blocks(28, SCALE_DEPTHS) == [0, 7, 14, 20, 27]
    assert depth_blocks(3, SCALE_DEPTHS) == [0, 1, 2] and depth_blocks(1, SCALE_DEPTHS) == [0]
    swaps = pd.DataFrame({"model": ["a"] * 28 + ["b"] * 3, "block": [*range(28), *range(3)], "relative": 0.0})
    kept = scale.at_fixed_depths(swaps, {"a": 28, "b": 3}, SCALE_DEPTHS)
    assert kept[kept.model == "a"].block.tolist() == [0, 7, 14, 20, 27]
    assert kept[kept.model == "a"].depth.tolist() == list(SCALE_DEPTHS)
    assert kept[kept.model == "b"].depth.tolist() == [0.0, 0.5, 0.75]  # two depths on one block: the first named


def test_the_series_takes_the_larger_models_by_default_only_where_cuda_is_present(monkeypatch):
    for cuda, models in ((False, PYTHIA_SUITE), (True, PYTHIA_SUITE + PYTHIA_LARGE)):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        assert PROFILES["paper"].series_profile().models == models
