"""linrec.data.corpus: The :class:`Corpus` that every corpus of :mod:`linrec.data.corpora` is: a named text with a fit
part (for measurement and training), a disjoint eval part, a sha256 of both, and where the fit text's documents start.
"""

from __future__ import annotations

import pytest

from linrec import LinrecError
from linrec.data.corpus import Corpus


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
