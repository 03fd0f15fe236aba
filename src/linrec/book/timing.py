"""How long a chapter takes, stated at its top from the measurements in ``book/resources.json``.

Two records feed the sentence, both written by ``book/resources.py``: ``builds``, the per-chapter wall times
of whole builds of the book on a CPU (``--record-build``, read from the build's log: the measurements the
chapters share captured first, then the chapters two at a time, the longest first),
and ``gpu``, the chapters' times on a GPU at the paper's model sizes (the ``shapes`` profile: the paper's
models in their real shapes, no downloads). :func:`run_time_note` writes the sentence from them, with the
machine and date that measured them; nothing in it is typed by hand, and a chapter without a measurement
says so. The notebooks carry the sentence as written text (:func:`linrec.book.notebooks.paired_notebook`),
so it reaches Colab, where ``book/`` is not installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from linrec.book.layout import BookError

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
