"""A ledger of headline numbers: each chapter records what it measured, the appendix lists them all.

``record`` appends one measured quantity (with the paper's reported value beside it when the
quantity is one of the :mod:`linrec.report.paper` constants) to the chapter's ledger for the
current profile; ``start`` clears a chapter's ledger at the top
of a run so stale numbers never survive a re-run. ``ledger`` reads every chapter's entries back as
one table, for the "paper vs this run" appendix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from linrec.cache import cache_dir
from linrec.report.paper import Reported


def _path(profile: str, chapter: str) -> Path:
    return cache_dir() / "results" / profile / f"{chapter}.json"


def start(profile: str, chapter: str) -> None:
    """Forget what an earlier run of ``chapter`` recorded under ``profile``."""
    path = _path(profile, chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[]")


def record(
    profile: str,
    chapter: str,
    quantity: str | Reported,
    measured: object,
    *,
    paper: str = "",
    unit: str = "",
    note: str = "",
) -> dict:
    """Add one measured value. For a quantity the paper reports, pass its :class:`Reported` constant as
    ``quantity``: its name and the paper's value are written beside the measurement; otherwise ``paper``
    may say what the paper has instead (e.g. "not reported")."""
    if isinstance(quantity, Reported):
        quantity, paper = quantity.quantity, quantity.value
    entry = {
        "chapter": chapter,
        "quantity": quantity,
        "measured": measured if isinstance(measured, str) else float(measured),
        "unit": unit,
        "paper (reported)": paper,
        "note": note,
    }
    path = _path(profile, chapter)
    entries = json.loads(path.read_text()) if path.exists() else []
    entries = [e for e in entries if e["quantity"] != quantity] + [entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1))
    return entry


def ledger(profile: str) -> pd.DataFrame:
    """Every recorded entry of ``profile``, in chapter order."""
    rows = []
    for path in sorted((cache_dir() / "results" / profile).glob("*.json")):
        rows.extend(json.loads(path.read_text()))
    return pd.DataFrame(rows, columns=["chapter", "quantity", "measured", "unit", "paper (reported)", "note"])
