"""linrec.core.cost (``linrec bench``): every path on the same batches, the overhead split into its parts, honest
settings."""

from __future__ import annotations

import pytest
import torch

import linrec.core.cost as bench
from linrec.errors import LinrecError
from linrec.models import shapes


@pytest.fixture
def tiny_shape(monkeypatch):
    config = {"model_type": "gpt2", "n_layer": 3, "n_embd": 32, "n_head": 4, "vocab_size": 200, "n_positions": 64}
    monkeypatch.setitem(shapes.BENCH_SHAPES, "tiny", config)
    return "tiny"


def test_the_table_splits_the_overhead_and_names_its_settings(tiny_shape):
    table = bench.run_bench("cpu", n_batches=3, batch_size=3, seq_len=16, peak_tokens=(), shape=tiny_shape)
    by = table.set_index("measure")
    truncated = by.loc["truncated forward (stops after the deepest block)"]
    assert truncated.vs_truncated == 1 and truncated.vs_full == pytest.approx(1 / by.loc[by.index[0]].vs_truncated)
    for part in ("capture, null sink", "moments alone", "forward + capture + moments"):
        assert any(m.startswith(part) for m in by.index), part
    assert by.loc["finalisation of the moments, once per run"].unit == "s"
    assert by.loc["host syncs per batch added by capture + moments"].value == 0
    assert set(table.tokens_timed) == {3 * 3 * 16} and set(table.batch) == {"3 × 16"}
    assert set(table.dtype) == {"float32"} and all("float32 precision" in t for t in table.tf32)


def test_the_truncated_forward_never_reaches_the_lm_head(tiny_shape):
    model = bench.shaped_model(tiny_shape, torch.device("cpu"))
    calls = []
    model.lm_head.register_forward_hook(lambda *a: calls.append(1))
    batches = bench.random_batches(5 * 16, 5, 16, 200)
    bench.forward(model, batches, truncated=True)
    assert calls == []
    bench.forward(model, batches)
    assert calls == [1]


def test_moments_alone_do_the_capture_arithmetic_for_every_block(tiny_shape):
    model = bench.shaped_model(tiny_shape, torch.device("cpu"))
    batches = bench.random_batches(10 * 16, 4, 16, 200)
    sink = bench.moments_alone(model, batches)()
    assert sorted(sink.accumulators) == [0, 1, 2]
    for acc in sink.accumulators.values():  # the first position of each window is kept apart, as in a capture
        assert sum(acc.n) == 10 * 15 and len(acc.live_folds) == 1  # the finished folds were closed
    assert [m.d_in for m in sink.moments()[0]] == [32] * bench.FOLDS
    assert sum(m.n for m in sink.moments()[0]) == 10 * 16


def test_bad_settings_are_refused_before_anything_is_built(monkeypatch):
    monkeypatch.setattr(bench, "shaped_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
    with pytest.raises(LinrecError, match="unknown shape 'nosuch'; choose one of gpt2-small, pythia-6.9b, smollm2"):
        bench.run_bench("cpu", shape="nosuch")
    with pytest.raises(LinrecError, match="cannot fill 5 folds"):
        bench.run_bench("cpu", peak_tokens=(100,))
    with pytest.raises(LinrecError, match="cannot fill 5 folds"):
        bench.run_bench("cpu", n_batches=2, batch_size=2, peak_tokens=())
