"""Execute chapters with papermill for one profile, two at a time where the profile allows.

:func:`execute` writes each chapter's notebook with an "Open in Colab" button and its parameters (the
profile, or a dict changing its fields), trains the profile's zoo first (dequantising its packaged models
meanwhile), captures the measurements the chapters share (:mod:`bookbuild.prepare`), runs the chapters, the
longest first, with ``LINREC_PROGRESS=0`` (no progress bars in the built pages), and then writes the intro's
claims table from what they recorded (:func:`write_claims`). :func:`run_chapters` is the scheduler: each chapter a
papermill process in a session of its own, a chapter that reads another's results after it, the appendix after
the rest, and the first failure stopping everything with the chapter and cell named.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import yaml

from bookbuild import timing
from bookbuild.layout import Book, BookError
from bookbuild.notebooks import RESOURCES, colab_link, paired_notebook, sources
from bookbuild.prepare import GATING_CHAPTER, Planned, planned, planned_gating, planned_swaps, prepare_measurements

if TYPE_CHECKING:
    from linrec.experiment.profiles import Profile

KERNEL = "linrec-venv"


def kernel() -> str:
    """Register (in this environment) a kernel that runs this very Python, and return its name."""
    from ipykernel.kernelspec import install

    install(kernel_name=KERNEL, display_name=f"linrec ({sys.prefix})", prefix=sys.prefix)
    return KERNEL


def prepare_models(chosen: Profile) -> None:
    """Train the profile's zoo up front, all models in parallel workers, and dequantise its packaged pretrained
    models meanwhile, whatever of it is not cached yet.

    Chapters would otherwise train each missing model on first use, one at a time, and the first chapters
    running side by side would wait for one another's dequantising. The dequantising runs in a thread of this
    process while the zoo's workers train (this process only waits for them), so that it fills the cores the
    zoo leaves idle in its last minutes instead of following it with one core idle.
    """
    from linrec.models.gguf import dequantised
    from linrec.models.packaged import packaged_file
    from linrec.models.zoo import build_zoo
    from linrec.progress import heartbeat, no_library_bars

    files = {name: packaged_file(name) for name in chosen.packaged}  # a missing wheel is named before any work
    failed: list[BaseException] = []

    def dequantise_all() -> None:
        try:
            for name in chosen.packaged:
                start = time.perf_counter()  # each model its own time, not a running total
                with heartbeat(f"[book] dequantising '{name}'"), no_library_bars():  # lines, not transformers' bars
                    dequantised(files[name])
                print(f"[book] pretrained '{name}' ready in {time.perf_counter() - start:.1f} s", flush=True)
        except BaseException as err:  # raised in the main thread, after the zoo
            failed.append(err)

    worker = threading.Thread(target=dequantise_all, name="dequantise", daemon=True)  # Ctrl-C does not wait for it
    worker.start()
    if chosen.zoo is not None:
        start = time.perf_counter()
        build_zoo(chosen.zoo, progress=True)
        print(f"[book] zoo '{chosen.zoo.name}' ready in {time.perf_counter() - start:.1f} s", flush=True)
    worker.join()
    if failed:
        raise failed[0]


def assignments(pairs: list[str] | None, what: str) -> dict[str, object]:
    """``NAME=VALUE`` pairs as a dict, each value read as YAML (``20`` an int, ``[a, b]`` a list, ``x`` a string)."""
    out: dict[str, object] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BookError(f"{what} '{pair}' is not NAME=VALUE")
        out[key.strip()] = yaml.safe_load(value)
    return out


AFTER_THE_REST = ("13_paper_vs_run",)
"""Chapters that read what the others recorded (the ledger): they start once every other chapter is done."""

AFTER: dict[str, tuple[str, ...]] = {"12_tasks": ("11_pruning",)}
"""Chapters that read what another computes, each with those it waits for: chapter 12 reads chapter 11's costs, and
started beside it, it held its lane about 20 minutes waiting for their cache lock in the cold build of 2026-12-03
(1,517 s in all for some 5 minutes of work); it starts once they are done, and the lane takes the next chapter."""


def next_ready(
    queue: list[str], live: Collection[str], last: tuple[str, ...] = AFTER_THE_REST, after: Mapping = AFTER
) -> str | None:
    """The first chapter of ``queue`` that may start while ``live`` run: none it waits for (:data:`AFTER`; every
    other chapter for the ``last`` ones) is queued or running. None where each waits; a BookError where nothing runs
    and each waits all the same (a chapter waiting for itself, or two for each other)."""
    pending = {*queue, *live}
    for stem in queue:
        waits = {s for s in pending if s not in last} if stem in last else set(after.get(stem, ()))
        if not waits & (pending - {stem}) and stem not in waits:
            return stem
    if queue and not live:
        raise BookError(f"the chapters {queue} each wait for another of them ({dict(after)}): none can start")
    return None


def default_jobs(profile: Profile) -> int:
    """Chapters executed at a time: for the profiles of the project's small zoo models one per core, at most two
    (each chapter computes on one thread, so two use two cores); one for hub-sized profiles, whose chapters each
    hold several GB and share one GPU."""
    return max(1, min(2, os.cpu_count() or 1)) if profile.zoo is not None else 1


@dataclasses.dataclass(frozen=True)
class ChapterRun:
    """One chapter for papermill: the notebook it reads, the YAML file of its parameters, where the result goes."""

    stem: str
    notebook: Path
    parameters: Path
    out: Path

    @property
    def partial(self) -> Path:
        """Where papermill writes while the chapter runs (renamed to ``out`` once it completes): a hidden name that
        ``check``, ``html`` and the table of contents never take for a chapter."""
        return self.out.with_name(f".{self.out.stem}.partial{self.out.suffix}")


def _path_seconds(stem: str, expected: Mapping[str, float], after: Mapping[str, tuple[str, ...]] = AFTER) -> float:
    """The seconds expected from a chapter's start to the end of the chapters that wait for it (:data:`AFTER`): what
    it is started by, so that a short chapter another waits for (chapter 11, its studies made up front, before
    chapter 12) starts early, not last with its follower after it while the other lane is idle."""
    waiting = [s for s, waits in after.items() if stem in waits]
    return expected.get(stem, math.inf) + sum(_path_seconds(s, expected, after) for s in waiting)


def _start(run: ChapterRun, kernel_name: str, progress_bar: bool, cwd: Path | None) -> subprocess.Popen:
    run.out.unlink(missing_ok=True)  # a failed or stopped chapter leaves no older one that looks current
    run.partial.unlink(missing_ok=True)  # a failure is then read from this run's notebook, never an older one
    command = [sys.executable, "-m", "bookbuild.execute", str(run.notebook), str(run.partial), str(run.parameters),
               kernel_name, "progress" if progress_bar else "quiet", str(cwd or "")]  # fmt: skip
    # A session of its own: stopped as a group when the build stops, never by a Ctrl-C meant for the build.
    return subprocess.Popen(command, start_new_session=True, env=chapter_environment(os.environ))


QUIET_BARS = "ignore:IProgress not found:Warning"
"""The warnings filter of a chapter's kernel for tqdm's note that it found no notebook widgets (ipywidgets is not a
dependency; linrec draws its bars as text there, :mod:`linrec.progress`), which a library importing ``tqdm.auto``
before linrec would leave in the executed chapter's output."""


def chapter_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The environment of a chapter's papermill process and its kernel: ``base`` with the build's package on the path
    (it is not installed: the process finds it beside this one's, book/) and :data:`QUIET_BARS` after the caller's
    own warnings filters."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), base.get("PYTHONPATH")]))
    warnings = ",".join(filter(None, [base.get("PYTHONWARNINGS"), QUIET_BARS]))
    return {**base, "PYTHONPATH": path, "PYTHONWARNINGS": warnings}


_SOCKET = re.compile(r"^linrec-kernel-(\d+)-")
"""A chapter kernel's IPC socket file: its papermill process's id, then the socket's number."""


def papermill_one(notebook: str, out: str, parameters: str, kernel_name: str, progress: str, cwd: str) -> None:
    """Execute one chapter with papermill (what :func:`_start` runs in a process of its own).

    Its kernel talks over IPC sockets where the platform has them: over TCP, which nothing here needs, every
    kernel warns that its traffic is unencrypted."""
    import logging

    import papermill
    from traitlets.config import Config

    from linrec.files import remove_orphans

    logging.basicConfig(level=logging.WARNING)
    # Each kernel its own socket path (jupyter_client's default, "kernel-ipc" in the working directory, is shared
    # by chapters running side by side).
    sockets = Path(tempfile.gettempdir())
    remove_orphans(sockets, "linrec-kernel-*-*", _SOCKET)  # left by a chapter that was killed
    ipc = {"transport": "ipc", "ip": str(sockets / f"linrec-kernel-{os.getpid()}")} if os.name == "posix" else {}
    papermill.execute_notebook(
        notebook, out, parameters=yaml.safe_load(Path(parameters).read_text()), kernel_name=kernel_name,
        progress_bar=progress == "progress", cwd=cwd or None,
        config=Config({"KernelManager": ipc}),
    )  # fmt: skip


def _stop(proc: subprocess.Popen) -> None:
    """End a chapter's papermill process group (its kernel, in a session of its own, exits with its parent)."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _failure(run: ChapterRun, returncode: int) -> str:
    """What stopped a chapter, read from its executed notebook: the first cell that raised."""
    if run.partial.exists():
        for cell in nbformat.read(run.partial, as_version=4).cells:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    return (
                        f"cell In [{cell.execution_count}] raised {output.ename}: {output.evalue}\n"
                        f"(the executed notebook with the traceback: {run.partial})"
                    )
    return f"papermill exited with status {returncode} before a cell raised; its messages are above"


def run_chapters(
    runs: list[ChapterRun],
    kernel_name: str,
    jobs: int = 1,
    last: tuple[str, ...] = AFTER_THE_REST,
    cwd: Path | None = None,
    expected: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Execute ``runs`` with papermill, ``jobs`` at a time (progress bars only for one at a time), the longest first
    by their ``expected`` seconds with those of the chapters that wait for them (:func:`_path_seconds`; those
    without come first, in order; the least idle time at the end), each once
    the chapters it waits for are done (:func:`next_ready`: those of :data:`AFTER`, and for the ``last`` chapters all
    the others); each runs in ``cwd`` (papermill's default when None).

    The first failure stops the build: chapters still running are stopped, queued ones never start, and the
    error names the chapter and the cell. An interrupt stops every running chapter the same way. A chapter gets
    its final name only once papermill completes it (:attr:`ChapterRun.partial` until then); a stopped chapter's
    partial notebook is removed, a failed one's kept for its traceback. Returns each chapter's wall seconds.
    """
    expected = expected or {}
    took: dict[str, float] = {}
    longest = sorted((r for r in runs if r.stem not in last), key=lambda r: -_path_seconds(r.stem, expected))
    queue = longest + [r for r in runs if r.stem in last]
    live: dict[str, tuple[subprocess.Popen, float]] = {}
    try:
        while queue or live:
            while queue and len(live) < max(1, jobs):
                ready = next_ready([r.stem for r in queue], live, last)
                if ready is None:
                    break
                run = queue.pop(next(i for i, r in enumerate(queue) if r.stem == ready))
                print(f"[book] {run.stem}: started", flush=True)
                live[run.stem] = (_start(run, kernel_name, jobs <= 1, cwd), time.perf_counter())
            time.sleep(0.2)
            for run in runs:
                if run.stem not in live or (code := live[run.stem][0].poll()) is None:
                    continue
                start = live.pop(run.stem)[1]
                if code != 0:
                    raise BookError(f"{run.stem}: {_failure(run, code)}")
                os.replace(run.partial, run.out)
                took[run.stem] = time.perf_counter() - start
                print(f"[book] {run.stem}: done in {took[run.stem]:.1f} s", flush=True)
        return took
    finally:
        for stem, (proc, _) in live.items():
            _stop(proc)
            next(r for r in runs if r.stem == stem).partial.unlink(missing_ok=True)  # half executed


def execute(
    book: Book,
    profile: str,
    only: list[str] | None = None,
    fields: dict[str, object] | None = None,
    params: dict[str, object] | None = None,
    out_dir: Path | None = None,
    jobs: int | None = None,
) -> None:
    """Execute each chapter of ``book`` with papermill into ``out_dir`` (default ``book.chapters``), ``jobs`` at a time
    (:func:`default_jobs`), stopping at the first cell error.

    ``fields`` change the profile's fields (passed as ``PROFILE = {"name": profile, **fields}``); ``params``
    set other parameters, each in the chapters whose parameters cell defines it.
    """
    import papermill

    from linrec.cache import check_cache
    from linrec.experiment.profiles import get_profile
    from linrec.files import check_writable

    resolved = get_profile(profile, **(fields or {}))  # a bad profile or field fails here, not in each chapter
    check_cache()
    only = only or list(resolved.chapters)  # a profile may run some chapters only (scale: the ones about size)
    chosen = [s for s in sources(book) if not only or s.stem in only]
    if only and len(chosen) != len(set(only)):
        raise BookError(f"unknown chapter in {only}; chapters are {[s.stem for s in sources(book)]}")
    declared = {s.stem: papermill.inspect_notebook(str(s.with_suffix(".ipynb"))) for s in chosen}
    unknown = sorted(set(params or {}) - set().union(*declared.values()))
    if unknown:
        raise BookError(f"no chapter of {[s.stem for s in chosen]} has the parameters {unknown}")
    if jobs is not None and jobs < 1:
        raise BookError(f"--jobs must be at least 1, got {jobs}")
    name = kernel()
    os.environ["LINREC_PROGRESS"] = "0"  # the kernels papermill starts inherit it: no progress bars in the pages
    out_dir = out_dir or book.chapters
    check_writable(out_dir, "the executed chapters' directory", "give another with --out")
    os.environ["LINREC_FIGURE_DATA"] = str(out_dir.resolve())  # the figures' CSV files go beside the chapters
    prepare_models(resolved)
    jobs = jobs or default_jobs(resolved)
    given = _parameter(declared.get("03_activation", {}), "CONTROL_SEEDS", params)
    seeds = [s for s in given if isinstance(s, int)] if isinstance(given, (list, tuple)) else []  # the chapter checks
    plans = [
        p
        for p in [*planned(resolved, seeds), *planned_swaps(resolved), *_gating_plans(resolved, declared, params)]
        if p.wanted_by(list(declared))
    ]
    prepare_measurements(resolved, plans, jobs)
    print(f"[book] profile {profile}: {len(chosen)} chapter(s), {jobs} at a time", flush=True)
    with tempfile.TemporaryDirectory(prefix="linrec-book-") as tmp:
        runs = []
        for source in chosen:
            nb = paired_notebook(book, source)
            button = (
                f"```{{button-link}} {colab_link(book, source.stem)}\n:color: primary\n:outline:\n"
                "Open this chapter in Colab\n```"
            )
            nb.cells.insert(1, nbformat.v4.new_markdown_cell(button, id=f"{source.stem}-colab"))
            run = ChapterRun(
                source.stem,
                Path(tmp) / f"{source.stem}.ipynb",
                Path(tmp) / f"{source.stem}.yml",
                out_dir / f"{source.stem}.ipynb",
            )
            nbformat.write(nb, run.notebook)
            parameters = {
                "PROFILE": {"name": profile, **fields} if fields else profile,
                **{k: v for k, v in (params or {}).items() if k in declared[source.stem]},
            }
            run.parameters.write_text(yaml.safe_dump(parameters))
            runs.append(run)
        took = run_chapters(runs, name, jobs, cwd=book.root, expected=expected_seconds(book, profile))
    timing.record_times(out_dir, profile, took)
    for run in runs:
        add_findings(run.out, profile, run.stem)
    write_claims(book, profile)


def _gating_plans(
    profile: Profile, declared: Mapping[str, Mapping[str, Mapping[str, str]]], params: dict[str, object] | None
) -> list[Planned]:
    """Chapter 11's studies as this build runs it (:func:`planned_gating`), where it runs them at their default
    models, blocks and tokens; none otherwise (the chapter then computes what it asks for)."""
    chapter = declared.get(GATING_CHAPTER)
    if chapter is None or any(
        _parameter(chapter, name, params) is not None
        for name in ("MODELS", "GATE_MODELS", "GATE_BLOCKS", "EVAL_TOKENS")
    ):
        return []
    shares, budget = _parameter(chapter, "GATE_SHARES", params), _parameter(chapter, "BUDGET", params)
    if not isinstance(shares, (list, tuple)) or not isinstance(budget, str):
        return []  # the chapter checks its parameters and says what is wrong
    return planned_gating(profile, shares, budget)


def _parameter(declared: Mapping[str, Mapping[str, str]], name: str, params: dict[str, object] | None) -> object:
    """The value parameter ``name`` of a chapter takes in this build: as set with ``--param``, else the default its
    parameters cell ``declared`` (papermill's inspection of it; None when it declares no such parameter)."""
    if params and name in params:
        return params[name]
    return ast.literal_eval(declared[name]["default"]) if name in declared else None


def expected_seconds(book: Book, profile: str) -> dict[str, float]:
    """What the scheduler starts the longest chapters first by: each chapter's wall seconds in the last build of
    ``profile`` that ``book/resources.json`` records as cold (one that trained the zoo), the longest any recorded build
    took for a chapter it lacks (empty when none is recorded). A warm build's times say nothing of which chapters
    compute most on an empty cache, and a cold build started in a warm build's order left its costliest chapter
    running alone at the end; the last cold build's own times order its chapters better than the longest of
    several, which a build run beside other work inflates."""
    builds = timing.builds(timing.load(book.root / RESOURCES) or {}, profile)
    longest: dict[str, float] = {}
    for build in builds:
        for stem, seconds in build["chapters"].items():
            longest[stem] = max(seconds, longest.get(stem, seconds))
    cold = [b for b in builds if timing.is_cold(b)]
    return {**longest, **(cold[-1]["chapters"] if cold else {})}


def add_findings(executed: Path, profile: str, stem: str) -> None:
    """Open the executed chapter with what it found (:func:`linrec.notebook.ledger.findings`), after its Colab button:
    known only once it ran, so written here, into the page and not into the Colab notebook."""
    from linrec.notebook.ledger import findings

    box = findings(profile, stem)
    if box is None:
        return
    nb = nbformat.read(executed, as_version=4)
    after = next((i for i, c in enumerate(nb.cells) if c.get("id") == f"{stem}-colab"), 0)
    nb.cells.insert(after + 1, nbformat.v4.new_markdown_cell(box, id=f"{stem}-findings"))
    nbformat.write(nb, executed)


def write_claims(book: Book, profile: str) -> Path:
    """Write the intro's claims table (:attr:`Book.claims`) from the claims ``profile``'s chapters recorded."""
    from linrec.notebook.ledger import claims_page

    book.claims.parent.mkdir(parents=True, exist_ok=True)
    book.claims.write_text(claims_page(profile))
    print(f"[book] wrote {book.claims.relative_to(book.root)} from the {profile} ledger", flush=True)
    return book.claims


if __name__ == "__main__":
    from papermill.exceptions import PapermillExecutionError

    try:
        papermill_one(*sys.argv[1:])
    except PapermillExecutionError:
        sys.exit(1)  # the build names the cell, read from the executed notebook (_failure)
    except KeyboardInterrupt:
        sys.exit(130)
