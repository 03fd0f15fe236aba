"""How long a chapter takes, stated at its top from the measurements in ``book/resources.json``.

Two records feed the sentence, both written by ``book/resources.py``: ``builds``, the per-chapter wall times
of whole builds of the book on a CPU (``--record-build``, read from the build's log: the measurements the
chapters share captured first, then the chapters two at a time, the longest first),
and ``gpu``, the chapters' times on a GPU at the paper's model sizes (the ``shapes`` profile: the paper's
models in their real shapes, no downloads). :func:`run_time_note` writes the sentence from them: one time for a
first build of the book (an empty cache: the zoo trained, every measurement captured) and one for a rebuild that
finds them cached, the machine named once and each time dated; nothing in it is typed by hand, and a chapter without
a measurement says so. The notebooks carry the sentence as written text (:func:`bookbuild.notebooks.paired_notebook`),
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


def builds(resources: Mapping, profile: str) -> list[dict]:
    """The whole builds of ``profile`` that ``resources`` records (``--record-build``), oldest first."""
    return [b for b in resources.get("builds", []) if b.get("profile") == profile]


def is_cold(build: Mapping) -> bool:
    """Whether a recorded build started from an empty cache: it trained the zoo (``zoo_s``, kept only where the log
    shows the training), so it also captured every measurement and computed every result the chapters cache."""
    return bool(build.get("zoo_s"))


def stated(resources: Mapping, stem: str) -> tuple[str, dict | None, dict | None]:
    """The builds chapter ``stem``'s note states its time from: the machine of the last ``offline`` build recorded,
    and on it the last cold build and the last cached rebuild that ran the chapter (None where there is none).

    The last, not the median, of each kind: the recorded builds span commits that made chapters cheaper or costlier
    (chapter 5's 4.8 minutes became 9.0 when it took Gemma 3's swaps back), so the last build is the one of the code
    a reader runs, and it is the build the scheduler already orders the chapters by
    (:func:`bookbuild.execute.expected_seconds`); the builds before it are on the Resources page.
    """
    offline = builds(resources, "offline")
    machine = offline[-1]["machine"] if offline else ""
    ran = [b for b in offline if b["machine"] == machine and stem in b["chapters"]]
    cold = [b for b in ran if is_cold(b)]
    cached = [b for b in ran if not is_cold(b)]
    return machine, cold[-1] if cold else None, cached[-1] if cached else None


def run_time_note(resources: Mapping, stem: str) -> str:
    """The "Run time" paragraph of chapter ``stem``: on the machine that measured it, its wall time in a first
    build of the book (an empty cache) and in a rebuild that finds everything cached (:func:`stated`), each one
    figure with its date, and its time on a GPU at the paper's sizes."""
    machine, cold, cached = stated(resources, stem)
    parts = []
    if cold:
        made = [f"trains the model zoo ({duration(cold['zoo_s'])})"]
        if cold.get("measure_s"):
            shared = duration(cold["measure_s"])
            made.append(f"captures the measurements and scores the perplexity passes the chapters share ({shared})")
        parts.append(
            f"{duration(cold['chapters'][stem])} in a first build of the book ({cold['date']}), which before the "
            f"chapters {' and '.join(made)}"
        )
    if cached:
        rebuild = duration(cached["chapters"][stem])
        parts.append(f"{rebuild} in a rebuild that finds all of it cached ({cached['date']})")
    if parts:
        text = f"On {machine}, `offline` profile, two chapters at a time: {'; '.join(parts)}."
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
"""How far a build's time may fall from a time a page states before the page counts as stale: below half of it, or
over one and a half times it, plus 30 s either way (two cores shared with other work)."""


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
    on the machine the note names, took a time near neither of the two it states, the first build's and the cached
    rebuild's (:data:`SLACK`; this build may be either)."""
    measured = load(executed / TIMINGS)
    if measured is None or resources is None:
        return []
    problems = []
    low, high, plus = SLACK
    for stem, seconds in measured["chapters"].items():
        page = executed / f"{stem}.ipynb"
        if not page.exists():
            continue
        title = nbformat.read(page, as_version=4).cells[0].source
        if run_time_note(resources, stem) not in title:
            problems.append(f"{stem}: the page states another run time than book/resources.json: execute it again")
        machine, *kinds = stated(resources, stem)
        times = {kind: b["chapters"][stem] for kind, b in zip(("a first build", "a cached rebuild"), kinds) if b}
        near = any(low * t - plus <= seconds <= high * t + plus for t in times.values())
        if measured["profile"] == "offline" and measured["machine"] == machine and times and not near:
            says = " and ".join(f"{duration(t)} in {kind}" for kind, t in times.items())
            problems.append(
                f"{stem}: this build took {duration(seconds)}; the page states {says}: record this build "
                "(book/resources.py --record-build LOG --profile offline) and build again"
            )
    return problems
