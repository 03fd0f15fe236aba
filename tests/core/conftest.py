"""The core's tests share one tiny GPT-2 capture (Measurement.capture over the local text, 4 folds) per test module."""

from __future__ import annotations

import pytest

from conftest import tiny_model
from linrec.core.measure import Measurement
from linrec.data.tokens import make_batches


@pytest.fixture(scope="session")
def batches(tokenizer, text):
    return make_batches(tokenizer, text, seq_len=32, max_rows=1536, batch_size=16)


@pytest.fixture(scope="session")
def measured(batches):
    return Measurement.capture(tiny_model("gpt2"), batches, folds=4, progress=False)
