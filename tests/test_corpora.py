"""Corpora: offline builds are deterministic and split by whole unit; hub corpora run through an injected loader."""

import ast
import time

import pytest

from linrec import LinrecError
from linrec.data.corpora import corpus_names, load_corpus
from linrec.data.corpus import Corpus
from linrec.data.hub_corpora import PAPER_CORPORA, HubCorpus, hub_corpus
from linrec.data.offline_corpora import (
    OFFLINE_CORPORA,
    _docstring_nodes,
    _stdlib_texts,
    _unicode_record,
    _unicode_texts,
    _without_docstrings,
    in_eval_split,
    joined,
    offline_corpus,
    stdlib_modules,
)
from linrec.hub import OFFLINE_HINT


def _forget_built_corpora():
    for cache in (offline_corpus, stdlib_modules, _stdlib_texts, _unicode_texts):
        cache.cache_clear()


@pytest.mark.slow
def test_offline_corpora_rebuild_to_the_same_hash(tmp_path, monkeypatch):
    built = []
    for where in ("first", "second", "first"):  # build, build again from scratch, then read back from disk
        monkeypatch.setenv("LINREC_CACHE", str(tmp_path / where))
        _forget_built_corpora()
        built.append({name: load_corpus(name) for name in OFFLINE_CORPORA})
    _forget_built_corpora()
    first, again, cached = built
    assert (tmp_path / "first" / "corpora").is_dir()
    for name, corpus in first.items():
        assert again[name] is not corpus
        assert again[name].sha256 == cached[name].sha256 == corpus.sha256
        assert cached[name].fit_text == corpus.fit_text
        assert corpus.domain == OFFLINE_CORPORA[name]
        assert len(corpus.fit_text) > 5 * len(corpus.eval_text) > 0


def test_hash_covers_content_and_the_fit_eval_boundary():
    a = Corpus("x", "prose", "ab", "c", "test")
    assert a.sha256 == Corpus("y", "code", "ab", "c", "other").sha256  # content only
    assert a.sha256 == Corpus("x", "prose", "ab", "c", "test", (0, 1)).sha256  # documents are not content
    assert a.sha256 != Corpus("x", "prose", "a", "bc", "test").sha256
    assert a.sha256 != Corpus("x", "prose", "ab", "d", "test").sha256
    assert a.summary()["sha256"] == a.sha256 and "fit_text" not in a.summary()


def test_documents_must_start_at_zero_increase_and_lie_inside_the_fit_text():
    assert Corpus("x", "prose", "abc", "", "t", [0, 2]).fit_documents == (0, 2)  # a list, as JSON reads it back
    for bad in ((1,), (0, 2, 2), (0, 3), (0, 2, 1)):
        with pytest.raises(LinrecError, match="document starts must begin at 0, increase strictly"):
            Corpus("x", "prose", "abc", "", "t", bad)


def test_joined_is_one_join_of_every_piece_and_starts_each_unit_with_words():
    units = [["  ", "a"], [], ["b", "cd"], [" "], ["e"]]
    text, starts = joined(units, "--")
    assert text == "--".join(["  ", "a", "b", "cd", " ", "e"])  # the text a flat join gives: hashes stay
    assert starts == (0, 7, 17)  # the blank unit joins the one before it; the first starts at 0
    assert [text[s] for s in starts[1:]] == ["b", "e"]
    assert joined([["  "], ["x"]], "\n") == ("  \nx", (0,))


@pytest.mark.slow
def test_offline_documents_are_modules_and_blocks():
    for name, domain in (("stdlib-prose", "prose"), ("stdlib-code", "code")):
        corpus = load_corpus(name)
        fit = [
            (docs if domain == "prose" else [code])
            for module, _, docs, code in stdlib_modules()
            if not in_eval_split(module) and "".join(docs if domain == "prose" else [code]).strip()
        ]
        assert len(corpus.fit_documents) == len(fit) > 100
        for start, pieces in zip(corpus.fit_documents[1:], fit[1:]):
            assert corpus.fit_text.startswith(pieces[0], start)
    records = load_corpus("unicode-records")
    ends = [*records.fit_documents[1:], len(records.fit_text)]
    blocks = []
    for start, end in zip(records.fit_documents, ends):
        cps = {int(line.split(" | ")[0][2:], 16) >> 7 for line in records.fit_text[start:end].splitlines()}
        assert len(cps) == 1  # one block per document
        blocks.append(cps.pop())
    assert blocks == sorted(set(blocks))


def test_unicode_records_are_split_by_block_and_planted_record_is_exact():
    assert _unicode_record("A") == "U+0041 | LATIN CAPITAL LETTER A | Lu | L | Na | 0 | - | - | - | U+0061"
    assert (
        _unicode_record("\u00bd")
        == "U+00BD | VULGAR FRACTION ONE HALF | No | ON | A | 0 | <fraction> 0031 2044 0032 | 0.5 | - | -"
    )
    corpus = load_corpus("unicode-records")
    for text, expect in ((corpus.fit_text, False), (corpus.eval_text, True)):
        lines = text.splitlines()
        assert all(len(line.split(" | ")) == 10 for line in lines)
        cps = [int(line.split(" | ")[0][2:], 16) for line in lines]
        assert cps == sorted(cps)
        assert all(in_eval_split(f"block-{cp >> 7}") is expect for cp in cps)
    names = [line.split(" | ")[1] for line in corpus.fit_text.splitlines()]
    assert "SQUARED CJK UNIFIED IDEOGRAPH-5B57" in names  # a real name that merely mentions one
    assert not any(n.startswith(("CJK UNIFIED IDEOGRAPH-", "HANGUL SYLLABLE ")) for n in names)


PLANTED = '''"""Module doc."""
import os


class A:
    """Class doc
    on two lines."""

    def f(self):
        """Only a docstring."""

    def g(self):  # a comment
        """g doc"""
        return 1


def h(): "same line"; return 2
'''


def test_docstrings_are_removed_from_code_and_collected_in_order():
    tree = ast.parse(PLANTED)
    docs = _docstring_nodes(tree)
    assert [d.value.value.split()[0] for _, d in docs] == ["Module", "Class", "Only", "g", "same"]
    code = _without_docstrings(PLANTED, docs)
    stripped = ast.parse(code)  # still valid Python
    assert "Module doc" not in code and "Class doc" not in code and "g doc" not in code
    assert "# a comment" in code and "return 1" in code
    assert '"same line"' in code  # shares its line with code: kept
    f = stripped.body[1].body[0]
    assert f.name == "f" and isinstance(f.body[0], ast.Pass)


def test_stdlib_split_is_by_module():
    prose, code = load_corpus("stdlib-prose"), load_corpus("stdlib-code")
    # this module's docstrings and code all sit on one side of the split
    side = in_eval_split("json.decoder")
    doc = "Simple JSON <https://json.org> decoder"
    assert (doc in prose.eval_text) is side and (doc in prose.fit_text) is not side
    assert ("class JSONDecoder(object):" in code.eval_text) is side
    assert "Simple JSON <https://json.org> decoder" not in code.fit_text + code.eval_text


def _fake_rows(tables):
    calls = []

    def loader(path, config, split, streaming=True):
        calls.append((path, config, split, streaming))
        return tables[split]

    return loader, calls


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
