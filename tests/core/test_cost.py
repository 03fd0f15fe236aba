"""linrec.core.cost (``linrec bench``): every path on the same batches, the overhead split into its parts, honest
settings."""

from __future__ import annotations

import re

import pytest
import torch

import linrec.core.cost as bench
from linrec.errors import LinrecError
from linrec.models import shapes

CPU = torch.device("cpu")


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


def test_the_first_layers_of_a_shape_are_its_width_and_fewer_blocks(tiny_shape):
    table = bench.run_bench("cpu", n_batches=3, batch_size=3, seq_len=16, peak_tokens=(), shape=tiny_shape, layers=2)
    assert set(table["shape"]) == {"tiny, first 2 layers"}
    model = bench.shaped_model(tiny_shape, torch.device("cpu"), layers=2)
    assert len(model.transformer.h) == 2 and model.config.n_embd == 32
    with pytest.raises(LinrecError, match="the tiny shape has 3 layers, not 4"):
        bench.run_bench("cpu", shape=tiny_shape, layers=4, peak_tokens=())


def test_a_bench_that_cannot_fit_the_machine_is_refused_with_layers_that_do(tiny_shape, monkeypatch):
    """The H200 check of 2026-11-28 lost its 7B bench to the host's OOM killer: every block's moments at once. Too
    little memory is refused before anything is built, and the layers it names then run."""
    settings = {"n_batches": 3, "batch_size": 3, "seq_len": 16, "peak_tokens": (), "shape": tiny_shape}
    refusals = {}
    for free in (2**k for k in range(10, 40)):
        monkeypatch.setattr(bench, "host_available", lambda free=free: free)
        try:
            bench._check_memory(bench.layered_config(tiny_shape), tiny_shape, 15, 16, 3, torch.float32, CPU)
        except LinrecError as e:
            refusals[free] = str(e)
        else:
            break
    assert any("no layer of it fits" in m for m in refusals.values())
    free, message = next((f, m) for f, m in refusals.items() if "--layers" in m)
    layers = int(re.search(r"--layers (\d+)$", message).group(1))
    assert 1 <= layers < 3 and "holds every block's moments at once" in message
    monkeypatch.setattr(bench, "host_available", lambda: free)
    built = []
    monkeypatch.setattr(bench, "shaped_model", lambda *a, **k: built.append(1) or (_ for _ in ()).throw(KeyError))
    with pytest.raises(LinrecError, match="--layers"):
        bench.run_bench("cpu", **settings)
    assert built == []
    with pytest.raises(KeyError):  # past the check: the model is built
        bench.run_bench("cpu", layers=layers, **settings)
    assert built == [1]
