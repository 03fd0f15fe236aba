"""linrec.commands.measure_inputs: What ``linrec measure`` measures on: the text (a file, a corpus, or a profile model's
own) and its token batches, checked against each model's blocks, context and width before its weights load."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.cli import main
from support.cli import ROWS, _fails


@pytest.mark.slow
def test_profile_spreads_windows_over_a_named_corpus_and_folds_it_by_document(
    model_dirs, text_file, tmp_path, monkeypatch
):
    import torch
    from transformers import AutoTokenizer

    import linrec.core.measure as measure_module
    from linrec.data.corpora import load_corpus
    from linrec.data.tokens import make_batches

    served = []
    real = measure_module.measure
    monkeypatch.setattr(
        measure_module, "measure", lambda model, batches, **kw: served.append(batches) or real(model, batches, **kw)
    )
    out = tmp_path / "kjv.csv"
    model = str(model_dirs["gpt2"])
    assert main(["measure", "--model", model, "--corpus", "kjv-bible", *ROWS, "--out", str(out)]) == 0
    table, corpus = pd.read_csv(out), load_corpus("kjv-bible")
    assert (table.layout == "spread").all() and (table.corpus_sha256 == corpus.sha256).all()
    documents = served[0].document
    assert len(documents) == 384 // 16 and documents[0] == 0 and documents[-1] == len(corpus.fit_documents) - 1
    assert documents.unique().numel() >= 10  # Genesis to 3 John, whole books to folds
    assert (
        main(["measure", "--model", model, "--text-file", str(text_file), *ROWS, "--layout", "head", "--out", str(out)])
        == 0
    )
    assert (pd.read_csv(out).layout == "head").all() and served[1].document is None
    first = make_batches(
        AutoTokenizer.from_pretrained(model), text_file.read_text(), seq_len=16, max_rows=384, layout="head"
    )
    assert torch.equal(served[1].input_ids, first.input_ids)  # the file's first windows


def test_text_blocks_context_and_vocabulary_are_checked_before_the_weights(
    model_dirs, text_file, tmp_path, tokenizer, capsys, no_weights
):
    model = ["measure", "--model", str(model_dirs["gpt2"])]
    _fails([*model, "--text-file", str(text_file), *ROWS, "--blocks", "0,5"], capsys, "no FFN block 5", "blocks 0..1")
    _fails([*model, "--text-file", str(text_file), "--seq-len", "65"], capsys, "exceeds the model's context of 64")
    _fails([*model, "--text-file", str(text_file), "--max-rows", "40", "--seq-len", "8"], capsys, "folds are whole")
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n", encoding="utf-8")
    _fails([*model, "--text-file", str(empty)], capsys, f"the text {empty} is empty")
    short = tmp_path / "short.txt"
    short.write_text("just a few words", encoding="utf-8")
    _fails([*model, "--text-file", str(short), *ROWS], capsys, "are needed for max_rows=384")
    from transformers import GPT2Config

    small = tmp_path / "small-vocab"  # its embedding has 100 rows; the saved tokenizer gives ids up to 319
    GPT2Config(vocab_size=100, n_layer=2, n_head=4, n_embd=32, n_positions=64).save_pretrained(small)
    tokenizer.save_pretrained(small)
    _fails(["measure", "--model", str(small), "--text-file", str(text_file), *ROWS], capsys, "vocabulary has 100 ids")
