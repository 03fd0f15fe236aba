"""How long a chapter takes, stated at its top from the measurements in ``book/resources.json``.

Two records feed the sentence, both written by ``book/resources.py``: ``builds``, the per-chapter wall times
of whole builds of the book on a CPU (``--record-build``, read from the build's log: the measurements the
chapters share captured first, then the chapters two at a time, the longest first),
and ``gpu``, the chapters' times on a GPU at the paper's model sizes (the ``shapes`` profile: the paper's
models in their real shapes, no downloads). :func:`run_time_note` writes the sentence from them, with the
machine and date that measured them; nothing in it is typed by hand, and a chapter without a measurement
says so. The notebooks carry the sentence as written text (:func:`bookbuild.notebooks.paired_notebook`),
so it reaches Colab, where ``book/`` is not installed.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path

import nbformat

from bookbuild.layout import BookError

GPU_TIME = re.compile(r"^(\d+(?:\.\d+)?) \(([^()]+)\)$")
"""A measured GPU time in ``resources.json``'s ``gpu`` column: "147 (H100)" (seconds, the GPU)."""


def load(path: Path) -> dict | None:
    """The measurements of ``book/resources.json`` (None when the file does not exist)."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise BookError(f"{path} is not valid JSON ({err}): rewrite it with book/resources.py") from None


def duration(seconds: float) -> str:
    """A wall time as a reader wants it: "50 s" under two minutes, else whole minutes."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def span(values: list[float]) -> str:
    """One duration, or the range "3 to 5 minutes" of several (a single value when they round alike)."""
    low, high = duration(min(values)), duration(max(values))
    if low == high:
        return low
    unit = high.split()[-1]
    return f"{low.removesuffix(' ' + unit)} to {high}"


def count(n: int, noun: str) -> str:
    """ "one build", "two builds", "12 builds"."""
    words = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    return f"{words[n] if n < len(words) else n} {noun}{'' if n == 1 else 's'}"


def builds(resources: Mapping, profile: str) -> list[dict]:
    """The whole builds of ``profile`` that ``resources`` records (``--record-build``), oldest first."""
    return [b for b in resources.get("builds", []) if b.get("profile") == profile]


def run_time_note(resources: Mapping, stem: str) -> str:
    """The "Run time" paragraph of chapter ``stem``: its CPU time at the ``offline`` profile over the recorded
    builds, the first-run zoo training those builds did, and its GPU time at the paper's sizes."""
    offline = builds(resources, "offline")
    cpu = [b["chapters"][stem] for b in offline if stem in b["chapters"]]
    if cpu:
        where = "; ".join(sorted({f"{b['machine']}, {b['date']}" for b in offline}))
        text = (
            f"On a CPU (`offline` profile): {span(cpu)}, in {count(len(cpu), 'full build')} of the book on {where} "
            "(two chapters at a time"
        )
        if measured := [b["measure_s"] for b in offline if b.get("measure_s")]:
            text += f", after {span(measured)} capturing the measurements the chapters share"
        text += ")."
        if zoo := [b["zoo_s"] for b in offline if b.get("zoo_s")]:
            text += (
                f" The model zoo is trained the first time a chapter needs it: {span(zoo)} in those builds; a "
                "chapter that finds it missing from the cache warns before training it."
            )
    else:
        text = "This chapter's time on a CPU (`offline` profile) has not been measured."
    gpu = GPU_TIME.match(str((resources.get("gpu") or {}).get(stem, "")))
    if gpu:
        text += (
            f" On a GPU at the paper's model sizes (`shapes` profile, nothing downloaded): "
            f"{duration(float(gpu.group(1)))} on one {gpu.group(2)}."
        )
    else:
        text += " Its time on a GPU at the paper's model sizes has not been measured."
    return f"**Run time.** {text}"


def this_machine() -> str:
    """This machine as the recorded builds name theirs: "2 CPU cores (x86_64)"."""
    return f"{os.cpu_count()} CPU cores ({platform.machine()})"


TIMINGS = "timings.json"
"""The file beside the executed chapters in which ``execute`` records each chapter's wall time in that build."""

SLACK = (0.5, 1.5, 30.0)
"""How far a build's time may fall from the span a page states before the page counts as stale: below half its
shortest, or over one and a half times its longest, plus 30 s either way (two cores shared with other work, caches
warm or cold)."""


def record_times(out_dir: Path, profile: str, seconds: Mapping[str, float]) -> None:
    """Add this build's chapter times to ``out_dir``'s :data:`TIMINGS` (those of another profile or machine are
    dropped), with this machine's description in the form :func:`run_time_note` names machines by."""
    path = out_dir / TIMINGS
    machine = this_machine()
    known = load(path) or {}
    chapters = known.get("chapters", {}) if known.get("profile") == profile and known.get("machine") == machine else {}
    path.write_text(json.dumps({"profile": profile, "machine": machine, "chapters": {**chapters, **seconds}}, indent=1))


def stale_run_times(executed: Path, resources: Mapping | None) -> list[str]:
    """Where an executed chapter's stated run time disagrees with the measurements: its note is not the one
    ``resources`` gives now (the page was built before the last record), or this build of the ``offline`` profile,
    on a machine of the kind the note names, took a time outside the stated span (:data:`SLACK`)."""
    measured = load(executed / TIMINGS)
    if measured is None or resources is None:
        return []
    problems = []
    for stem, seconds in measured["chapters"].items():
        page = executed / f"{stem}.ipynb"
        if not page.exists():
            continue
        title = nbformat.read(page, as_version=4).cells[0].source
        if run_time_note(resources, stem) not in title:
            problems.append(f"{stem}: the page states another run time than book/resources.json: execute it again")
        offline = [b for b in builds(resources, "offline") if b["machine"] == measured["machine"]]
        stated = [b["chapters"][stem] for b in offline if stem in b["chapters"]]
        low, high, plus = SLACK
        outside = stated and not low * min(stated) - plus <= seconds <= high * max(stated) + plus
        if measured["profile"] == "offline" and outside:
            problems.append(
                f"{stem}: this build took {duration(seconds)}; the page states {span(stated)} from the recorded "
                "builds: record this one (book/resources.py --record-build LOG --profile offline) and build again"
            )
    return problems
