"""linrec.analysis.corpora: Chapter 7: do a model's depth profiles on different corpora overlay?"""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.analysis.corpora import corpus_claims, corpus_summary
from linrec.errors import LinrecError
from support.tiny_captures import planted


def test_corpus_summary():
    same = pd.concat([planted({("m", "final"): [0.9, 0.5, 0.7]}, corpus=c) for c in ("a", "b", "c")])
    s = corpus_summary(same).iloc[0]
    assert (
        s["corpus_spread_max"] == 0 and s["spearman_min"] == pytest.approx(1) and s["depth_range"] == pytest.approx(0.4)
    )
    shifted = pd.concat(
        [planted({("m", "final"): [0.9, 0.5, 0.7]}, corpus="a"), planted({("m", "final"): [0.8, 0.4, 0.6]}, corpus="b")]
    )
    s = corpus_summary(shifted).iloc[0]
    assert s["corpus_spread_mean"] == pytest.approx(0.1) and s["spread_to_range"] == pytest.approx(0.25)
    assert s["spearman_min"] == pytest.approx(1)  # a shift keeps the order of the blocks
    with pytest.raises(LinrecError, match="one corpus"):
        corpus_summary(planted({("m", "final"): [0.9, 0.5]}))


def test_corpus_claims_overlay_only_when_the_corpus_moves_blocks_less_than_depth():
    close = pd.concat(
        [
            planted({("m", "final"): [0.9, 0.5, 0.7]}, corpus="a"),
            planted({("m", "final"): [0.88, 0.5, 0.7]}, corpus="b"),
        ]
    )
    far = pd.concat(
        [planted({("m", "final"): [0.9, 0.5, 0.7]}, corpus="a"), planted({("m", "final"): [0.5, 0.9, 0.3]}, corpus="b")]
    )
    (overlay, largest) = corpus_claims(corpus_summary(close))
    assert overlay.verdict.value == "yes" and overlay.value == pytest.approx(
        0.02 / 3 / 0.39
    )  # depth range averaged over corpora
    assert largest.verdict is None and largest.value == pytest.approx(0.02)
    assert corpus_claims(corpus_summary(far))[0].verdict.value == "no"  # the corpus reorders the blocks
