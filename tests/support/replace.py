"""A tiny base model, its texts and a replaced copy, for the replacement and ablation tests."""

from __future__ import annotations

import math
import shutil

import pytest
import torch

from conftest import local_text
from linrec.data.tokens import make_batches
from linrec.interventions.replacement.replace import TextPart, replace
from linrec.models.loading import load_pretrained


@pytest.fixture(scope="session")
def base_dir(model_dirs, tmp_path_factory):
    """A copy of the tiny GPT-2's directory, so a test may change it."""
    return shutil.copytree(model_dirs["gpt2"], tmp_path_factory.mktemp("base") / "gpt2")


@pytest.fixture(scope="session")
def texts(tokenizer, text):
    fit = make_batches(tokenizer, text, seq_len=32, max_rows=1536, batch_size=16)
    evals = make_batches(tokenizer, local_text(3000, seed=1), seq_len=32, max_rows=768, batch_size=16)
    return fit, evals


@pytest.fixture(scope="session")
def replaced(base_dir, texts, tmp_path_factory):
    """Blocks 1 then 0 replaced by rank-8 maps, saved."""
    model, _ = load_pretrained(str(base_dir))
    fit, evals = texts
    parts = TextPart("local", "all of it", "f" * 64), TextPart("other", "all of it", "e" * 64)
    options = {"kind": "lowrank:8", "blocks": [1, 0], "folds": 4, "progress": False, "name": str(base_dir)}
    result = replace(model, fit, evals, fit_text=parts[0], eval_text=parts[1], **options)
    out = result.save(tmp_path_factory.mktemp("out") / "replaced")
    return result, out


def independent_ppl(model, batches) -> float:
    """Perplexity from the model's own loss, token-weighted (no linrec code)."""
    total, tokens = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            n = batch.input_ids.numel() - batch.input_ids.shape[0]
            total += float(model(batch.input_ids, labels=batch.input_ids).loss) * n
            tokens += n
    return math.exp(total / tokens)
