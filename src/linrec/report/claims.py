"""One contract for a chapter's verdicts: a :class:`Claim` per checked statement, one table, one sentence.

Each analysis checks the paper's statements part by part and returns :class:`Claim` objects; the
chapter shows them with :func:`claims_table` (always the same four columns) and sums them up with
:func:`verdict_sentence`. A verdict is one of :class:`Verdict`'s three values, never free text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from linrec.report.paper import Reported

COLUMNS = ("claim", "paper (reported)", "this run (measured)", "reproduced")
"""The columns of every claims table."""


class Verdict(str, Enum):
    """Whether this run reproduces a claim: yes, no, or untestable (the run has no case for it)."""

    YES = "yes"
    NO = "no"
    UNTESTABLE = "untestable"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Claim:
    """One checked statement: what the paper says (a :class:`Reported` or a note), what this run found, the verdict."""

    claim: str
    paper: Reported | str
    measured: str
    verdict: Verdict

    @classmethod
    def check(cls, claim: str, paper: Reported | str, measured: str, holds: bool | None) -> Claim:
        """A claim whose verdict is ``holds`` (None: untestable in this run)."""
        verdict = Verdict.UNTESTABLE if holds is None else (Verdict.YES if holds else Verdict.NO)
        return cls(claim, paper, measured, verdict)

    @property
    def reported(self) -> str:
        """The paper's side as text: the reported value, or the note given instead."""
        return self.paper.value if isinstance(self.paper, Reported) else self.paper


def claims_table(claims: Iterable[Claim]) -> pd.DataFrame:
    """The claims as a table with :data:`COLUMNS`, verdicts as their plain words."""
    return pd.DataFrame([(c.claim, c.reported, c.measured, c.verdict.value) for c in claims], columns=list(COLUMNS))


def verdict_sentence(profile: str, claims: pd.DataFrame) -> str:
    """One sentence naming which of a chapter's claims (a :func:`claims_table`) this run reproduces."""
    groups = {v.value: "; ".join(claims.loc[claims.reproduced == v.value, "claim"]) or "none" for v in Verdict}
    reproduced = int((claims.reproduced == Verdict.YES.value).sum())
    return (
        f"Profile `{profile}`: of the paper's {len(claims)} claims checked here, this run reproduces {reproduced} "
        f"({groups['yes']}); not reproduced: {groups['no']}; untestable in this run: {groups['untestable']}."
    )
