"""The :class:`Corpus` that every corpus of :mod:`linrec.data.corpora` is: a named text with a fit part (for
measurement and training), a disjoint eval part, a sha256 of both, and where the fit text's documents start.

Documents are the units a corpus is made of (a module, a block of records, a book): k-fold scores keep each
one whole in one fold (:meth:`linrec.data.tokens.TokenBatches.folds`), so a held-out fold is text the fit
never saw, not the continuation of a fitted page. They are not part of the sha256, which stays the hash of
the two texts (as it was before corpora had documents): a corpus's documents follow from its text by the
rule its builder states.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from linrec.errors import LinrecError


def document_starts(starts: Sequence[int], length: int) -> tuple[int, ...]:
    """``starts`` as a tuple when they can be the documents of a text of ``length`` characters: the first at 0,
    strictly increasing, each before the end (no empty document); else a :class:`LinrecError`."""
    found = tuple(int(s) for s in starts)
    if found and (found[0] != 0 or found[-1] >= length or any(b <= a for a, b in zip(found, found[1:]))):
        raise LinrecError(
            "document starts must begin at 0, increase strictly and lie inside the text "
            f"({length} characters); got {len(found)} starts from {found[0]} to {found[-1]}"
        )
    return found


@dataclass(frozen=True)
class Corpus:
    """A named text with disjoint fit and eval parts and a sha256 of both (``sha256``).

    ``fit_documents`` holds the character offset in ``fit_text`` where each of its documents starts
    (empty: unknown, so every window of the text is a unit of its own).
    """

    name: str
    domain: str
    fit_text: str
    eval_text: str
    source: str
    fit_documents: tuple[int, ...] = ()
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fit_documents", document_starts(self.fit_documents, len(self.fit_text)))
        digest = hashlib.sha256()
        for part in (self.fit_text, self.eval_text):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
        object.__setattr__(self, "sha256", digest.hexdigest())

    def text(self, split: str) -> str:
        """The ``"fit"`` or the ``"eval"`` text."""
        if split not in ("fit", "eval"):
            raise LinrecError(f"unknown split '{split}'; choose 'fit' or 'eval'")
        return self.fit_text if split == "fit" else self.eval_text

    def summary(self) -> dict[str, object]:
        """What results should record about the corpus (everything but the text)."""
        return {
            "corpus": self.name,
            "domain": self.domain,
            "sha256": self.sha256,
            "fit_chars": len(self.fit_text),
            "eval_chars": len(self.eval_text),
            "fit_documents": len(self.fit_documents),
            "source": self.source,
        }
