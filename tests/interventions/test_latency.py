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
