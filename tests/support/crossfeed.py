"""A tiny GPT-2 captured over the local text, for the cross-feeding and normalisation tests."""

from __future__ import annotations

import pytest

from conftest import tiny_model
from linrec.core.capture import capture_with_sample
from linrec.data.tokens import make_batches

FOLDS = 4


@pytest.fixture(scope="session")
def gpt2_capture(tokenizer, text):
    model = tiny_model("gpt2", seed=3)
    batches = make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=16)
    _, sample = capture_with_sample(model, batches, sample_rows=1500, folds=FOLDS, progress=False)
    return model, sample
