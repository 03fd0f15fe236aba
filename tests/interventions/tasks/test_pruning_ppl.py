"""linrec.interventions.tasks.pruning_ppl: perplexity as the layer-pruning papers compute it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from linrec import LinrecError
from linrec.interventions.tasks.pruning_ppl import SEQ_LEN, pruning_perplexity, pruning_windows, window_length
from support.planted_models import planted_model


class Ids:
    """A tokenizer that turns a text into the given ids, with a BOS of 7 in front (a Llama-like tokenizer)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def __call__(self, text: str, verbose: bool = False) -> dict:
        return {"input_ids": [7, *self.ids]}


def gptq_eval_ppl(model: nn.Module, ids: torch.Tensor, seqlen: int) -> float:
    """GPTQ's eval loop (datautils/eval_ppl, reused by SLEB's eval_utils), written out as those repositories do."""
    nsamples = ids.numel() // seqlen
    nlls = []
    for i in range(nsamples):
        batch = ids[:, i * seqlen : (i + 1) * seqlen]
        logits = model(batch).logits
        shift_logits, shift_labels = logits[:, :-1, :], batch[:, 1:]
        loss = nn.CrossEntropyLoss()(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1))
        nlls.append(loss.float() * seqlen)
    return float(torch.exp(torch.stack(nlls).sum() / (nsamples * seqlen)))


def test_windows_cut_the_whole_text_with_its_special_tokens_once_and_drop_the_tail():
    batches = pruning_windows(Ids(list(range(100, 110))), "ten tokens", seq_len=4)
    assert batches.input_ids.tolist() == [[7, 100, 101, 102], [103, 104, 105, 106]]  # the BOS once, 3 left over
    assert batches.attention_mask.all() and len(pruning_windows(Ids(list(range(9))), "", 4, max_windows=1)) == 1


def test_a_text_shorter_than_one_window_is_refused():
    with pytest.raises(LinrecError, match="fewer than one window of 64"):
        pruning_windows(Ids(list(range(10))), "short", seq_len=64)
    with pytest.raises(LinrecError, match="at least 2 tokens"):
        pruning_windows(Ids(list(range(10))), "short", seq_len=1)


def test_the_window_is_the_papers_unless_the_context_is_shorter():
    model = planted_model()  # GPT-2 positions: 64
    assert window_length(model, None) == 64 and window_length(model, 32) == 32 and SEQ_LEN == 2048
    with pytest.raises(LinrecError, match="exceeds the model's context of 64"):
        window_length(model, 128)


def test_the_perplexity_equals_the_papers_own_loop(tokenizer, text):
    model = planted_model()
    found = pruning_perplexity(model, tokenizer, text[:20_000], seq_len=32, source="local")
    ids = torch.tensor([tokenizer(text[:20_000])["input_ids"]])
    with torch.no_grad():
        expected = gptq_eval_ppl(model, ids, 32)
    assert found.ppl == pytest.approx(expected, rel=1e-6)
    assert found.windows == ids.numel() // 32 and found.tokens == found.windows * 32
    assert found.record()["seq_len"] == 32 and found.record()["source"] == "local"
    assert math.isfinite(found.ppl) and found.ppl > 1
