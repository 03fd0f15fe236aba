"""Practitioner helpers: candidate flags and the memory formula against real moments."""

import pandas as pd
import pytest

from conftest import tiny_model
from linrec.analysis.your_model import moment_bytes, replacement_candidates
from linrec.core.capture import capture_moments
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError


def test_candidates_need_high_and_stable_r2():
    table = pd.DataFrame({"block": [0, 1, 2], "r2_lin": [0.99, 0.5, 0.97], "r2_lin_std": [0.001, 0.01, 0.1]})
    out = replacement_candidates(table, min_r2=0.95, max_std=0.02)
    assert list(out.block) == [0, 2, 1]
    assert list(out.candidate) == [True, False, False]
    assert out.reason.iloc[1].startswith("folds disagree") and out.reason.iloc[2].startswith("R² below")
    with pytest.raises(LinrecError, match="lacks columns"):
        replacement_candidates(table.drop(columns="r2_lin_std"))


def test_moment_bytes_is_what_capture_keeps(tokenizer, text):
    model = tiny_model("llama")
    moments = capture_moments(model, make_batches(tokenizer, text, seq_len=16, max_rows=512), folds=3, progress=False)
    kept = sum(
        getattr(m, f).nbytes
        for folds in moments.values()
        for m in folds
        for f in ("mean_x", "mean_y", "cxx", "cxy", "cyy")
    )
    assert kept == moment_bytes(32, 32, blocks=2, folds=3)


def test_your_model_claims_take_the_highest_r2_block_and_the_time_ratio():
    from linrec.analysis.your_model import your_model_claims

    swaps = pd.DataFrame({"block": [0, 3], "r2_lin": [0.8, 0.97], "delta_ppl": [5.0, 0.4], "ratio": [8.0, 8.0]})
    swap, ratio = your_model_claims(swaps, {"capture_s": 3.0, "bare_s": 2.0, "tokens": 1024}, "m")
    assert swap.value == 0.4 and "m block 3, R²_lin 0.970" in swap.note and swap.unit == "perplexity"
    assert ratio.value == 1.5 and "1,024 tokens" in ratio.note
