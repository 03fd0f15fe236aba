"""The :class:`Corpus` that every corpus of :mod:`linrec.data.corpora` is: a named text with a fit part (for
measurement and training), a disjoint eval part, and a sha256 of both."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from linrec.errors import LinrecError


@dataclass(frozen=True)
class Corpus:
    """A named text with disjoint fit and eval parts and a sha256 of both (``sha256``)."""

    name: str
    domain: str
    fit_text: str
    eval_text: str
    source: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
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
            "source": self.source,
        }
