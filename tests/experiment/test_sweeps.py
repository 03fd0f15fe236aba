"""linrec.experiment.sweeps: Per-corpus sweeps (chapter 7): the seeded-poly probe and the affine swap on every (model,
corpus), cached."""

from __future__ import annotations

import pandas as pd

from linrec.experiment import measurement as m
from support.measurement_store import SMOKE


def test_a_corpus_sweep_runs_on_one_capture_keeps_only_the_table_and_is_cached(store, tmp_path, monkeypatch):
    """Seeded-poly and swap of one (model, corpus): computed once on a capture held in memory, then read back."""
    from linrec.experiment import sweeps
    from linrec.interventions.probes import ProbeConfig, probe_table

    known, captures = store
    monkeypatch.setattr(sweeps, "profile_corpus", m.profile_corpus)
    swapped = []

    def fake_swaps(profile, measurements, corpus, max_tokens, progress):
        (given,) = measurements
        swapped.append(max_tokens)
        return pd.DataFrame({"block": given.blocks, "delta_ppl": [0.5 * b for b in given.blocks]})

    monkeypatch.setattr(sweeps, "affine_swaps", fake_swaps)
    config = ProbeConfig(rank=2, steps=20, eval_every=5)
    first = sweeps.corpus_sweep(SMOKE, "zoo-gpt2", "stdlib-prose", seeded_poly=config, swap_tokens=64)
    again = sweeps.corpus_sweep(SMOKE, "zoo-gpt2", "stdlib-prose", seeded_poly=config, swap_tokens=64)
    assert captures == ["samples"] and swapped == [64]  # the second call captured and scored nothing
    expected = probe_table(known.samples, known.moments, config=config, progress=False)
    pd.testing.assert_frame_equal(first["probes"].drop(columns=["model", "corpus"]), expected)
    for name in ("probes", "swaps"):
        pd.testing.assert_frame_equal(again[name], first[name])
    (entry,) = (tmp_path / "measurements").glob("smoke-*")
    assert not (entry / "samples.safetensors").exists() and not (entry / "moments.safetensors").exists()
    m.measurement(SMOKE, "zoo-gpt2", keep="table")  # the table was stored by the sweep's capture
    assert captures == ["samples"]
    assert sweeps.corpus_sweep(SMOKE, "zoo-gpt2", "stdlib-prose") == {}
