"""linrec.data.offline_corpora: Offline corpora: the standard library and the Unicode database of this Python."""

from __future__ import annotations

import ast

import pytest

from linrec.data.corpora import load_corpus
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


def _forget_built_corpora():
    for cache in (offline_corpus, stdlib_modules, _stdlib_texts, _unicode_texts):
        cache.cache_clear()


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
