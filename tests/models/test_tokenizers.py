"""linrec.models.tokenizers: Tokenizers in the layouts of the paper models' own, trained here on given texts
(:mod:`linrec.models.shapes` pairs each real-shaped model with one of its real vocabulary size):"""

from __future__ import annotations

import shutil
import sys

import pytest

import linrec
from conftest import local_text
from linrec.data.tokens import bos_id, bos_policy, make_batches
from linrec.errors import LinrecError
from linrec.models.loading import load_tokenizer
from linrec.models.shapes import (
    shaped_config,
    shaped_tokenizer_dir,
)
from support.shapes import LLAMA


def test_the_llama_tokenizer_is_converted_from_tokenizer_model_alone():
    path = shaped_tokenizer_dir(LLAMA)
    assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == [
        "shapes.json",
        "tokenizer.model",
        "tokenizer_config.json",
    ]
    tokenizer = load_tokenizer(str(path))
    assert type(tokenizer).__name__ == "LlamaTokenizer"
    text = "Return the 42 items, ok?"
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    assert tokenizer.convert_ids_to_tokens(tokenizer("é€")["input_ids"])[0] == "<s>"


def test_zoo_tokenizers_add_no_bos(tmp_path):
    """The zoo's tokenizers (data/bpe.py) have a BOS token but never put it before a text: windows stay text only."""
    from linrec.data.bpe import train_bpe
    from linrec.data.tokens import tokenize

    text = local_text(3000)
    tokenizer = train_bpe([text], 400, tmp_path)
    assert tokenizer.bos_token == "<|endoftext|>" and bos_id(tokenizer) is None and bos_policy(tokenizer) == "no BOS"
    windows = make_batches(tokenizer, text, seq_len=32, max_rows=256, layout="head")
    assert windows.input_ids.flatten().tolist() == tokenize(tokenizer, text)[: 8 * 32].tolist()


def test_a_missing_sentencepiece_is_named(monkeypatch, tmp_path):
    """Without sentencepiece and protobuf, transformers fails on tokenizer.model with a word on tiktoken."""
    import transformers.utils.import_utils as import_utils

    path = shaped_tokenizer_dir(LLAMA)
    checkpoint = tmp_path / "llama"  # a checkpoint as JackFram/llama-160m ships it: config and tokenizer.model
    shaped_config(LLAMA).save_pretrained(checkpoint)
    for name in ("tokenizer.model", "tokenizer_config.json"):
        shutil.copy(path / name, checkpoint / name)
    checks = (import_utils.is_sentencepiece_available, import_utils.is_protobuf_available)
    for module in ("sentencepiece", "google.protobuf"):
        monkeypatch.setitem(sys.modules, module, None)
    for check in checks:
        check.cache_clear()
    try:
        with pytest.raises(LinrecError, match=r"missing: sentencepiece, protobuf.*pip install 'linrec\[paper\]'"):
            load_tokenizer(str(path), LLAMA)
        with pytest.raises(LinrecError, match="sentencepiece"):
            linrec.load_model(str(checkpoint))
    finally:
        for check in checks:
            check.cache_clear()
