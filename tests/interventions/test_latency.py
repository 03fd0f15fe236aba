"""Greedy decoding timed before and after a replacement (linrec.interventions.latency)."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_model
from linrec.errors import LinrecError
from linrec.interventions.latency import decode_rate

ONE = torch.ones(1, 3, dtype=torch.long)


def test_the_rate_counts_every_new_token_of_every_row(monkeypatch):
    model = tiny_model("llama")
    calls = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(real(**kw)) or calls[-1])
    rate = decode_rate(model, torch.ones(2, 5, dtype=torch.long), new_tokens=7, repeats=2)
    assert len(calls) == 3  # one warm-up, two timed
    assert all(out.shape == (2, 5 + 7) for out in calls)  # exactly 7 new tokens, even past an end-of-text
    assert (rate.batch, rate.prompt_tokens, rate.new_tokens, rate.repeats) == (2, 5, 7, 2)
    assert rate.tokens_per_s > 0 and rate.device == "cpu"


@pytest.mark.parametrize(("prompt", "new", "repeats"), [(ONE[0], 4, 1), (ONE[:, :0], 4, 1), (ONE, 0, 1), (ONE, 4, 0)])
def test_bad_requests_are_refused(prompt, new, repeats):
    with pytest.raises(LinrecError, match="decode_rate needs"):
        decode_rate(tiny_model("gpt2"), prompt, new, repeats)


def test_a_model_in_training_mode_is_refused():
    with pytest.raises(LinrecError, match="training mode"):
        decode_rate(tiny_model("gpt2").train(), torch.ones(1, 3, dtype=torch.long))


def test_two_models_are_timed_in_turns_and_the_speedup_is_read_from_each_pair(monkeypatch):
    from contextlib import contextmanager

    from linrec.interventions import latency
    from linrec.interventions.replacement.report import speed_words

    state = {"changed": False}
    seconds = iter([9.0, 9.0, 2.0, 1.0, 4.0, 2.0, 2.0, 1.5])  # warm-ups, then (base, changed) pairs
    order = []

    def timer(*_args):
        def once():
            order.append(state["changed"])
            return next(seconds)

        return once

    @contextmanager
    def changed():
        state["changed"] = True
        yield
        state["changed"] = False

    monkeypatch.setattr(latency, "_timer", timer)
    found = latency.compare_rates(tiny_model("gpt2"), torch.ones(1, 4, dtype=torch.long), changed, 8, repeats=3)
    assert order == [False, True] * 4  # in turns
    assert (found.speedup, found.speedup_low, found.speedup_high) == (2.0, 4 / 3, 2.0) and found.clear
    assert (found.base.tokens_per_s, found.base.low, found.base.high) == (8 / 2, 8 / 4, 8 / 2)
    words = speed_words(found.record())
    assert words.endswith("2.00x (every pair of runs 1.33x to 2.00x)") and "[2, 4] ->" in words
    unclear = found.record() | {"speedup_low": 0.9, "speedup_clear": False}
    assert speed_words(unclear).endswith("no change the runs can tell (the pairs' ratios, 0.90x to 2.00x, cover 1)")
