"""A ledger of every chapter's claims and headline numbers, for the "paper vs this run" appendix.

:func:`record` writes a chapter's :class:`~linrec.report.claims.Claim` objects under the current profile (a
claim already recorded under the same name is replaced); :func:`start` clears a chapter's entries at the top
of a run so stale numbers never survive a re-run; :func:`ledger` reads every chapter's entries back as one
table, and :func:`by_chapter` splits it into one short table per chapter for the appendix. Chapters do not call
it: :meth:`linrec.book.chapter.Chapter.report` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from linrec.cache import cache_dir
from linrec.report.claims import Claim
from linrec.report.tables import formatted

COLUMNS = ["chapter", "quantity", "measured", "unit", "paper (reported)", "reproduced", "note"]
"""The ledger's columns: ``measured`` is the number behind a claim where it has one, else its text, and
``reproduced`` its verdict (empty for a headline number reported without a test)."""


def _path(profile: str, chapter: str) -> Path:
    return cache_dir() / "results" / profile / f"{chapter}.json"


def start(profile: str, chapter: str) -> None:
    """Forget what an earlier run of ``chapter`` recorded under ``profile``."""
    path = _path(profile, chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[]")


def _entry(chapter: str, claim: Claim) -> dict:
    note = claim.note
    if claim.interval is not None:
        low, high = claim.interval
        note = f"interval [{low:+.3g}, {high:+.3g}]" + (f"; {note}" if note else "")
    return {
        "chapter": chapter,
        "quantity": claim.claim,
        "measured": claim.value if claim.value is not None else claim.measured,
        "unit": claim.unit,
        "paper (reported)": claim.reported,
        "reproduced": claim.verdict.value if claim.verdict is not None else "",
        "note": note,
    }


def record(profile: str, chapter: str, claims: Iterable[Claim]) -> list[dict]:
    """Add ``claims`` to ``chapter``'s entries under ``profile``; return the entries written."""
    new = [_entry(chapter, claim) for claim in claims]
    path = _path(profile, chapter)
    entries = json.loads(path.read_text()) if path.exists() else []
    names = {entry["quantity"] for entry in new}
    entries = [e for e in entries if e["quantity"] not in names] + new
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1))
    return new


def ledger(profile: str) -> pd.DataFrame:
    """Every recorded entry of ``profile``, in chapter order."""
    rows = []
    for path in sorted((cache_dir() / "results" / profile).glob("*.json")):
        rows.extend(json.loads(path.read_text()))
    return pd.DataFrame(rows, columns=COLUMNS)


def side_by_side(entries: pd.DataFrame, subject: str) -> pd.DataFrame:
    """The entries recorded about ``subject`` (named ``"<quantity> (<subject>)"``, :meth:`Claim.of`) beside the
    same quantities recorded without it, e.g. a pretrained model beside the zoo: one row per quantity about
    ``subject``, with the paper's value, the plain entry's measured value and verdict (empty where the
    chapter recorded none) and ``subject``'s."""
    suffix = f" ({subject})"
    mine = entries["quantity"].str.endswith(suffix)
    about = entries[mine].assign(quantity=entries.loc[mine, "quantity"].str.removesuffix(suffix))
    keep = ["chapter", "quantity", "measured", "reproduced"]
    joined = about[[*keep, "paper (reported)"]].merge(
        entries[~mine][keep], on=["chapter", "quantity"], how="left", suffixes=(f" ({subject})", "")
    )
    order = ["chapter", "quantity", "paper (reported)", "measured", "reproduced"]
    return joined[[*order, f"measured ({subject})", f"reproduced ({subject})"]].astype(object).fillna("")


def by_chapter(entries: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """:func:`ledger`'s entries as one table per chapter (in chapter order), for reading: ``quantity, paper
    (reported), measured`` (a number to 3 significant digits with its unit), ``reproduced`` and ``note``."""
    out = {}
    for chapter, group in entries.groupby("chapter", sort=True):
        measured = [f"{formatted(v)} {u}".strip() if u else formatted(v) for v, u in zip(group.measured, group.unit)]
        out[str(chapter)] = pd.DataFrame(
            {
                "quantity": group.quantity.to_list(),
                "paper (reported)": group["paper (reported)"].to_list(),
                "measured": measured,
                "reproduced": group.reproduced.to_list(),
                "note": group.note.to_list(),
            }
        )
    return out
