"""linrec.experiment.results: result tables computed once per description of what decides them, then read back."""

from __future__ import annotations

import types
from dataclasses import make_dataclass

import pandas as pd
import pandas.testing as pdt

from linrec.experiment.results import cached_frames, measurement_identity


def test_tables_are_computed_once_per_content_and_read_back_equal(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"runs": pd.DataFrame({"block": [0, 1], "gap": [0.25, -1.5e-9]}), "meta": pd.DataFrame({"n": [3]})}

    first = cached_frames("toy", {"model": "m", "seed": 0}, compute)
    again = cached_frames("toy", {"model": "m", "seed": 0}, compute)
    assert len(calls) == 1 and set(first) == {"runs", "meta"}
    for name in first:
        pdt.assert_frame_equal(first[name], again[name])
    pdt.assert_frame_equal(first["runs"], compute()["runs"])
    cached_frames("toy", {"model": "m", "seed": 1}, compute)  # another seed: computed again
    assert len(calls) == 3


def test_a_measurements_identity_is_its_provenance_without_the_capture_time():
    Info = make_dataclass("Info", ["model", "rows", "capture_s"])
    m = types.SimpleNamespace(info=Info("zoo-gpt2", 1024, 12.5))
    assert measurement_identity(m) == {"model": "zoo-gpt2", "rows": 1024}
