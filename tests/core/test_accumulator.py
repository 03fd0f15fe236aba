"""linrec.core.accumulator: Streaming (X, Y) rows into float64 moments in place, fold by fold, without keeping the
rows."""

from __future__ import annotations

import pytest
import torch

from linrec.core.accumulator import MomentAccumulator
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from support.moments import _close, _rows


def test_accumulator_matches_moments_in_any_chunking():
    x, y = _rows()
    whole = Moments.from_rows(x, y)
    for full_output in (False, True):
        for chunk in (1, 37, 600):
            acc = MomentAccumulator(7, 5, full_output=full_output)
            for i in range(0, 600, chunk):
                acc.add(x[i : i + chunk], y[i : i + chunk])
            got = acc.moments()
            assert got.full_output == full_output and got.cyy.shape == ((5, 5) if full_output else (5,))
            _close(got, whole, 1e-10)


def test_by_default_only_the_diagonal_of_the_output_products_is_summed():
    """The fit reads Cyy's diagonal alone: the default accumulator keeps it as a vector, equal to the whole matrix's
    diagonal, and a merge with moments that hold Cyy whole keeps the diagonal of the union."""
    x, y = _rows()
    acc = MomentAccumulator(7, 5)
    acc.add(x[:400], y[:400])
    diagonal = acc.moments()
    whole = Moments.from_rows(x[:400], y[:400])
    assert not diagonal.full_output and whole.full_output
    torch.testing.assert_close(diagonal.output_ss, whole.cyy.diagonal(), rtol=1e-12, atol=0)
    union = diagonal + Moments.from_rows(x[400:], y[400:])
    assert not union.full_output
    torch.testing.assert_close(union.output_ss, Moments.from_rows(x, y).cyy.diagonal(), rtol=1e-12, atol=0)


def test_a_closed_fold_keeps_its_moments_frees_its_sums_and_takes_no_more_rows():
    x, y = _rows()
    acc = MomentAccumulator(7, 5, folds=3)
    acc.add(x[:200], y[:200], 0)
    acc.add(x[200:300], y[200:300], 1)
    assert acc.live_folds == [0, 1]
    before = acc.moments(0)
    acc.close(0)
    assert acc.live_folds == [1]
    after = acc.moments(0)
    for f in ("mean_x", "mean_y", "cxx", "cxy", "cyy"):
        assert torch.equal(getattr(after, f), getattr(before, f)), f  # closing computes nothing new
    _close(after, Moments.from_rows(x[:200], y[:200]), 1e-12)
    with pytest.raises(LinrecError, match="fold 0 came after it was closed"):
        acc.add(x[:5], y[:5], 0)
    acc.add(x[300:], y[300:], 1)  # the other folds go on
    acc.close(2)  # a fold that had no rows closes to the moments of no rows
    assert acc.moments(2).n == 0 and acc.live_folds == [1]
    assert bool(acc.finite())
    acc.add(torch.full((3, 7), float("nan")), y[:3], 1)
    acc.close(1)
    assert not bool(acc.finite())  # a closed fold's flag is kept
