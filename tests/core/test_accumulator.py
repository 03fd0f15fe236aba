"""linrec.core.accumulator: Streaming (X, Y) rows into float64 moments in place, fold by fold, without keeping the
rows."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from linrec.core.accumulator import MomentAccumulator, one_product
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


@pytest.mark.parametrize("full_output", [False, True])
def test_the_one_product_layout_gives_the_split_layout_s_moments(full_output):
    """[x | 1 | y]ᵀ [x | 1] in one product: every fold's moments those of the split layout (and of the rows) to
    float64 rounding, in any chunking, from strided views of windows too, with the large offset the shift removes."""
    x, y = _rows(n=640, d_in=24, d_out=16, offset=50.0)
    x32, y32 = x.to(torch.float32), y.to(torch.float32)
    split, joined = (MomentAccumulator(24, 16, folds=3, full_output=full_output, joined=j) for j in (False, True))
    for acc in (split, joined):
        for i, chunk in enumerate((1, 37, 200, 402)):
            start = sum((1, 37, 200, 402)[:i])
            acc.add(x32[start : start + chunk], y32[start : start + chunk], fold=i % 3)
        windows = x32.reshape(-1, 8, 24)[:, 1:], y32.reshape(-1, 8, 16)[:, 1:]  # (the capture's views past the first)
        rows = acc.shifted(*windows)
        acc.add_shifted(rows[:300], fold=2)
        acc.add_shifted(rows.index_select(torch.arange(300, len(rows))), fold=2)
    assert joined.joined and not split.joined
    for fold in range(3):
        _close(joined.moments(fold), split.moments(fold), 1e-11)
    every = torch.cat([x32, windows[0].reshape(-1, 24)]), torch.cat([y32, windows[1].reshape(-1, 16)])
    assert sum(joined.n) == every[0].shape[0]


class _Ops(TorchDispatchMode):
    """The operators dispatched inside it that compute (each a kernel on a GPU), by name; views are left out."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:  # (views launch nothing)
            self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_the_one_product_layout_launches_one_product_where_the_split_one_launches_several():
    x, y = _rows(n=256, d_in=256, d_out=256)
    launched = {}
    for joined in (False, True):
        acc = MomentAccumulator(256, 256, joined=joined)
        acc.add(x[:8], y[:8])  # the shift and the sums are set up
        rows = acc.shifted(x, y)
        with _Ops() as ops:
            acc.add_shifted(rows)
        launched[joined] = ops.names
    products = lambda names: [n for n in names if n in ("aten.addmm_", "aten.addmm", "aten.mm")]  # noqa: E731
    assert len(products(launched[True])) == 1 and len(products(launched[False])) == 5  # 4 triangle pieces and XᵀY
    assert len(launched[True]) <= 4 < 10 <= len(launched[False])


def test_which_layout_a_capture_takes():
    """On a GPU, float64 products of narrow blocks take one product; wide blocks, other schemes and the CPU the split
    layout; the one-product layout multiplies in float64 only."""
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    assert one_product(gpu, 768, 768) and one_product(gpu, 1023, 1024)
    assert not one_product(gpu, 1024, 1024) and not one_product(gpu, 4096, 4096)
    assert not one_product(gpu, 768, 768, "float32") and not one_product(cpu, 64, 64)
    assert not MomentAccumulator(64, 64).joined
    with pytest.raises(ValueError, match="one-product layout multiplies in float64"):
        MomentAccumulator(64, 64, products="ozaki:4", joined=True)
