"""What each chapter costs at a profile's real sizes: peak memory, cache on disk, CPU and wall time.

``python book/resources.py --profile shapes`` (``make resources``) executes every chapter in its own
process, in book order, with a fresh cache that the chapters share as the book's build does, then
runs each chapter a second time with ``HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1`` to show that
everything it needs came from the first run's cache. It writes ``book/resources.json`` (after each
chapter, so an interrupted run keeps what it measured) and the page ``book/resources.md``, and
removes the cache (several GB) at the end.

Peak memory and disk depend on the moments and row samples a chapter holds, which stay the profile's.
Evaluation tokens, probe steps, chapter 3's grid and chapter 8's checkpoints are reduced (:data:`REDUCED`)
so that two CPU cores finish in about an hour, and the scale chapter's rows: the times are those of the
reduced run. ``--only`` measures some chapters again (each on an empty cache of its own) and puts their
rows in place of the recorded ones, dated.

Peak resident memory is read two ways: the largest single process (``ru_maxrss`` of the chapter's
process tree, the Jupyter kernel in practice), and the sum over the tree sampled twice a second.

The page also holds what was measured elsewhere, so that the book's instructions need quote no dated figure: the
whole builds ``--record-build`` adds (with a ``note`` per build where one was written), and ``sections``, each a
labelled heading the other pages link to and its paragraphs and tables, every figure with its date and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from bookbuild.timing import is_cold, this_machine  # noqa: E402 (the repository's own linrec)
from linrec.experiment.profiles import PYTHIA_SUITE  # noqa: E402

OUT = ROOT / "_build" / "resources"
RESULTS = ROOT / "book" / "resources.json"
PAGE = ROOT / "book" / "resources.md"
GB = 1e9

SERIES_ROWS = 16_384
"""Rows per block of each Pythia model in the scale chapter's measured run: as many as the row sample the profile
keeps, so memory and disk are the profile's, and an eighth of the 1.4b's 131,072 (capture time grows with rows)."""

REDUCED: dict[str, dict[str, object]] = {
    "fields": {"eval_tokens": 4096, "probe": {"steps": 20}},
    "params": {"GRID_BLOCKS": 2, "CHECKPOINTS": ["init", "step1000", "final"], "TRY_BLOCKS": 1},
    "chapter_fields": {
        "10_scale": {"budgets": {m: {"rows_per_block": SERIES_ROWS} for m in PYTHIA_SUITE}},
    },
}
"""What the measured run reduces: profile fields (``--set``), chapter parameters (``--param``) and, for some
chapters only, more profile fields."""

BUDGETS = {"peak_rss_gb": 10.0, "cache_gb": 8.0}
"""The issue's budgets: a chapter's peak resident memory (Colab has 12.7 GB), the whole book's cache."""


def chapters() -> list[str]:
    return sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants now (0 once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def size_of(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def run_chapter(stem: str, profile: str, cache: Path, out: Path, offline: bool) -> dict[str, object]:
    """Execute one chapter in its own process; its peak memory, CPU and wall time, and the cache it added."""
    command = [sys.executable, str(ROOT / "book" / "build.py"), "execute", "--profile", profile, "--only", stem]
    fields = {**REDUCED["fields"], **REDUCED["chapter_fields"].get(stem, {})}
    command += [f"--set={k}={json.dumps(v)}" for k, v in fields.items()]
    source = (ROOT / "notebooks" / f"{stem}.py").read_text()
    declared = {k: v for k, v in REDUCED["params"].items() if re.search(rf"^{k} = ", source, re.MULTILINE)}
    command += [f"--param={k}={json.dumps(v)}" for k, v in declared.items()]
    command += ["--out", str(out)]
    env = {"LINREC_CACHE": str(cache), "PYTHONPATH": str(ROOT / "src")}
    if offline:
        env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    before = size_of(cache)
    row = run_tree(command, env, out / f"{stem}{'-offline' if offline else ''}.log")
    return {"chapter": stem, **row, "cache_added_gb": (size_of(cache) - before) / GB, "date": time.strftime("%Y-%m-%d")}


def run_tree(command: list[str], env: dict[str, str], log: Path) -> dict[str, object]:
    """Run ``command`` to its end: whether it succeeded, its peak memory (GB), CPU and wall time (s).

    ``ru_maxrss`` of ``wait4`` is the largest process of the tree (descendants count once reaped,
    as a kernel is by papermill); the tree's sum is sampled twice a second while it runs.
    """
    start = time.perf_counter()
    with log.open("w") as sink:
        proc = subprocess.Popen(command, env={**os.environ, **env}, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT)
        peak = {"tree": 0}
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.5):
                peak["tree"] = max(peak["tree"], tree_rss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
    return {
        "ok": proc.returncode == 0,
        "peak_rss_gb": usage.ru_maxrss * 1024 / GB,  # Linux reports kilobytes
        "tree_rss_gb": peak["tree"] / GB,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": time.perf_counter() - start,
        "log": str(log),
    }


def measure(profile: str, only: list[str] | None, offline_pass: bool) -> dict[str, object]:
    """Run the chapters (then again offline), saving the results after each one; the cache is removed at the end.

    With ``only``, the rows of those chapters replace the recorded ones of the same profile and the rest are kept;
    the whole book's cache stays the recorded run's, and the page adds what the chapters measured later added.
    """
    import torch

    OUT.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=OUT))
    recorded = json.loads(RESULTS.read_text()) if only and RESULTS.exists() else {}
    fresh = {"chapters": [], "offline": [], "gpu": None, "date": time.strftime("%Y-%m-%d")}
    first = recorded.get("profile") != profile  # no record of this profile to add to
    results: dict[str, object] = {
        **(fresh if first else recorded),
        "profile": profile,
        "reduced": REDUCED,
        "budgets": BUDGETS,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, no GPU used",
        "torch": torch.__version__,
    }
    passes = [("chapters", False), ("offline", True)][: 1 + offline_pass]
    try:
        for part, offline in passes:
            for stem in only or chapters():
                print(f"[resources] {stem}: running{' again offline' if offline else ''}", flush=True)
                row = run_chapter(stem, profile, cache, OUT, offline=offline)
                kept = [r for r in results[part] if r["chapter"] != stem]
                results[part] = sorted([*kept, row], key=lambda r: r["chapter"])
                print(f"[resources] {stem}: {json.dumps(row)}", flush=True)
                if not only or first:  # a first record's cache is this run's
                    results["cache_gb"] = size_of(cache) / GB
                    results["cache_parts_gb"] = {p.name: size_of(p) / GB for p in sorted(cache.iterdir()) if p.is_dir()}
                RESULTS.write_text(json.dumps(results, indent=1) + "\n")  # an interrupted run keeps what it measured
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return results


def later(results: dict[str, object]) -> list[dict]:
    """The chapter rows measured after the recorded whole run (``--only``), each alone on an empty cache."""
    return [r for r in results["chapters"] if r.get("date", results["date"]) != results["date"]]


def page(results: dict[str, object]) -> str:
    """The docs page: the per-chapter table and what it was measured on."""
    budgets = results["budgets"]
    offline = {r["chapter"]: r for r in results["offline"]}
    lines = [
        "# Resources per chapter",
        "",
        f"What each chapter needs at the real sizes of the `{results['profile']}` profile: the paper's models in "
        "their real shapes (random weights, real vocabularies) on local texts laid out like the paper's corpora, "
        "at the paper's full row counts. Each chapter ran in its own process, in book order, sharing one cache "
        "as the book's build does. Produced by `make resources` "
        f"on {results['date']} ({results['machine']}, torch {results['torch']}).",
        "",
        "Peak memory and disk depend on the rows held, which are the profile's. To finish on two CPU cores "
        "the run reduced what does not change them:",
        "",
        *[f"- profile field `{k}` = `{json.dumps(v)}`" for k, v in results["reduced"]["fields"].items()],
        *[f"- chapter parameter `{k}` = `{json.dumps(v)}`" for k, v in results["reduced"]["params"].items()],
        *[
            f"- for chapter {stem} only, profile field `{k}` = `{json.dumps(v)}`"
            for stem, fields in results["reduced"].get("chapter_fields", {}).items()
            for k, v in fields.items()
        ],
        "",
        "So the time columns are this reduced run's on the CPU; at the profile's own settings the probes and "
        "swaps take far longer without a GPU.",
        "",
        "| chapter | peak RSS, largest process (GB) | peak RSS, all processes (GB) | cache added (GB) "
        "| CPU time (s) | wall (s) | second run offline | GPU time (s) |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    gpu = results["gpu"]
    for row in results["chapters"]:
        again = offline.get(row["chapter"])
        second = "not run" if again is None else ("works" if again["ok"] else "**fails**")
        status = "" if row["ok"] else " (**failed**)"
        lines.append(
            f"| {row['chapter']}{status} | {row['peak_rss_gb']:.2f} | {row['tree_rss_gb']:.2f} "
            f"| {row['cache_added_gb']:.2f} | {row['cpu_s']:.0f} | {row['wall_s']:.0f} | {second} "
            f"| {'not measured (no GPU lent)' if gpu is None else gpu.get(row['chapter'], 'not run')} |"
        )
    lines += [""]
    if since := later(results):
        lines.append(
            "- Measured later, each alone on an empty cache of its own (so its row includes every capture it needs): "
            + ", ".join(f"{r['chapter']} ({r['date']})" for r in since)
            + "."
        )
    lines += [f"- {note}" for note in results.get("notes", [])]  # what the run itself could not say
    worst = max(r["peak_rss_gb"] for r in results["chapters"])
    worst_tree = max(r["tree_rss_gb"] for r in results["chapters"])
    whole = results["cache_gb"] + sum(r["cache_added_gb"] for r in since)
    lines += [
        f"- Largest peak: {worst:.2f} GB in one process, {worst_tree:.2f} GB over all of a chapter's processes; "
        f"budget {budgets['peak_rss_gb']:.0f} GB per chapter "
        f"({'met' if max(worst, worst_tree) <= budgets['peak_rss_gb'] else '**not met**'}).",
        f"- The whole book's cache: {whole:.2f} GB; budget {budgets['cache_gb']:.0f} GB "
        f"({'met' if whole <= budgets['cache_gb'] else '**not met**'}). By part, in the whole run "
        f"({results['cache_gb']:.2f} GB): "
        + ", ".join(f"{k} {v:.2f} GB" for k, v in results["cache_parts_gb"].items())
        + (f"; and {whole - results['cache_gb']:.2f} GB the chapters measured later added." if since else "."),
        f"- Total: {sum(r['cpu_s'] for r in results['chapters']) / 60:.0f} CPU minutes, "
        f"{sum(r['wall_s'] for r in results['chapters']) / 60:.0f} minutes of wall time.",
        "",
    ]
    return "\n".join(lines + build_lines(results.get("builds", [])) + section_lines(results.get("sections", [])))


def section_lines(sections: list[dict]) -> list[str]:
    """The page's sections of measurements taken outside the run above (``sections`` in ``book/resources.json``), each
    dated where it was taken: a heading with the label the book's other pages link to (``[text](label)``), then its
    blocks, each a paragraph or a list of lines kept together (a table, a list)."""
    lines = []
    for section in sections:
        lines += [f"({section['label']})=", f"## {section['title']}", ""]
        for block in section["text"]:
            lines += [*(block if isinstance(block, list) else [block]), ""]
    return lines


SHOWN_BUILDS = 4
"""Builds the page's table shows, the last ones: a column each."""

BUILDS_LABEL = "resources-builds"
"""The label of the page's section of whole builds, which the book's other pages link to."""


def build_lines(builds: list[dict]) -> list[str]:
    """The page's table of whole book builds (``--record-build``), from which each chapter's run-time note states its
    time (:func:`bookbuild.timing.stated`), and what the builds that carry a ``note`` ran."""
    if not builds:
        return []
    earlier, shown = len(builds[:-SHOWN_BUILDS]), builds[-SHOWN_BUILDS:]  # more columns than a page is wide
    lines = [
        f"({BUILDS_LABEL})=",
        "## Whole builds",
        "",
        "Each chapter states its run time under its title from the builds of the whole book `book/resources.json` "
        "records, the last cold one and the last warm one: the measurements the chapters share captured first, on "
        "every core, then the chapters two at a time, the longest first (read from the builds' logs by "
        f"`book/resources.py --record-build`). Wall time in seconds of the last {len(shown)}"
        + (f" ({earlier} earlier in the file)" if earlier else "")
        + ":",
        "",
        "| chapter | " + " | ".join(f"{b['profile']}, {b['machine']}, {b['date']}, {_kind(b)}" for b in shown) + " |",
        "|---|" + "---:|" * len(shown),
    ]
    stems = sorted({stem for b in shown for stem in b["chapters"]})
    for stem in stems:
        cells = [f"{b['chapters'][stem]:.0f}" if stem in b["chapters"] else "" for b in shown]
        lines.append(f"| {stem} | " + " | ".join(cells) + " |")
    zoo = ["not trained" if b.get("zoo_s") is None else f"{b['zoo_s']:.0f}" for b in shown]
    measured = ["" if b.get("measure_s") is None else f"{b['measure_s']:.0f}" for b in shown]
    lines += ["| zoo, before the chapters | " + " | ".join(zoo) + " |"]
    lines += ["| shared measurements, before the chapters | " + " | ".join(measured) + " |", ""]
    if notes := [b["note"] for b in builds if b.get("note")]:
        lines += ["What the builds described here ran, oldest first, and what changed from one to the next:", ""]
        lines += [*(f"- {note}" for note in notes), ""]
    return lines


def _kind(build: dict) -> str:
    """Whether a recorded build was cold (it trained the zoo: nothing cached) or warm (read the cache)."""
    return "cold" if is_cold(build) else "warm"


BUILD_LINE = re.compile(r"\[book\] (?:(\d\d_\w+): done in|zoo '(\w+)' ready in) ([\d.]+) s$", re.MULTILINE)
ZOO_TRAINING = re.compile(r"^(zoo-[\w-]+:\s+\d+%|training \d+ zoo model\(s\): \d+/)", re.MULTILINE)
"""A line of the zoo being trained: a bar of one model (older logs) or the line of all of them (``build_zoo``)."""
MEASURED_LINE = re.compile(r"^\[book\] measurements ready in ([\d.]+) s$", re.MULTILINE)


def build_record(log: Path, profile: str) -> dict[str, object]:
    """The chapter times of one whole book build, read from the log of ``book/build.py all|execute``.

    The machine is this one's (run it where the build ran) and the date the log's. ``zoo_s`` is the time the
    build spent making the zoo ready, kept only where the log shows the zoo being trained (a cached zoo is
    ready in a fraction of a second, which says nothing about training it); ``measure_s`` the time it spent
    capturing the measurements the chapters share, before them.
    """
    text = log.read_text(errors="replace")
    chapters = {m.group(1): float(m.group(3)) for m in BUILD_LINE.finditer(text) if m.group(1)}
    zoo = [float(m.group(3)) for m in BUILD_LINE.finditer(text) if m.group(2)]
    if not chapters:
        raise SystemExit(f"{log}: no '[book] NN_topic: done in N s' line; is it the log of a book build?")
    return {
        "profile": profile,
        "machine": this_machine(),
        "date": time.strftime("%Y-%m-%d", time.gmtime(log.stat().st_mtime)),
        "log": log.name,
        "zoo_s": zoo[0] if zoo and ZOO_TRAINING.search(text) else None,
        "measure_s": float(found.group(1)) if (found := MEASURED_LINE.search(text)) else None,
        "chapters": chapters,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="shapes", help="the profile to measure (default shapes)")
    parser.add_argument("--only", nargs="+", metavar="NN_topic", help="only these chapters")
    parser.add_argument("--no-offline-pass", action="store_true", help="skip the second, offline run")
    parser.add_argument("--page-only", action="store_true", help="rewrite the page from book/resources.json")
    parser.add_argument(
        "--record-build",
        nargs="+",
        metavar="LOG",
        help="add the chapter times of whole book builds (their logs, on this machine) for --profile to "
        "book/resources.json's 'builds', which the chapters' run-time notes read",
    )
    args = parser.parse_args(argv)
    if args.record_build:
        results = json.loads(RESULTS.read_text())
        results["builds"] = [
            *results.get("builds", []),
            *(build_record(Path(log), args.profile) for log in args.record_build),
        ]
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        print(f"[resources] recorded {len(args.record_build)} build(s) in {RESULTS.relative_to(ROOT)}")
        return 0
    if args.page_only:
        results = json.loads(RESULTS.read_text())
    else:
        results = measure(args.profile, args.only, not args.no_offline_pass)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    PAGE.write_text(page(results))
    print(f"[resources] wrote {PAGE.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}")
    return 0 if all(r["ok"] for r in results["chapters"] + results["offline"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
