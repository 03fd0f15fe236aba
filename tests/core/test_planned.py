"""A capture run by its plan (linrec.core.planned): the groups, each resumed from the stream the previous one kept,
give every number of one pass over every block, bit for bit, on every causal family, a text with documents and one
without, the first position apart or left out; the model's layers run once per batch in all; what cannot work is
refused before the forward."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import tiny_model
from linrec.core.capture import CaptureOptions, capture_positions
from linrec.core.measure import Measurement, measure
from linrec.core.planned import check_disk, plan_for
from linrec.core.sample import RowSample
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError, LinrecWarning
from linrec.models.arch import CAUSAL, ffn_blocks


def _batches(tokenizer, text, documents: bool):
    starts = tuple(range(0, len(text), len(text) // 40)) if documents else None
    return make_batches(tokenizer, text, seq_len=16, max_rows=16 * 48, batch_size=8, documents=starts)


FOLDS = 12
"""Enough folds that a tiny model's moments, not its residual stream, decide the groups."""


def one_block_at_a_time(model, batches, folds: int = FOLDS) -> int:
    """The budget of a plan that measures one block per group."""
    fp = plan_for(model, batches, None, folds).footprint
    return fp.host(1, fp.blocks)


@pytest.mark.parametrize("family", CAUSAL)
@pytest.mark.parametrize("documents", [False, True])
def test_groups_give_the_one_pass_table_bit_for_bit(family, documents, tokenizer, text):
    model = tiny_model(family)
    batches = _batches(tokenizer, text, documents)
    budget = one_block_at_a_time(model, batches)
    plan = plan_for(model, batches, None, FOLDS, memory=budget)
    assert [len(g) for g in plan.groups] == [1, 1]
    for skip_first in (0, 1) if family == "llama" else (0,):
        one = measure(model, batches, folds=FOLDS, skip_first=skip_first, progress=False)
        grouped = measure(model, batches, folds=FOLDS, skip_first=skip_first, progress=False, memory=budget)
        pd.testing.assert_frame_equal(one, grouped, check_exact=True)


@pytest.mark.parametrize("family", ["gpt2", "gemma3_text"])
def test_a_planned_measurement_holds_the_one_pass_moments(family, tokenizer, text, tmp_path):
    model = tiny_model(family)
    batches = _batches(tokenizer, text, documents=True)
    budget = one_block_at_a_time(model, batches)
    one = Measurement.capture(model, batches, folds=FOLDS, progress=False)
    grouped = Measurement.capture(model, batches, folds=FOLDS, progress=False, memory=budget, spill=tmp_path)
    assert any(tmp_path.iterdir())  # the groups' moments waited on disk
    pd.testing.assert_frame_equal(one.table(), grouped.table(), check_exact=True)
    for b in one.blocks:
        for part in ("first", "later"):
            for m, n in zip(getattr(one.positions, part)[b], getattr(grouped.positions, part)[b], strict=True):
                assert m.n == n.n and all(torch.equal(getattr(m, f), getattr(n, f)) for f in ("cxx", "cxy", "cyy"))
    assert {b: t for b, t in one.positions.tails.items()} == dict(grouped.positions.tails)
    saved = Measurement.load(grouped.save(tmp_path / "saved"))
    pd.testing.assert_frame_equal(saved.table(), one.table(), check_exact=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_a_table_s_folds_wait_there_and_give_the_same_table_bit_for_bit(tokenizer, text):
    """Where only the table is wanted, the plan keeps the finished folds on the GPU for the fits that run there: they
    hold what the pinned host copies hold, so the table is the same to the last bit, in one group or in several."""
    model = tiny_model("llama").to("cuda")
    batches = _batches(tokenizer, text, documents=False)
    kept, sent = plan_for(model, batches, None, FOLDS, table=True), plan_for(model, batches, None, FOLDS)
    assert kept.footprint.kept_on_gpu and not sent.footprint.kept_on_gpu
    on_gpu = capture_positions(model, batches, options=CaptureOptions(FOLDS, progress=False, keep_on_gpu=True))
    assert all(m.cxx.is_cuda for folds in on_gpu.later.values() for m in folds)
    on_host = capture_positions(model, batches, options=CaptureOptions(FOLDS, progress=False))
    assert all(m.cxx.is_pinned() for folds in on_host.later.values() for m in folds)
    one = measure(model, batches, folds=FOLDS, progress=False, memory=sent)
    pd.testing.assert_frame_equal(measure(model, batches, folds=FOLDS, progress=False, memory=kept), one,
                                  check_exact=True)  # fmt: skip
    fp = kept.footprint
    grouped = plan_for(model, batches, None, FOLDS, memory=max(fp.host(1, fp.blocks), fp.device(1)), table=True)
    assert grouped.footprint.kept_on_gpu and len(grouped.groups) == 2
    pd.testing.assert_frame_equal(measure(model, batches, folds=FOLDS, progress=False, memory=grouped), one,
                                  check_exact=True)  # fmt: skip


def test_measure_plans_for_a_table_and_a_saved_measurement_for_its_moments(tokenizer, text, monkeypatch):
    """measure() wants only the table (its moments may stay on a GPU); Measurement.capture keeps the moments."""
    from linrec.core import measure as measuring

    asked = []
    monkeypatch.setattr(measuring, "plan_for", lambda *a, **k: asked.append(k) or plan_for(*a, **k))
    model = tiny_model("gpt2")
    batches = _batches(tokenizer, text, documents=False)
    measure(model, batches, folds=FOLDS, progress=False)
    Measurement.capture(model, batches, folds=FOLDS, progress=False)
    assert [k.get("table", False) for k in asked] == [True, False]


def test_each_layer_runs_once_per_batch_in_all(tokenizer, text):
    model = tiny_model("llama")
    batches = _batches(tokenizer, text, documents=False)
    calls = {b.index: 0 for b in ffn_blocks(model)}
    for b, layer in enumerate(model.model.layers):
        layer.mlp.register_forward_pre_hook(lambda *_, b=b: calls.__setitem__(b, calls[b] + 1))
        layer.self_attn.register_forward_pre_hook(lambda *_, b=b: calls.__setitem__(b, calls[b] + 1))
    measure(model, batches, folds=FOLDS, progress=False, memory=one_block_at_a_time(model, batches))
    assert calls == {0: 2 * len(batches), 1: 2 * len(batches)}  # attention and FFN of each layer, once per batch


def test_a_row_sample_sees_every_group(tokenizer, text):
    model = tiny_model("gpt2")
    batches = _batches(tokenizer, text, documents=False)
    one, grouped = RowSample(200, seed=3), RowSample(200, seed=3)
    Measurement.capture(model, batches, folds=FOLDS, progress=False, extra_sinks=[one])
    Measurement.capture(model, batches, folds=FOLDS, progress=False, extra_sinks=[grouped],
                        memory=one_block_at_a_time(model, batches))  # fmt: skip
    assert one.blocks == grouped.blocks == [0, 1]
    for b in one.blocks:
        assert torch.equal(one.rows(b).x, grouped.rows(b).x) and torch.equal(one.rows(b).y, grouped.rows(b).y)


def test_groups_that_cannot_resume_warn_of_the_cost_and_agree(tokenizer, text):
    model = tiny_model("llama")
    batches = _batches(tokenizer, text, documents=False)
    spec = [("model.layers.1.mlp", "model.layers.1.mlp"), ("model.layers.0.mlp", "model.layers.0.mlp")]  # not in order
    budget = one_block_at_a_time(model, batches)
    one = measure(model, batches, folds=FOLDS, spec=spec, progress=False)
    with pytest.warns(LinrecWarning, match="each from the model's input.*forward passes"):
        grouped = measure(model, batches, folds=FOLDS, spec=spec, progress=False, memory=budget)
    pd.testing.assert_frame_equal(one, grouped, check_exact=True)


def test_a_budget_too_small_is_refused_before_the_forward(tokenizer, text):
    model = tiny_model("gpt2")
    batches = _batches(tokenizer, text, documents=False)
    ran = []
    model.transformer.h[0].register_forward_pre_hook(lambda *_: ran.append(1))
    with pytest.raises(LinrecError, match="too small.*smallest budget that works is --memory"):
        measure(model, batches, folds=FOLDS, progress=False, memory="1MB")
    assert not ran


def test_a_disk_without_room_for_the_groups_is_refused_first(tokenizer, text, tmp_path, monkeypatch):
    model = tiny_model("gpt2")
    batches = _batches(tokenizer, text, documents=False)
    free = shutil.disk_usage(tmp_path)._replace(free=1000)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: free)
    with pytest.raises(LinrecError, match="writes .* of moments under .* has 0 MB free"):
        Measurement.capture(model, batches, folds=FOLDS, progress=False, spill=tmp_path / "new",
                            memory=one_block_at_a_time(model, batches))  # fmt: skip
    check_disk(tmp_path, 0)  # nothing to write: no check


def test_no_plan_is_announced_for_one_group(tokenizer, text, capsys):
    model = tiny_model("gpt2")
    batches = _batches(tokenizer, text, documents=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        measure(model, batches, folds=FOLDS, progress=True)
    assert "plan:" not in capsys.readouterr().err
    measure(model, batches, folds=FOLDS, progress=True, memory=one_block_at_a_time(model, batches))
    err = capsys.readouterr().err
    assert "plan: 2 groups of 1 block" in err and np.char.count(err, "capture") >= 2
