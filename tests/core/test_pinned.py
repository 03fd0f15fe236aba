"""linrec.core.pinned: copies from a GPU to pinned host memory on a side stream (GPU tests: they skip without CUDA,
and ``make gpu-check`` runs them)."""

from __future__ import annotations

import pytest
import torch

from linrec.core.accumulator import MomentAccumulator
from linrec.core.moments import Moments
from linrec.core.pinned import to_pinned_host
from support.moments import _close, _rows

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
def test_a_copy_lands_whole_though_its_source_is_freed_and_the_stream_goes_on():
    """The source's memory is not reused before the side stream has read it: a tensor allocated right after, and
    written on the compute stream, does not show in the copy."""
    source = torch.arange(1 << 22, dtype=torch.float64, device="cuda")
    expected = source.cpu()
    host = to_pinned_host(source)
    del source
    for _ in range(4):  # the compute stream goes on with work that would take the freed block
        torch.full((1 << 22,), -1.0, dtype=torch.float64, device="cuda").mul_(2)
    torch.cuda.synchronize()
    assert host.is_pinned() and torch.equal(host, expected)


@cuda
@pytest.mark.parametrize("joined", [False, True])
def test_folds_closed_on_a_gpu_are_the_host_s_moments(joined):
    """A fold closed on the GPU goes to pinned host memory on the side stream while the next fold's rows come: after
    a synchronize, both layouts give the host's moments."""
    x, y = _rows(n=900, d_in=48, d_out=32, offset=20.0)
    gpu = MomentAccumulator(48, 32, "cuda", folds=3, joined=joined)
    for fold in range(3):
        gpu.add(x[300 * fold : 300 * (fold + 1)].cuda(), y[300 * fold : 300 * (fold + 1)].cuda(), fold)
        gpu.close(fold)
    torch.cuda.synchronize()
    for fold in range(3):
        m = gpu.moments(fold)
        assert m.cxx.device.type == "cpu" and m.cxx.is_pinned()
        _close(m, Moments.from_rows(x[300 * fold : 300 * (fold + 1)], y[300 * fold : 300 * (fold + 1)], False), 1e-10)
