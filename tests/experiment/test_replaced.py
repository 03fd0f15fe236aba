"""A profile model's replacement is chosen once and read back from the cache bit for bit."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from conftest import tiny_model
from linrec.data.tokens import make_batches
from linrec.experiment import replaced as cache
from linrec.interventions.replacement import replace as chooser


def _batches(tokenizer, text: str, rows: int, offset: int = 0):
    return make_batches(tokenizer, text[offset:], seq_len=32, max_rows=rows, batch_size=16)


@pytest.mark.slow
def test_a_replacement_is_chosen_once_then_read_back_equal(tmp_path, monkeypatch, tokenizer, text):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    calls = []
    original = chooser.replace

    def counted(*args, **kwargs):
        calls.append(kwargs.get("max_ppl_increase"))
        return original(*args, **kwargs)

    monkeypatch.setattr(cache, "replace", counted)
    model = tiny_model("gpt2", 0)
    fit, held_out = _batches(tokenizer, text, 640), _batches(tokenizer, text, 256, len(text) // 2)
    options = dict(weights="w1", name="tiny", folds=4, seed=0, progress=False, blocks=[0, 1])
    first = cache.cached_replace(model, fit, held_out, max_ppl_increase="1000%", **options)
    again = cache.cached_replace(model, fit, held_out, max_ppl_increase="1000%", **options)
    direct = original(model, fit, held_out, name="tiny", folds=4, seed=0, progress=False, blocks=[0, 1],
                      max_ppl_increase="1000%")  # fmt: skip
    assert calls == ["1000%"] and list(again.maps) == list(direct.maps) == [0, 1]
    for b, module in direct.maps.items():
        theirs = again.maps[b].state_dict()
        assert all(torch.equal(t, theirs[k]) for k, t in module.state_dict().items())
    assert [s["ppl"] for s in again.record["steps"]] == [s["ppl"] for s in direct.record["steps"]]
    assert again.record["blocks"] == first.record["blocks"]
    pd.testing.assert_frame_equal(again.measurement.table(), direct.measurement.table())
    other = cache.cached_replace(model, fit, held_out, max_ppl_increase="1000%", **{**options, "weights": "w2"})
    assert len(calls) == 2 and list(other.maps) == [0, 1]  # other weights: chosen again


def test_a_choice_that_keeps_nothing_is_cached_as_its_record(tmp_path, monkeypatch, tokenizer, text):
    """A result with no maps (no block within the budget) is kept as its record and read back with the same reason."""
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    calls = []

    def nothing_kept(*args, **kwargs) -> chooser.Replacement:
        calls.append(1)
        chosen = chooser.replace(*args, **kwargs)
        return chooser.Replacement({}, chosen.record, chosen.measurement)

    monkeypatch.setattr(cache, "replace", nothing_kept)
    model = tiny_model("gpt2", 0)
    fit, held_out = _batches(tokenizer, text, 640), _batches(tokenizer, text, 256, len(text) // 2)
    options = dict(weights="w", name="tiny", folds=4, seed=0, progress=False, max_ppl_increase="5%")
    first = cache.cached_replace(model, fit, held_out, **options)
    again = cache.cached_replace(model, fit, held_out, **options)
    assert calls == [1] and first.none_fits is not None and again.none_fits == first.none_fits and again.maps == {}
    assert again.record == first.record
