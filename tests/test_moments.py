"""Moments: merging, streaming, precision, persistence."""

import pytest
import torch
from safetensors.torch import load_file, save_file

from linrec.core.accumulator import MomentAccumulator
from linrec.core.moment_files import load_moments, save_moments
from linrec.core.moments import Moments, merge_folds
from linrec.errors import LinrecError


def _rows(n=600, d_in=7, d_out=5, seed=0, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    x = (
        torch.randn(n, d_in, generator=g, dtype=torch.float64) * torch.linspace(0.1, 30, d_in, dtype=torch.float64)
        + offset
    )
    y = x @ torch.randn(d_in, d_out, generator=g, dtype=torch.float64) + torch.randn(
        n, d_out, generator=g, dtype=torch.float64
    )
    return x, y


def _close(a: Moments, b: Moments, tol: float) -> None:
    assert a.n == b.n
    for f in ("mean_x", "mean_y", "cxx", "cxy", "cyy"):
        ta, tb = getattr(a, f), getattr(b, f)
        assert torch.allclose(ta, tb, rtol=tol, atol=tol * tb.abs().max().item()), f


def test_matches_direct_computation():
    x, y = _rows()
    m = Moments.from_rows(x, y)
    xc, yc = x - x.mean(0), y - y.mean(0)
    assert torch.allclose(m.cxx, xc.T @ xc) and torch.allclose(m.cxy, xc.T @ yc) and torch.allclose(m.cyy, yc.T @ yc)


def test_split_stream_merges_to_whole_stream():
    x, y = _rows()
    whole = Moments.from_rows(x, y)
    parts = [Moments.from_rows(x[a:b], y[a:b]) for a, b in [(0, 1), (1, 250), (250, 251), (251, 600)]]
    _close(merge_folds(parts), whole, 1e-12)
    _close(Moments.zeros(7, 5) + whole, whole, 0)
    _close(whole + Moments.zeros(7, 5), whole, 0)


def test_accumulator_matches_moments_in_any_chunking():
    x, y = _rows()
    whole = Moments.from_rows(x, y)
    for chunk in (1, 37, 600):
        acc = MomentAccumulator(7, 5)
        for i in range(0, 600, chunk):
            acc.add(x[i : i + chunk], y[i : i + chunk])
        _close(acc.moments(), whole, 1e-10)


def test_large_offset_does_not_cancel():
    """Rows far from the origin (like GPT-2's outlier dims) keep a precise covariance."""
    x, y = _rows()
    far_x, far_y = _rows(offset=1e7)
    acc = MomentAccumulator(7, 5)
    for i in range(0, 600, 64):
        acc.add(far_x[i : i + 64], far_y[i : i + 64])
    merged = merge_folds([Moments.from_rows(far_x[i : i + 64], far_y[i : i + 64]) for i in range(0, 600, 64)])
    reference = Moments.from_rows(x, y)  # same data without the offset (x shifts exactly; y by offset @ A)

    def worst_variance_error(cxx):
        return (cxx.diagonal() / reference.cxx.diagonal() - 1).abs().max()

    for m in (acc.moments(), merged):
        assert worst_variance_error(m.cxx) <= 1e-8
    # the textbook raw-sum formula gets the smallest variance badly wrong at this offset
    naive = far_x.T @ far_x - 600 * torch.outer(far_x.mean(0), far_x.mean(0))
    assert worst_variance_error(naive) > 0.1


def test_float32_rows_are_accumulated_in_float64():
    x, y = _rows()
    acc = MomentAccumulator(7, 5)
    acc.add(x.float(), y.float())
    m = acc.moments()
    assert m.cxx.dtype == torch.float64
    _close(m, Moments.from_rows(x.float().double(), y.float().double()), 1e-10)


def test_save_load_and_flat_round_trip(tmp_path):
    x, y = _rows()
    moments = {
        0: [Moments.from_rows(x[:300], y[:300]), Moments.from_rows(x[300:], y[300:])],
        3: [Moments.zeros(7, 5)] * 2,
    }
    save_moments(moments, tmp_path / "m.safetensors", {"model": "test"})
    loaded = load_moments(tmp_path / "m.safetensors")
    assert sorted(loaded) == [0, 3] and len(loaded[0]) == 2
    for a, b in zip(loaded[0], moments[0]):
        _close(a, b, 0)
    m = moments[0][0]
    _close(Moments.from_flat(m.flat(), 7, 5), m, 0)
    wide = Moments.from_rows(torch.randn(9, 4, dtype=torch.float64), torch.randn(9, 2, dtype=torch.float64))
    _close(Moments.from_packed(9, wide.packed(), 4, 2), wide, 0)  # the count stays on the host


def test_symmetric_moments_are_saved_as_triangles_and_files_of_whole_matrices_still_load(tmp_path):
    x, y = _rows()
    m = Moments.from_rows(x, y)
    save_moments({0: [m]}, tmp_path / "m.safetensors")
    stored = load_file(str(tmp_path / "m.safetensors"))
    assert stored["0.0.cxx_upper"].numel() == 7 * 8 // 2 and stored["0.0.cyy_upper"].numel() == 5 * 6 // 2
    assert "0.0.cxx" not in stored and stored["0.0.cxy"].shape == (7, 5)
    back = load_moments(tmp_path / "m.safetensors")[0][0]
    assert torch.equal(back.cxx, m.cxx) and torch.equal(back.cyy, m.cyy)  # bit for bit
    whole = {f"0.0.{k}": getattr(m, k) for k in ("mean_x", "mean_y", "cxx", "cxy", "cyy")}
    save_file({**whole, "0.0.n": torch.tensor([m.n])}, str(tmp_path / "old.safetensors"))
    _close(load_moments(tmp_path / "old.safetensors")[0][0], m, 0)


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
