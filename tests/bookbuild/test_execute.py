"""bookbuild.execute: Execute chapters with papermill for one profile, two at a time where the profile allows."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import nbformat
import pytest

from bookbuild import check
from bookbuild import execute as ex
from bookbuild.layout import Book, BookError
from conftest import ROOT, book_script
from support.book import REPO


def _chapter(tmp_path: Path, stem: str, body: str):
    """A one-cell chapter for ``run_chapters`` whose parameter DIR is ``tmp_path``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("DIR = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(body),
    ]
    run = ex.ChapterRun(stem, tmp_path / f"{stem}.in.ipynb", tmp_path / f"{stem}.yml", tmp_path / f"{stem}.ipynb")
    nbformat.write(nb, run.notebook)
    run.parameters.write_text(f"DIR: {tmp_path}\n")
    return run


WAIT_FOR = """
import pathlib, time
d = pathlib.Path(DIR)
(d / "{me}.started").touch()
for _ in range(600):  # each waits for the other: only chapters running at the same time both finish
    if (d / "{other}.started").exists():
        break
    time.sleep(0.1)
else:
    raise RuntimeError("{other} never ran beside {me}")
(d / "{me}.done").touch()
"""


AFTER_BOTH = """
import pathlib
assert all((pathlib.Path(DIR) / f).exists() for f in ("01_a.done", "02_b.done")), "started before the rest ended"
"""


SLOW = """
import os, pathlib, time
(pathlib.Path(DIR) / "kernel.pid").write_text(str(os.getpid()))
time.sleep(600)
"""


FAILS_BESIDE_SLOW = """
import pathlib, time
while not (pathlib.Path(DIR) / "kernel.pid").exists():
    time.sleep(0.1)
raise ValueError("planted")
"""


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


RECORD_START = """
import pathlib
with open(pathlib.Path(DIR) / "order.txt", "a") as f:
    f.write("{me}\\n")
"""


def test_the_build_runs_chapters_without_progress_bars():
    text = (ROOT / "book" / "bookbuild" / "execute.py").read_text()
    assert 'os.environ["LINREC_PROGRESS"] = "0"' in text
    chapters = "".join(p.read_text() for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")))
    assert "progress=False" not in chapters and "progress=ch.progress" in chapters


def test_execute_reads_assignments_as_yaml_and_refuses_undeclared_parameters():
    assert ex.assignments(["eval_tokens=4096", "probe={steps: 20}", "CHECKPOINTS=[step0, step1000]"], "--set") == {
        "eval_tokens": 4096,
        "probe": {"steps": 20},
        "CHECKPOINTS": ["step0", "step1000"],
    }
    with pytest.raises(BookError, match="'eval_tokens' is not NAME=VALUE"):
        ex.assignments(["eval_tokens"], "--set")
    with pytest.raises(BookError, match=r"no chapter of \['02_heterogeneity'\] has the parameters \['GRID'\]"):
        ex.execute(REPO, "smoke", ["02_heterogeneity"], params={"GRID": 1})


@pytest.mark.slow
def test_chapters_run_two_at_a_time_and_the_appendix_after_the_rest(tmp_path, capfd):
    runs = [
        _chapter(tmp_path, "98_last", AFTER_BOTH),
        _chapter(tmp_path, "01_a", WAIT_FOR.format(me="01_a", other="02_b")),
        _chapter(tmp_path, "02_b", WAIT_FOR.format(me="02_b", other="01_a")),
    ]
    ex.run_chapters(runs, ex.kernel(), jobs=2, last=("98_last",))
    assert all(r.out.exists() and not r.partial.exists() for r in runs)
    assert "without encryption" not in capfd.readouterr().err  # kernels on IPC sockets: no TCP warning
    assert check._execution_problems(runs[0].out) == []  # what papermill completed passes the check


@pytest.mark.slow
def test_chapters_start_longest_first_and_unmeasured_ones_before_them(tmp_path):
    runs = [_chapter(tmp_path, stem, RECORD_START.format(me=stem)) for stem in ("01_a", "02_b", "03_c", "98_last")]
    ex.run_chapters(
        runs, ex.kernel(), jobs=1, last=("98_last",), expected={"01_a": 10.0, "02_b": 50.0, "98_last": 99.0}
    )
    assert (tmp_path / "order.txt").read_text().split() == ["03_c", "02_b", "01_a", "98_last"]


def test_a_chapter_another_waits_for_starts_by_the_time_of_both():
    expected = {"11_pruning": 18.0, "12_tasks": 258.0, "06_pitfall": 390.0, "05_compression": 237.0}
    assert ex._path_seconds("11_pruning", expected) == 276.0  # chapter 12 waits for it
    assert ex._path_seconds("12_tasks", expected) == 258.0
    chain = {"b": ("a",), "c": ("b",)}
    assert ex._path_seconds("a", {"a": 1.0, "b": 2.0, "c": 4.0}, chain) == 7.0
    assert ex._path_seconds("x", {}) == math.inf  # unmeasured: first, as before
    order = sorted(expected, key=lambda s: -ex._path_seconds(s, expected))
    assert order == ["06_pitfall", "11_pruning", "12_tasks", "05_compression"]


def test_the_scheduler_expects_the_last_cold_build_s_times_not_the_last_build_s(tmp_path):
    """A warm build recorded after a cold one must not make the cold build's costliest chapter start last; of two cold
    builds the later one's times count, and a chapter neither has takes the longest time any build recorded."""
    builds = [
        {"profile": "offline", "zoo_s": 600.0, "chapters": {"01_a": 900.0, "02_b": 300.0, "04_d": 50.0}},  # cold
        {"profile": "offline", "zoo_s": 500.0, "chapters": {"01_a": 700.0, "02_b": 800.0}},  # cold, later
        {"profile": "offline", "zoo_s": None, "chapters": {"01_a": 10.0, "02_b": 150.0, "03_c": 5.0}},  # warm
        {"profile": "smoke", "zoo_s": 9.0, "chapters": {"01_a": 5000.0}},
    ]
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "resources.json").write_text(json.dumps({"builds": builds}))
    expected = {"01_a": 700.0, "02_b": 800.0, "03_c": 5.0, "04_d": 50.0}
    assert ex.expected_seconds(Book(tmp_path), "offline") == expected
    assert ex.expected_seconds(Book(tmp_path), "paper") == {}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile", "nosuch"], "linrec: error: unknown profile 'nosuch'; choose one of paper, offline, smoke"),
        (["--set", "tokens=1"], "linrec: error: unknown profile field ['tokens']"),
        (["--set", "eval_tokens=-4"], "linrec: error: "),
    ],
)
def test_a_bad_profile_or_field_fails_the_build_before_any_chapter(argv, message, monkeypatch, capsys):
    build = book_script("build")
    monkeypatch.setattr(ex, "run_chapters", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    monkeypatch.setattr(ex, "prepare_models", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    assert build.main(["execute", "--only", "01_method", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_a_cache_that_cannot_hold_entries_fails_the_build_first(tmp_path, monkeypatch, capsys):
    build = book_script("build")
    monkeypatch.setattr(ex, "prepare_models", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    (tmp_path / "plain").write_text("a file")
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "plain"))
    assert build.main(["execute", "--profile", "smoke", "--only", "01_method"]) == 2
    assert f"linrec: error: cannot write the cache {tmp_path / 'plain'}" in capsys.readouterr().err


@pytest.mark.slow
def test_a_failing_chapter_stops_the_one_beside_it_and_the_queue(tmp_path):
    slow = _chapter(tmp_path, "01_slow", SLOW)
    bad = _chapter(tmp_path, "02_bad", FAILS_BESIDE_SLOW)
    queued = _chapter(tmp_path, "03_queued", "open(DIR + '/ran', 'w')")
    start = time.monotonic()
    with pytest.raises(BookError, match=r"02_bad: cell In \[\d+\] raised ValueError: planted"):
        ex.run_chapters([slow, bad, queued], ex.kernel(), jobs=2)
    assert not slow.out.exists() and not slow.partial.exists()  # stopped half way: no notebook left at all
    assert not bad.out.exists() and bad.partial.exists()  # failed: kept aside for its traceback
    assert time.monotonic() - start < 120  # not the 600 s the slow chapter would take
    pid = int((tmp_path / "kernel.pid").read_text())
    deadline = time.monotonic() + 20
    while _running(pid) and time.monotonic() < deadline:  # its kernel exits with its papermill process
        time.sleep(0.2)
    assert not _running(pid), f"the stopped chapter's kernel (pid {pid}) is still running"
    assert not (tmp_path / "ran").exists()


def test_an_interrupted_build_is_one_line_and_status_130(monkeypatch, capsys):
    build = book_script("build")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "execute", interrupted)
    assert build.main(["execute", "--profile", "smoke"]) == 130
    assert capsys.readouterr().err == "[book] interrupted\n"


def test_the_intro_claims_table_is_written_from_the_ledger(tmp_path, monkeypatch):
    from linrec.experiment.profiles import get_profile
    from linrec.notebook import ledger
    from linrec.report import paper
    from linrec.report.claims import Claim

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    book = Book(tmp_path)
    model = get_profile("smoke").models[0]
    near = Claim.check("near-linear blocks", paper.R2_RANGE, "0.999", True, rule="r")
    ledger.record("smoke", "02_x", [near, near.of(model)], "fig-x")
    path = ex.write_claims(book, "smoke")
    assert path == book.claims and path.parent.name == "_generated"
    row = "| near-linear blocks | {doc}`2 </book/chapters/02_x>` | abstract; Fig. 2 | {numref}`fig-x` "
    assert row + f"| all models: reproduced; {model}: reproduced |" in path.read_text()


def _models_stage(monkeypatch, dequantise):
    """prepare_models with a zoo whose training waits (up to 10 s) until the dequantising has started: the stages
    overlap, or training finds it not started."""
    import threading
    from types import SimpleNamespace

    import linrec.models.gguf as gguf
    import linrec.models.packaged as packaged
    import linrec.models.zoo as zoo

    started, seen = threading.Event(), []

    def dequantised(path):
        started.set()
        dequantise(path)

    monkeypatch.setattr(packaged, "packaged_file", lambda name: Path(f"/{name}.gguf"))
    monkeypatch.setattr(gguf, "dequantised", dequantised)
    monkeypatch.setattr(zoo, "build_zoo", lambda spec, progress: seen.append(started.wait(10)))
    ex.prepare_models(SimpleNamespace(packaged=("a", "b"), zoo=SimpleNamespace(name="z")))
    return seen


def test_the_pretrained_models_are_dequantised_while_the_zoo_trains(monkeypatch, capsys):
    done = []
    assert _models_stage(monkeypatch, done.append) == [True]
    assert done == [Path("/a.gguf"), Path("/b.gguf")]  # both, before prepare_models returns
    out = capsys.readouterr().out
    assert "[book] pretrained 'a' ready in" in out and "[book] zoo 'z' ready in" in out


def test_a_failed_dequantising_fails_the_stage_after_the_zoo(monkeypatch):
    def fails(path):
        raise OSError(f"cannot read {path}")

    with pytest.raises(OSError, match="cannot read /a.gguf"):
        _models_stage(monkeypatch, fails)


def test_a_chapter_waits_for_those_it_reads_and_the_lane_takes_the_next_meanwhile():
    """Chapter 12 reads chapter 11's costs: started beside it, it waited in its lane for their lock; it starts once
    they are done, the appendix once every other chapter is, and a chapter whose wait cannot end is an error."""
    after = {"12_tasks": ("11_pruning",)}
    queue = ["12_tasks", "11_pruning", "05_compression", "13_paper_vs_run"]
    assert ex.next_ready(queue, [], after=after) == "11_pruning"
    assert ex.next_ready(queue[::2], ["11_pruning"], after=after) == "05_compression"
    assert ex.next_ready(["12_tasks", "13_paper_vs_run"], ["05_compression"], after=after) == "12_tasks"
    assert ex.next_ready(["13_paper_vs_run"], ["12_tasks"], after=after) is None
    assert ex.next_ready(["13_paper_vs_run"], [], after=after) == "13_paper_vs_run"
    assert ex.next_ready(["12_tasks"], [], after=after) == "12_tasks"  # --only 12_tasks: chapter 11 not in the run
    assert ex.AFTER["12_tasks"] == ("11_pruning",)
    with pytest.raises(BookError, match="each wait for another of them"):
        ex.next_ready(["01_a", "02_b"], [], after={"01_a": ("02_b",), "02_b": ("01_a",)})


def test_a_chapter_s_kernel_hears_no_note_about_missing_notebook_widgets_and_keeps_the_caller_s_filters():
    """tqdm's 'IProgress not found' (no ipywidgets: linrec draws text bars there) is filtered in the environment a
    chapter's papermill process passes to its kernel, after any filters the caller set; other warnings still show."""
    import subprocess
    import sys

    env = ex.chapter_environment({"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "error::DeprecationWarning"})
    assert env["PYTHONWARNINGS"] == f"error::DeprecationWarning,{ex.QUIET_BARS}"
    assert env["PYTHONPATH"].split(":")[0] == str(ROOT / "book")
    code = ("import warnings; from tqdm import TqdmWarning; "
            "warnings.warn('IProgress not found. Please update jupyter and ipywidgets.', TqdmWarning); "
            "warnings.warn('another note', TqdmWarning)")  # fmt: skip
    heard = {}
    for name, environment in (("chapter", env), ("plain", {"PATH": "/usr/bin:/bin"})):
        run = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
        heard[name] = run.stderr
    assert "IProgress" in heard["plain"] and "IProgress" not in heard["chapter"]
    assert "another note" in heard["chapter"]
