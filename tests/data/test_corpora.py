"""linrec.data.corpora: Named text corpora, each with a fit text (for measurement and training) and a disjoint eval
text."""

from __future__ import annotations

import time

import pytest

from linrec import LinrecError
from linrec.data.corpora import corpus_names, load_corpus
from linrec.data.hub_corpora import PAPER_CORPORA, HubCorpus, hub_corpus
from linrec.data.offline_corpora import (
    in_eval_split,
)
from linrec.hub import OFFLINE_HINT


def _fake_rows(tables):
    calls = []

    def loader(path, config, split, streaming=True):
        calls.append((path, config, split, streaming))
        return tables[split]

    return loader, calls


def test_stdlib_split_is_by_module():
    prose, code = load_corpus("stdlib-prose"), load_corpus("stdlib-code")
    # this module's docstrings and code all sit on one side of the split
    side = in_eval_split("json.decoder")
    doc = "Simple JSON <https://json.org> decoder"
    assert (doc in prose.eval_text) is side and (doc in prose.fit_text) is not side
    assert ("class JSONDecoder(object):" in code.eval_text) is side
    assert "Simple JSON <https://json.org> decoder" not in code.fit_text + code.eval_text


def test_wikitext_through_an_injected_loader():
    rows = {"train": [{"text": " = Title = \n"}, {"text": "Body line.\n"}], "test": [{"text": "Held out.\n"}]}
    loader, calls = _fake_rows(rows)
    corpus = load_corpus("wikitext-2", loader=loader)
    assert calls == [
        ("Salesforce/wikitext", "wikitext-2-raw-v1", "train", True),
        ("Salesforce/wikitext", "wikitext-2-raw-v1", "test", True),
    ]
    assert corpus.fit_text == " = Title = \nBody line.\n" and corpus.eval_text == "Held out.\n"
    assert corpus.domain == "prose" and "Salesforce/wikitext" in corpus.source


def test_single_split_dataset_holds_out_every_tenth_row_and_respects_caps():
    rows = [{"content": f"file{i}"} for i in range(100)]
    loader, calls = _fake_rows({"train": rows})
    corpus = load_corpus("codeparrot", loader=loader)
    assert calls[0][:3] == ("codeparrot/codeparrot-clean-valid", None, "train")
    assert corpus.eval_text.split("\n\n") == [f"file{i}" for i in range(0, 100, 10)]
    assert corpus.fit_text.split("\n\n") == [f"file{i}" for i in range(100) if i % 10]
    capped = HubCorpus("code", "x/y", None, "train", None, field="content", max_fit_chars=20, max_eval_chars=5)
    small = hub_corpus("capped", capped, loader)
    assert small.fit_text.split("\n\n") == ["file1", "file2", "file3"]
    assert small.eval_text == "file0"


def test_loader_failure_and_unreachable_hub_are_linrec_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))  # no cached slice to fall back on

    def broken(*args, **kwargs):
        raise ConnectionError("boom")

    with pytest.raises(LinrecError, match="boom") as err:
        load_corpus("tinystories", loader=broken)
    assert OFFLINE_HINT in str(err.value)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    start = time.monotonic()
    with pytest.raises(LinrecError, match="offline"):
        load_corpus("wikitext-2")
    assert time.monotonic() - start < 10


def test_unknown_corpus_lists_the_valid_ones():
    with pytest.raises(LinrecError) as err:
        load_corpus("wikipedia")
    for name in corpus_names():
        assert name in str(err.value)
    assert set(PAPER_CORPORA) == {"wikitext-2", "codeparrot", "tinystories"}
    with pytest.raises(LinrecError, match="'fit' or 'eval'"):
        load_corpus("unicode-records").text("train")
