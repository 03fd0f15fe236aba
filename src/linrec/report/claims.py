"""One contract for a chapter's results: a :class:`Claim` per checked statement or headline number.

Each analysis checks the paper's statements part by part and returns :class:`Claim` objects that carry
what this run measured (as text, and as the number behind it with its interval and unit where there is
one) beside what the paper reports. A claim that tests a statement has a :class:`Verdict`, one of three
values, never free text; a headline number the chapter reports without testing anything
(:meth:`Claim.measure`) has none. Every tested claim states its decision rule (``rule``), fixed where the
claim is made, and says whether the statement is the paper's (its side is a :class:`Reported` figure) or a check
this book adds. The book's runtime records every claim in the ledger and shows the tested ones as
:class:`Verdicts` (the conclusion in one sentence, :func:`verdict_sentence`, then each claim's verdict with its
rule) beside :func:`claims_table` (always the same four columns).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import pandas as pd

from linrec.errors import LinrecError
from linrec.report.paper import Reported

COLUMNS = ("claim", "paper (reported)", "this run (measured)", "reproduced")
"""The columns of every claims table."""

PLAIN = "all models"
"""What a claim made without a subject (:meth:`Claim.of`) is about, unless a chapter says otherwise: the chapter's
models pooled."""


class Verdict(str, Enum):
    """Whether this run reproduces a claim: yes, no, or untestable (the run has no case for it)."""

    YES = "yes"
    NO = "no"
    UNTESTABLE = "untestable"

    def __str__(self) -> str:
        return self.value

    def words(self, of_paper: bool = True) -> str:
        """The verdict as a reader reads it: on a statement of the paper "reproduced", "not reproduced" or
        "untestable in this run"; on a check this book adds (nothing to reproduce) "holds", "does not hold" or
        "untestable in this run"."""
        yes, no = ("reproduced", "not reproduced") if of_paper else ("holds", "does not hold")
        return {"yes": yes, "no": no, "untestable": "untestable in this run"}[self.value]


@dataclass(frozen=True)
class Claim:
    """A checked statement or a headline number: what the paper says (a :class:`Reported` or a note), what this
    run found (``measured``, the text shown; ``value``, ``interval`` and ``unit``, the number behind it), the
    verdict (None for a number reported without a test) and, for a tested claim, the rule that gave it."""

    claim: str
    paper: Reported | str
    measured: str
    verdict: Verdict | None
    value: float | None = None
    interval: tuple[float, float] | None = None
    unit: str = ""
    note: str = ""
    rule: str = ""
    subject: str = ""  # whom it is about, where a chapter makes it about several (a model): :meth:`of`

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
        rule: str,
    ) -> Claim:
        """A claim whose verdict is ``holds`` (None: untestable in this run) by ``rule``: when the verdict is
        "yes", when "no", when "untestable", with its thresholds, in words a reader can check against the numbers.
        A verdict without its rule cannot be read, so an empty ``rule`` is an error."""
        if not rule.strip():
            raise LinrecError(f"the claim '{claim}' needs its decision rule (rule=...) to state a verdict")
        verdict = Verdict.UNTESTABLE if holds is None else (Verdict.YES if holds else Verdict.NO)
        return cls(claim, paper, measured, verdict, value, interval, unit, note, rule.strip())

    @classmethod
    def measure(
        cls,
        quantity: str | Reported,
        measured: str | float,
        *,
        paper: Reported | str = "not reported",
        interval: tuple[float, float] | None = None,
        unit: str = "",
        note: str = "",
    ) -> Claim:
        """A headline number with no verdict. ``quantity`` may be a :class:`Reported` constant (its name and the
        paper's value are used), or a name of this run's own with the paper's figure as ``paper`` (where what was
        measured is not what the paper measured, e.g. other models); a number given as ``measured`` is also its
        ``value``."""
        name, reported = (quantity.quantity, quantity) if isinstance(quantity, Reported) else (quantity, paper)
        value = None if isinstance(measured, str) else float(measured)
        return cls(name, reported, str(measured), None, value, interval, unit, note)

    def of(self, subject: str) -> Claim:
        """This claim about ``subject`` (e.g. one model of several), named so that the ledger keeps it apart."""
        return replace(self, claim=f"{self.claim} ({subject})", subject=subject)

    @property
    def name(self) -> str:
        """The statement without its subject (what :meth:`of` added to :attr:`claim`)."""
        return self.claim.removesuffix(f" ({self.subject})") if self.subject else self.claim

    @property
    def reported(self) -> str:
        """The paper's side as text: the reported value, or the note given instead."""
        return self.paper.value if isinstance(self.paper, Reported) else self.paper

    def _repr_markdown_(self) -> str:
        """In a notebook: the claim and what this run measured as one wrapped sentence, the verdict with its rule
        where it has one (a printed line would be clipped)."""
        if self.verdict is not None:
            return verdict_line(self)
        return f"**{self.claim}**: {self.measured}" + (f"; {self.note}" if self.note else "") + "."

    @property
    def tested(self) -> bool:
        """Whether this claim tests a statement (has a verdict)."""
        return self.verdict is not None

    @property
    def from_paper(self) -> bool:
        """Whether the statement is the paper's (its side is a :class:`Reported` figure), not a check this book adds
        (a control, or a test the paper does not make)."""
        return isinstance(self.paper, Reported)

    @property
    def source(self) -> str:
        """Where the paper states it (e.g. "Fig. 3"), empty for a check this book adds."""
        return self.paper.source if isinstance(self.paper, Reported) else ""


def claims_table(claims: Iterable[Claim]) -> pd.DataFrame:
    """The tested claims as a table with :data:`COLUMNS`, verdicts as their plain words."""
    rows = [(c.claim, c.reported, c.measured, c.verdict.value) for c in claims if c.verdict is not None]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def named(claims: Sequence[Claim], plain: str) -> str:
    """``claims`` named for a list: each statement once, with the subjects it was tested on where there are
    several (``plain`` for the claim made without one), e.g. "learned: all models, zoo-neox; b"."""
    subjects: dict[str, list[str]] = {}
    for c in claims:
        subjects.setdefault(c.name, []).append(c.subject or plain)
    return "; ".join(name if who == [plain] else f"{name}: {', '.join(who)}" for name, who in subjects.items())


def _tally(claims: Sequence[Claim], clause: Callable[[Verdict, int], str], plain: str) -> str:
    """``clause(verdict, count)`` for each verdict among ``claims`` (always for "yes"), with the claims named once
    each (:func:`named`), as one list."""
    parts = []
    for verdict in Verdict:
        group = [c for c in claims if c.verdict is verdict]
        if group or verdict is Verdict.YES:
            parts.append(clause(verdict, len(group)) + (f" ({named(group, plain)})" if group else ""))
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _reproduces(verdict: Verdict, n: int) -> str:
    return {Verdict.YES: "reproduces", Verdict.NO: "does not reproduce", Verdict.UNTESTABLE: "cannot test"}[
        verdict
    ] + f" {n}"


def _holds(verdict: Verdict, n: int) -> str:
    one = n == 1
    return (
        f"{n} "
        + {
            Verdict.YES: "holds" if one else "hold",
            Verdict.NO: "does not hold" if one else "do not hold",
            Verdict.UNTESTABLE: "cannot be tested",
        }[verdict]
    )


def verdict_sentence(profile: str, claims: Sequence[Claim], plain: str = PLAIN) -> str:
    """The conclusion over the tested ``claims`` in one sentence, the same in every chapter: under ``profile``, how
    many of the paper's statements this run reproduces, does not reproduce or cannot test, and how many of the
    checks this book adds (controls, tests of statements the paper does not make) hold, each statement named once
    with the subjects it was tested on (``plain``: what a claim made without a subject is about)."""
    tested = [c for c in claims if c.verdict is not None]
    if not tested:
        raise LinrecError("a verdict needs at least one tested claim (Claim.check); headline numbers have none")
    papers, ours = [c for c in tested if c.from_paper], [c for c in tested if not c.from_paper]
    clauses = []
    if papers:
        n = "one claim" if len(papers) == 1 else f"{len(papers)} claims"
        clauses.append(f"of the {n} of the paper tested here, this run {_tally(papers, _reproduces, plain)}")
    if ours:
        n = "one check" if len(ours) == 1 else f"{len(ours)} checks"
        clauses.append(f"of the {n} this book adds, {_tally(ours, _holds, plain)}")
    return f"Under profile `{profile}`, " + "; ".join(clauses) + "."


def anchor(chapter: str, name: str) -> str:
    """The HTML id of statement ``name``'s verdict on ``chapter``'s page, which the chapter's summary links."""
    return "verdict-" + re.sub(r"[^a-z0-9]+", "-", f"{chapter} {name}".lower()).strip("-")


def _whose(claim: Claim) -> str:
    return f"the paper's, {claim.source}" if claim.from_paper else "this book's check"


def _rule(claim: Claim) -> str:
    return claim.rule if claim.rule.endswith(".") else f"{claim.rule}."


def verdict_line(claim: Claim) -> str:
    """One tested claim as a reader reads it: its name, whose statement it is, its verdict, what was measured and
    the rule that turned the measurement into the verdict."""
    if claim.verdict is None:
        raise LinrecError(f"'{claim.claim}' is a headline number, not a tested claim: it has no verdict")
    words = claim.verdict.words(claim.from_paper)
    return f"**{claim.claim}** ({_whose(claim)}): **{words}**. Measured: {claim.measured}. Rule: {_rule(claim)}"


def verdict_lines(claims: Sequence[Claim], plain: str = PLAIN) -> list[tuple[str, str, list[str]]]:
    """The tested ``claims`` grouped by statement, in order: its name, its line (whose, and the rule where every
    subject shares it) and one line per subject (``plain`` for the claim made without one) with its verdict, what
    was measured and, where the subjects' rules differ, its own rule. A statement made once, about no subject, is
    its :func:`verdict_line` alone."""
    groups: dict[str, list[Claim]] = {}
    for c in claims:
        if c.verdict is not None:
            groups.setdefault(c.name, []).append(c)
    out: list[tuple[str, str, list[str]]] = []
    for name, group in groups.items():
        if len(group) == 1 and not group[0].subject:
            out.append((name, verdict_line(group[0]), []))
            continue
        shared = len({c.rule for c in group}) == 1
        head = f"**{name}** ({_whose(group[0])})" + (f". Rule: {_rule(group[0])}" if shared else ".")
        subs = [
            f"{c.subject or plain}: **{Verdict(c.verdict).words(c.from_paper)}**. Measured: {c.measured}."
            + ("" if shared else f" Rule: {_rule(c)}")
            for c in group
        ]
        out.append((name, head, subs))
    return out


@dataclass(frozen=True)
class Verdicts:
    """What a chapter concludes from its tested claims: :func:`verdict_sentence`, then each statement's verdicts
    (:func:`verdict_lines`), each statement named once. Printed as plain text; in a notebook, a wrapped Markdown
    block (a printed line would be clipped) in which each statement carries the id its chapter's summary links
    (:func:`anchor`; no ``chapter``: none)."""

    profile: str
    claims: tuple[Claim, ...]
    plain: str = PLAIN
    chapter: str = ""

    def __post_init__(self) -> None:
        verdict_sentence(self.profile, self.claims)  # no tested claim: an error here, not an empty block later

    def __str__(self) -> str:
        lines = [verdict_sentence(self.profile, self.claims, self.plain)]
        for _, head, subs in verdict_lines(self.claims, self.plain):
            lines += [head, *(f"  {sub}" for sub in subs)]
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """The notebook's plain-text form beside the Markdown: the printed lines (:meth:`__str__`), not the fields'
        repr, whose floats at full precision would make two executed copies differ below any printed digit."""
        printer.text(str(self))

    def _repr_markdown_(self) -> str:
        lines = [f"> **Verdict.** {verdict_sentence(self.profile, self.claims, self.plain)}", ">"]
        for name, head, subs in verdict_lines(self.claims, self.plain):
            target = f'<span id="{anchor(self.chapter, name)}"></span>' if self.chapter else ""
            lines += [f"> - {target}{head}", *(f">   - {sub}" for sub in subs)]
        return "\n".join(lines)
