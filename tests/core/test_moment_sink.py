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


@pytest.mark.parametrize("documents", [False, True])
def test_folds_finish_as_the_capture_goes_on_with_documents_or_without(documents, tokenizer, text):
    """Rows come fold by fold (run_capture orders the sequences by fold, for a text without documents too), so at
    the end of each batch every block holds the sums of one live fold, two at most within a batch."""
    from linrec.core.capture import run_capture
    from linrec.core.moment_sink import MomentSink
    from linrec.models.arch import ffn_blocks

    starts = tuple(range(0, len(text), len(text) // 40)) if documents else None
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 80, batch_size=4, documents=starts)
    sink, live = MomentSink(5), []
    end_batch = sink.end_batch

    def counted(rows):
        live.append(max(len(a.live_folds) for a in sink.accumulators.values()))
        end_batch(rows)
        live.append(max(len(a.live_folds) for a in sink.accumulators.values()))

    sink.end_batch = counted
    model = tiny_model("gpt2")
    run_capture(model, batches, ffn_blocks(model), [sink], batches.folds(5, 0), progress=False)
    assert max(live) <= 2 and max(live[1::2]) == 1  # after each batch: one fold left open


def test_finished_folds_go_to_disk_or_stay_on_the_gpu_not_both(tmp_path):
    from linrec.core.moment_sink import MomentSink

    with pytest.raises(ValueError, match="not both"):
        MomentSink(3, spill=tmp_path, keep_on_gpu=True)


def test_a_capture_in_the_one_product_layout_gives_the_same_table(tokenizer, text, monkeypatch):
    """The layout a GPU takes for narrow blocks (forced here on the CPU): the same table, column by column, to float64
    rounding, the first position apart and every fold alike."""
    from linrec.core import accumulator
    from linrec.core.measure import measure

    model = tiny_model("gpt2")
    batches = make_batches(tokenizer, text, seq_len=16, max_rows=16 * 48, batch_size=8)
    split = measure(model, batches, folds=4, progress=False)
    asked: list[tuple] = []
    monkeypatch.setattr(accumulator, "one_product", lambda *args: asked.append(args) or True)
    joined = measure(model, batches, folds=4, progress=False)
    assert asked  # (every block's accumulator took the layout)
    numbers = split.select_dtypes("number").columns
    assert len(numbers) > 10
    diff = (joined[numbers] - split[numbers]).abs().max().max()
    print(f"tiny GPT-2, one product against split: the table within {diff:.1e}")
    assert diff < 1e-9
