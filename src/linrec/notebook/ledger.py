"""A ledger of every chapter's claims and headline numbers, for the "paper vs this run" appendix.

:func:`record` writes a chapter's :class:`~linrec.report.claims.Claim` objects under the current profile (a
claim already recorded under the same name is replaced); :func:`start` clears a chapter's entries at the top
of a run so stale numbers never survive a re-run; :func:`ledger` reads every chapter's entries back as one
table, :func:`by_chapter` splits it into one short table per chapter for the appendix, and :func:`claims_page`
writes the tested claims as the intro's table (claim, chapter, the paper's figure, this build's figure, verdict).
Chapters do not call it: :meth:`linrec.notebook.chapter.Chapter.report` does.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from linrec.cache import cache_dir
from linrec.report.claims import PLAIN, Claim, Verdict, anchor
from linrec.report.tables import formatted

COLUMNS = ["chapter", "quantity", "measured", "unit", "paper (reported)", "reproduced", "note"]
"""The ledger's columns: ``measured`` is the number behind a claim where it has one, else its text, and
``reproduced`` its verdict (empty for a headline number reported without a test). Each entry also keeps the
claim's rule, where the paper states it (``source``, empty for a check this book adds) and the chapter's figure it
is read from (``figure``, a label), for :func:`claims_page`."""


def _path(profile: str, chapter: str) -> Path:
    return cache_dir() / "results" / profile / f"{chapter}.json"


def start(profile: str, chapter: str) -> None:
    """Forget what an earlier run of ``chapter`` recorded under ``profile``, and what a chapter of another name once
    recorded under its number (``NN_``): a chapter renumbered leaves no stale entries under its old name."""
    path = _path(profile, chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f"{chapter.split('_', 1)[0]}_*.json"):
        if old != path:
            old.unlink()
    path.write_text("[]")


def _entry(chapter: str, claim: Claim, figure: str | None, plain: str) -> dict:
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
        "rule": claim.rule,
        "source": claim.source,
        "figure": figure or "",
        "name": claim.name,
        "subject": claim.subject or plain,
    }


def record(
    profile: str, chapter: str, claims: Iterable[Claim], figure: str | None = None, plain: str = PLAIN
) -> list[dict]:
    """Add ``claims`` to ``chapter``'s entries under ``profile``, read from the chapter's figure labelled ``figure``
    (None: no one figure), a claim made without a subject being about ``plain``; return the entries written."""
    new = [_entry(chapter, claim, figure, plain) for claim in claims]
    path = _path(profile, chapter)
    entries = json.loads(path.read_text()) if path.exists() else []
    names = {entry["quantity"] for entry in new}
    entries = [e for e in entries if e["quantity"] not in names] + new
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=1))
    return new


def entries(profile: str) -> list[dict]:
    """Every recorded entry of ``profile`` with all its fields, in chapter order."""
    rows = []
    for path in sorted((cache_dir() / "results" / profile).glob("*.json")):
        rows.extend(json.loads(path.read_text()))
    return rows


def ledger(profile: str) -> pd.DataFrame:
    """Every recorded entry of ``profile``, in chapter order, with :data:`COLUMNS`."""
    return pd.DataFrame(entries(profile), columns=COLUMNS)


def claims_page(profile: str) -> str:
    """The tested claims ``profile``'s chapters recorded, as the Markdown table the intro includes: one row per
    claim with its chapter, where the paper states it, the chapter's figure and the verdict.

    A claim made about several subjects (models, :meth:`Claim.of`) shares its row: the verdict cell gives each
    subject's verdict after its name, the claim made without one first (about the chapter's models pooled, or
    what the chapter said it is about). Roles link the chapter and the figure, so the page is read where the
    chapters are rendered (the book's intro).
    """
    rows: dict[tuple[str, str], dict] = {}
    for entry in entries(profile):
        if not entry["reproduced"]:
            continue
        claim, subject = entry["name"], entry["subject"]
        row = rows.setdefault((entry["chapter"], claim), {"verdicts": {}, "figure": "", "source": ""})
        row["verdicts"][subject] = Verdict(entry["reproduced"]).words(of_paper=bool(entry.get("source")))
        row["figure"] = row["figure"] or entry.get("figure", "")
        row["source"] = row["source"] or entry.get("source", "")
    lines = [
        f"This build ran the `{profile}` profile. Each row is a claim a chapter tests, with where the paper states it "
        "(\"this book's check\" for a control or a test the paper does not make), the chapter's figure it is read from "
        'and the verdict on each model it was tested on ("all models": the chapter\'s models pooled). The rule '
        "behind each verdict is stated beside it in its chapter.",
        "",
        "| claim | chapter | the paper's figure | this build's figure | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (chapter, claim), row in rows.items():
        verdicts = row["verdicts"]
        cell = "; ".join(f"{s}: {v}" for s, v in verdicts.items())
        figure = f"{{numref}}`{row['figure']}`" if row["figure"] else "—"
        source = row["source"] or "this book's check"
        link = f"{{doc}}`{int(chapter[:2])} </book/chapters/{chapter}>`"
        lines.append(f"| {claim} | {link} | {source} | {figure} | {cell} |")
    if not rows:
        lines[2:] = ["No chapter has recorded a tested claim for this profile: execute the chapters first."]
    return "\n".join(lines) + "\n"


FOUND = {"yes": "held", "no": "did not hold", "untestable": "could not be tested"}
"""How the summary at the top of a chapter groups its verdicts (a reproduced claim of the paper "held")."""


def findings(profile: str, chapter: str) -> str | None:
    """The box a chapter's page opens with (Markdown): one line per model the chapter tested claims on (the claims
    made without one first: its models pooled), naming the claims that held, did not hold and could not be tested,
    each linked to its verdict on the page. None where the chapter recorded no tested claim under ``profile``."""
    tested = [e for e in entries(profile) if e["chapter"] == chapter and e["reproduced"]]
    if not tested:
        return None
    lines = [f":::{{admonition}} What this chapter found (`{profile}` profile)", ":class: tip", ""]
    for subject in dict.fromkeys(e["subject"] for e in tested):
        about = [e for e in tested if e["subject"] == subject]
        parts = []
        for verdict, words in FOUND.items():
            names = dict.fromkeys(e["name"] for e in about if e["reproduced"] == verdict)
            links = ", ".join(f'<a href="#{anchor(chapter, n)}">{html.escape(n)}</a>' for n in names)
            parts += [f"{words}: {links}"] if names else []
        lines.append(f"- **{subject}**: " + "; ".join(parts) + ".")
    return "\n".join([*lines, ":::"])


def empty_note(profile: str, colab: bool) -> str:
    """What the appendix says in place of an empty ledger: why it is empty and what to do (Markdown).

    On Colab (``colab``) every notebook opens in a runtime of its own, with a cache of its own, so the appendix
    never sees what the chapter notebooks recorded unless they share a cache that outlives the runtime.
    """
    if not colab:
        return (
            f"**No chapter has recorded results under the `{profile}` profile in this cache** ({cache_dir()}). "
            f"Run the chapters first (`make book PROFILE={profile}`, or each chapter notebook in this environment), "
            "then this appendix again."
        )
    return (
        f"**No chapter has recorded results under the `{profile}` profile in this runtime.** Each chapter records "
        "its numbers in linrec's cache, and on Colab every notebook opens in a fresh runtime with an empty cache, "
        "so this appendix cannot see what you ran in the chapter notebooks. Either read the appendix of the built "
        "book, whose chapters ran in one environment, or give every notebook the same cache on your Google Drive: "
        "at the top of each chapter notebook and of this one, run\n\n"
        '```python\nimport os\nfrom google.colab import drive\n\ndrive.mount("/content/drive")\n'
        'os.environ["LINREC_CACHE"] = "/content/drive/MyDrive/linrec-cache"\n```\n\n'
        "then run the chapters, then this appendix. The shared cache also keeps the models and measurements, so "
        "a chapter run again starts from them."
    )


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
