"""linrec.core.moment_sink: The capture's main sink: float64 moments per block and fold, accumulated as the rows stream
by."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_model
from linrec.core.capture import capture_moments
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError


@pytest.mark.parametrize(
    ("dtype", "advice"),
    [
        (torch.float32, "already computes in float32, so this is no low-precision overflow: its weights hold NaN/Inf"),
        (torch.bfloat16, "A bfloat16 model can lose range: load it in float32"),
    ],
)
def test_nan_activations_name_the_block_and_advice_fits_the_dtype(tokenizer, text, dtype, advice):
    model = tiny_model("gpt2").to(dtype)
    with torch.no_grad():
        model.transformer.h[1].ln_2.weight[0] = float("nan")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=128)
    with pytest.raises(LinrecError, match="block 1: NaN or Inf") as err:
        capture_moments(model, batches, folds=2, progress=False)
    assert advice in str(err.value)
