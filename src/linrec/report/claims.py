"""One contract for a chapter's results: a :class:`Claim` per checked statement or headline number.

Each analysis checks the paper's statements part by part and returns :class:`Claim` objects that carry
what this run measured (as text, and as the number behind it with its interval and unit where there is
one) beside what the paper reports. A claim that tests a statement has a :class:`Verdict`, one of three
values, never free text; a headline number the chapter reports without testing anything
(:meth:`Claim.measure`) has none. The book's runtime records every claim in the ledger and shows the
tested ones with :func:`claims_table` (always the same four columns) and :func:`verdict_sentence`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
    """A checked statement or a headline number: what the paper says (a :class:`Reported` or a note), what this
    run found (``measured``, the text shown; ``value``, ``interval`` and ``unit``, the number behind it), and the
    verdict (None for a number reported without a test)."""

    claim: str
    paper: Reported | str
    measured: str
    verdict: Verdict | None
    value: float | None = None
    interval: tuple[float, float] | None = None
    unit: str = ""
    note: str = ""

    @classmethod
    def check(
        cls,
        claim: str,
        paper: Reported | str,
        measured: str,
        holds: bool | None,
        *,
        value: float | None = None,
        interval: tuple[float, float] | None = None,
        unit: str = "",
        note: str = "",
    ) -> Claim:
        """A claim whose verdict is ``holds`` (None: untestable in this run)."""
        verdict = Verdict.UNTESTABLE if holds is None else (Verdict.YES if holds else Verdict.NO)
        return cls(claim, paper, measured, verdict, value, interval, unit, note)

    @classmethod
    def measure(
        cls,
        quantity: str | Reported,
        measured: str | float,
        *,
        paper: str = "not reported",
        interval: tuple[float, float] | None = None,
        unit: str = "",
        note: str = "",
    ) -> Claim:
        """A headline number with no verdict. ``quantity`` may be a :class:`Reported` constant (its name and the
        paper's value are used); a number given as ``measured`` is also its ``value``."""
        name, reported = (quantity.quantity, quantity) if isinstance(quantity, Reported) else (quantity, paper)
        value = None if isinstance(measured, str) else float(measured)
        return cls(name, reported, str(measured), None, value, interval, unit, note)

    def of(self, subject: str) -> Claim:
        """This claim about ``subject`` (e.g. one model of several), named so that the ledger keeps it apart."""
        return replace(self, claim=f"{self.claim} ({subject})")

    @property
    def reported(self) -> str:
        """The paper's side as text: the reported value, or the note given instead."""
        return self.paper.value if isinstance(self.paper, Reported) else self.paper

    @property
    def tested(self) -> bool:
        """Whether this claim tests a statement (has a verdict)."""
        return self.verdict is not None


def claims_table(claims: Iterable[Claim]) -> pd.DataFrame:
    """The tested claims as a table with :data:`COLUMNS`, verdicts as their plain words."""
    rows = [(c.claim, c.reported, c.measured, c.verdict.value) for c in claims if c.verdict is not None]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def verdict_sentence(profile: str, claims: Sequence[Claim]) -> str:
    """One sentence naming which of the tested ``claims`` this run reproduces, the same in every chapter."""
    tested = [c for c in claims if c.verdict is not None]
    groups = {v: "; ".join(c.claim for c in tested if c.verdict is v) or "none" for v in Verdict}
    return (
        f"Profile `{profile}`: of the {len(tested)} claims checked here, this run reproduces "
        f"{sum(c.verdict is Verdict.YES for c in tested)} ({groups[Verdict.YES]}); not reproduced: "
        f"{groups[Verdict.NO]}; untestable in this run: {groups[Verdict.UNTESTABLE]}."
    )
