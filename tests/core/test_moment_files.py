"""linrec.core.moment_files: Moments on disk: per-block, per-fold :class:`linrec.core.moments.Moments` in safetensors
files."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import tiny_model
from linrec.core.measure import Measurement
from linrec.core.moment_files import load_moments, save_moments
from linrec.core.moments import Moments
from support.moments import _close, _rows


def test_spilled_folds_are_the_same_moments_and_table_and_leave_memory_for_disk(measured, batches, tmp_path):
    spilled = Measurement.capture(tiny_model("gpt2"), batches, folds=4, progress=False, spill=tmp_path)
    later = spilled.positions.later
    assert not isinstance(later, dict) and len(list(tmp_path.glob(".linrec-spill-*/*.safetensors"))) == 4 * len(later)
    pd.testing.assert_frame_equal(spilled.table(), measured.table())  # every column, to the last bit
    for block in measured.blocks:
        for a, b in zip(later[block], measured.positions.later[block], strict=True):
            assert a.n == b.n and all(
                torch.equal(getattr(a, f), getattr(b, f)) for f in ("mean_x", "cxx", "cxy", "cyy")
            )
    for a, b in zip(spilled.fits().values(), measured.fits().values(), strict=True):
        assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    saved = Measurement.load(spilled.save(tmp_path / "saved"))
    pd.testing.assert_frame_equal(saved.table(), measured.table())
    later.remove()
    assert not list(tmp_path.glob(".linrec-spill-*"))
    with pytest.raises(KeyError):
        later[measured.blocks[0]]


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
