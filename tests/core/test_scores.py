"""The score columns of a block's row (linrec.core.scores): what is unknown stays NaN, what needs R²_lin uses it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from linrec.core.scores import COLUMNS, StreamScores, cheapest_first, score_columns
from linrec.errors import LinrecError


def scores(spread: float) -> StreamScores:
    return StreamScores(rows=10, block_influence=0.1, angular_distance=0.2, ffn_block_influence=0.03,
                        ffn_angular_distance=0.04, output_energy=0.5, output_spread=spread, layer_linearity=0.9,
                        layer_linearity_in_sample=0.95, sample_rows=10)  # fmt: skip


def test_unknown_scores_are_nan_in_every_column():
    assert list(score_columns(None, 0.5)) == list(COLUMNS)
    assert all(math.isnan(v) for v in score_columns(None, 0.5).values())


def test_the_unexplained_energy_is_the_share_r2_leaves_of_the_spread():
    row = score_columns(scores(0.4), r2_lin=0.75)
    assert row["unexplained_energy"] == pytest.approx(0.1)
    assert row["output_energy"] == 0.5 and row["layer_linearity_in_sample"] == 0.95


def test_a_block_with_no_spread_leaves_nothing_unexplained_whatever_its_r2():
    assert score_columns(scores(0.0), r2_lin=math.nan)["unexplained_energy"] == 0
    assert math.isnan(score_columns(scores(0.4), r2_lin=math.nan)["unexplained_energy"])


def test_cheapest_first_reads_each_score_its_own_way():
    table = pd.DataFrame({"block": [0, 1, 2, 3], "r2_lin": [0.5, 0.9, math.nan, 0.9],
                          "block_influence": [0.3, 0.1, 0.2, 0.05]})  # fmt: skip
    assert cheapest_first(table, "r2_lin") == [1, 3, 0, 2]  # the highest R² first, ties in depth order, NaN last
    assert cheapest_first(table, "block_influence") == [3, 1, 2, 0]
    with pytest.raises(LinrecError, match="unknown score 'ppl'"):
        cheapest_first(table, "ppl")
    with pytest.raises(LinrecError, match="holds no output_energy"):
        cheapest_first(table.assign(output_energy=math.nan), "output_energy")
