"""Fit and evaluation text, for the swap and perplexity tests."""

from __future__ import annotations

import pytest

from conftest import local_text
from linrec.data.tokens import TokenBatches, make_batches


@pytest.fixture(scope="session")
def fit_text(tokenizer, text) -> TokenBatches:
    """The text whose rows fit the replacements: its first windows."""
    return make_batches(tokenizer, text, seq_len=32, max_rows=2048, batch_size=16, layout="head")


@pytest.fixture(scope="session")
def eval_text(tokenizer) -> TokenBatches:
    """Held-out evaluation text: another seed's text, never used for fitting (its first windows)."""
    return make_batches(tokenizer, local_text(4000, seed=1), seq_len=32, max_rows=1024, batch_size=16, layout="head")
