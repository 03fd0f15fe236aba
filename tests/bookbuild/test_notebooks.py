"""bookbuild.notebooks: Chapter sources to Colab notebooks: ``notebooks/NN_topic.py`` ->
``notebooks/NN_topic.ipynb``."""

from __future__ import annotations

import ast
import datetime as dt
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import jupytext
import nbformat
import pytest

import linrec
from bookbuild import notebooks, publish
from bookbuild.colab import raw_myst
from bookbuild.layout import Book, BookError
from support.book import REPO, SOURCE

FIGURE_CALL = re.compile(r"^\s*fig = ", re.MULTILINE)


NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?([^`>]+)>?`")


OPTIONAL_FIGURES = {"fig-corpora-seeded-poly", "fig-corpora-swaps"}  # drawn only when their sweep is on


CHAPTER = notebooks.sources(REPO)[0]
"""A real chapter source: the install cell run here checks this checkout's digest of it."""


@pytest.fixture
def install_cell(monkeypatch):
    """Run the install cell of :data:`CHAPTER` as Colab would, pip replaced by a recorder (set ``pip.fail`` to make
    it fail, ``run.digest`` to give the cell another digest)."""
    calls = []

    def pip(cmd, **kwargs):
        calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 1 if pip.fail else 0, "", "ERROR: Could not find a tag v0.1.0")

    pip.fail, pip.calls = False, calls
    monkeypatch.setattr(subprocess, "run", pip)

    def run():
        source = notebooks.install_cell_source("https://github.com/o/n", "main", CHAPTER.stem, run.digest, "1.0.0")
        exec(compile(source, "install-cell", "exec"), {})

    run.pip, run.digest = pip, notebooks.source_digest(CHAPTER)
    return run


def without_linrec(monkeypatch):
    """Make linrec look not installed to the install cell (it still imports this one afterwards)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "linrec" else find_spec(name, *a))


def figure_names(code: str) -> list[str]:
    """The name argument of each ``ch.figure(fig, data, name)`` call in ``code`` (an f-string's leading text)."""
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "ch.figure":
            last = node.args[-1]
            part = last.values[0] if isinstance(last, ast.JoinedStr) else last
            names.append(part.value if isinstance(part, ast.Constant) else "")
    return names


def test_paired_notebook_adds_an_install_cell_from_the_configured_repository(tmp_path):
    source = tmp_path / "07_demo.py"
    source.write_text(SOURCE)
    nb = notebooks.paired_notebook(REPO, source)
    slug, branch = notebooks.repository(REPO)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code", "code"]
    cell = nb.cells[1].source
    assert f'REF = "{branch}"' in cell and f'"LINREC_REPO", "https://github.com/{slug}"' in cell
    assert f'"07_demo", "{notebooks.source_digest(source)}"' in cell
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


def test_sync_writes_stale_notebooks_and_digests_and_then_reports_none(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "repository", lambda book: ("owner/name", "main"))
    monkeypatch.setattr(notebooks, "release_version", lambda book: "1.2.3")
    demo = Book(tmp_path)
    demo.notebooks.mkdir()
    (demo.notebooks / "01_demo.py").write_text(SOURCE)
    target, digests = demo.notebooks / "01_demo.ipynb", tmp_path / notebooks.DIGESTS
    assert notebooks.sync(demo, write=False) == [target, digests]
    assert not target.exists() and not digests.exists()
    assert notebooks.sync(demo) == [target, digests]
    assert json.loads(digests.read_text()) == {"01_demo": hashlib.sha256(SOURCE.encode()).hexdigest()}
    assert notebooks.sync(demo, write=False) == []
    (demo.notebooks / "01_demo.py").write_text(SOURCE.replace("print(PROFILE)", "print(1)"))
    assert notebooks.sync(demo, write=False) == [target, digests]
    (problem, _) = notebooks.sync_problems(demo)
    assert "notebooks/01_demo.ipynb is out of date" in problem and "make notebooks" in problem


def test_the_committed_notebooks_and_digests_match_the_chapter_sources():
    assert notebooks.sync_problems(REPO) == []


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


def test_the_install_cell_is_short_and_names_the_release_as_the_example_of_a_pinned_tag():
    cell = notebooks._install_cell(REPO, CHAPTER).source
    assert f'e.g. REF = "v{notebooks.release_version(REPO)}"' in cell
    assert len(cell.splitlines()) <= 22  # one short hidden cell


def test_install_cell_keeps_a_local_checkout_built_from_this_chapter(install_cell):
    install_cell()  # linrec is this source tree, its digests those of these chapters: nothing is installed
    assert install_cell.pip.calls == []


def test_install_cell_installs_the_ref_when_linrec_is_missing(install_cell, monkeypatch):
    without_linrec(monkeypatch)
    install_cell()
    ((cmd, _),) = install_cell.pip.calls
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert cmd[-1] == f"linrec[{notebooks.INSTALL_EXTRAS}] @ git+https://github.com/o/n@main"


def test_install_cell_installs_from_the_clone_linrec_repo_names(install_cell, monkeypatch):
    without_linrec(monkeypatch)
    monkeypatch.setenv("LINREC_REPO", "file://localhost/srv/linrec")
    install_cell()
    ((cmd, _),) = install_cell.pip.calls
    assert cmd[-1].endswith(" @ git+file://localhost/srv/linrec@main")


def test_install_cell_names_the_likely_causes_when_pip_fails(install_cell, monkeypatch):
    without_linrec(monkeypatch)
    install_cell.pip.fail = True
    with pytest.raises(RuntimeError) as err:
        install_cell()
    message = str(err.value)
    assert "REF must be a branch, tag or commit of https://github.com/o/n" in message
    assert "needs a network" in message and "ERROR: Could not find a tag v0.1.0" in message  # pip's own words


def test_install_cell_rejects_a_linrec_built_from_another_source_of_the_chapter(install_cell):
    install_cell.digest = "0" * 64  # the notebook was made from a source this linrec was not
    with pytest.raises(RuntimeError, match=rf"was not built from this notebook's source \({CHAPTER.stem}\).*set REF"):
        install_cell()
    assert install_cell.pip.calls == []


@pytest.mark.slow
def test_install_cell_rejects_a_linrec_that_predates_the_digests(tmp_path):
    """An old release (no chapter_sources.json): the cell fails there, naming what to do, in a fresh interpreter."""
    (tmp_path / "linrec" / "notebook").mkdir(parents=True)
    (tmp_path / "linrec" / "__init__.py").write_text('__version__ = "0.2.0"\n')
    (tmp_path / "linrec" / "notebook" / "__init__.py").write_text("")
    digest = notebooks.source_digest(CHAPTER)
    cell = notebooks.install_cell_source("https://github.com/o/n", "main", CHAPTER.stem, digest, "1.0.0")
    run = subprocess.run([sys.executable, "-c", cell], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1 and "linrec 0.2.0" in run.stderr and "pip uninstall -y linrec" in run.stderr


def test_every_colab_notebook_is_plain_and_runs_no_solution():
    """What sync writes for each chapter: no raw MyST in Markdown, no solution code in a code cell, each exercise
    followed by its collapsed solution, and the solutions listed in Colab's collapsed sections."""
    for source in notebooks.sources(REPO):
        nb = notebooks.paired_notebook(REPO, source, colab=True)
        solution_code = [
            c.source
            for c in jupytext.read(source).cells
            if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])
        ]
        markdown = [c for c in nb.cells if c.cell_type == "markdown"]
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert raw_myst("\n".join(c.source for c in markdown)) == [], source.name
        assert all(s not in code for s in solution_code), f"{source.name}: solution code in a code cell"
        assert all(any(s in c.source for c in markdown) for s in solution_code), source.name
        exercises = [c for c in markdown if c.source.startswith("### Exercise ")]
        solutions = [c.id for c in markdown if c.metadata.get("solution")]
        assert len(solutions) == len(exercises) == len(re.findall(r"^# :::\{exercise\}", source.read_text(), re.M))
        assert nb.metadata["colab"]["collapsed_sections"] == solutions
        nbformat.validate(nb)


def test_exercise_labels_are_unique_and_every_solution_names_an_exercise():
    labels, solved = [], []
    for source in notebooks.sources(REPO):
        text = source.read_text()
        labels += re.findall(r"^# :label: (ex-[\w-]+)$", text, re.MULTILINE)
        solved += re.findall(r"^# :::\{solution(?:-start)?\} (\S+)$", text, re.MULTILINE)
    assert len(labels) == len(set(labels)) > 20
    assert sorted(solved) == sorted(labels)  # one solution per exercise


def test_every_chapter_states_its_run_time_under_its_title():
    for source in notebooks.sources(REPO):
        title = notebooks.paired_notebook(REPO, source).cells[0].source
        note = title.split("\n\n")[1]
        assert note.startswith("**Run time.** On "), source.name
        assert "in a first build of the book" in note and "in a rebuild that finds" in note, source.name


def test_version_and_repository_agree_across_pyproject_package_citation_and_config():
    cff = publish.read_citation(REPO)
    assert notebooks.release_version(REPO) == linrec.__version__ == cff["version"]
    slug, _ = notebooks.repository(REPO)
    assert cff["repository-code"] == f"https://github.com/{slug}"
    owner, name = slug.split("/")
    assert cff["url"] == f"https://{owner}.github.io/{name}/"  # where pages.yml publishes the book
    dt.date.fromisoformat(str(cff["date-released"]))


def test_the_changelog_s_latest_release_is_the_version_and_its_day_the_citation_s():
    """Keep a Changelog: an Unreleased section first, then the releases, the newest the package's version."""
    headings = re.findall(r"^## \[([^]]+)\](?: - (\S+))?$", (REPO.root / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[0] == ("Unreleased", ""), headings[:2]
    version, day = headings[1]
    assert version == linrec.__version__ and day == str(publish.read_citation(REPO)["date-released"])
    assert [dt.date.fromisoformat(d) for _, d in headings[1:]] == sorted(
        (dt.date.fromisoformat(d) for _, d in headings[1:]), reverse=True
    )


def test_every_figure_cell_shows_its_figure_with_its_data_under_its_name():
    for source in notebooks.sources(REPO):
        for cell in notebooks.paired_notebook(REPO, source).cells:
            name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
            if cell.cell_type != "code" or not name:
                continue
            calls = figure_names(cell.source)
            assert calls and all(c.startswith(name) for c in calls), f"{source.name}: {name} needs ch.figure(fig, ...)"
            assert "plt.show()" not in cell.source, f"{source.name}: {name} is shown by ch.figure"


def _library_names(tree: ast.Module) -> dict[str, str]:
    """The names a chapter binds to linrec by import (``from linrec.analysis import compression`` binds
    ``compression`` to ``linrec.analysis.compression``), ``linrec`` itself included."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("linrec"):
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            bound.update({a.asname or a.name: a.name for a in node.names if a.name == "linrec"})
    return bound


def _resolved(path: str) -> object:
    """The module or object a dotted linrec path names."""
    try:
        return importlib.import_module(path)
    except ImportError:
        home, _, name = path.rpartition(".")
        return getattr(importlib.import_module(home), name)


def test_every_library_name_a_chapter_reaches_exists():
    """Statically, so that a renamed function fails here even where a profile's run never reaches the cell (the
    smoke book skips some): each ``module.attribute`` chain a chapter writes resolves, module by module."""
    missing = []
    for source in notebooks.sources(REPO):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        bound = _library_names(tree)
        for node in (n for n in ast.walk(tree) if isinstance(n, ast.Attribute)):
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in bound):
                continue
            found = _resolved(bound[base.id])
            for name in chain:
                if not isinstance(found, types.ModuleType):
                    break  # past the library: an object's own attributes
                try:
                    found = getattr(found, name)
                except AttributeError:
                    try:
                        found = importlib.import_module(f"{found.__name__}.{name}")
                    except ImportError:
                        missing.append(f"{source.name}: {base.id}.{'.'.join(chain)}")
                        break
    assert not missing, missing


def test_every_library_name_a_chapter_s_text_names_exists():
    """A chapter that names where a rule lives (`linrec.analysis.pruning.RULE`) names a place that exists: the text
    is not run, so a rename would leave it pointing nowhere."""
    missing = []
    for source in notebooks.sources(REPO):
        for dotted in set(re.findall(r"`(linrec(?:\.[A-Za-z_]\w*)+)`", source.read_text(encoding="utf-8"))):
            parts = dotted.split(".")
            for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
                try:
                    found = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for name in parts[cut:]:
                if not hasattr(found, name):
                    missing.append(f"{source.name}: {dotted}")
                    break
                found = getattr(found, name)
    assert not missing, missing


COLAB_BRINGS = ("torch", "transformers", "ipykernel")
"""What a Colab runtime has before a chapter's install cell runs (at this environment's pinned versions): no linrec."""


def _clone_of_the_working_tree(root: Path, to: Path) -> str:
    """A git repository at ``to`` whose branch ``main`` holds this working tree's files (tracked and untracked, not
    ignored): what pip installs from as Colab installs from GitHub. Returns its ``git+file`` URL's base."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                            check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (root / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, to / name)
    git = ["git", "-c", "user.name=colab", "-c", "user.email=colab@localhost", "-C", str(to)]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the working tree"]):
        subprocess.run([*git, *args], check=True)
    return f"file://localhost{to}"


@pytest.mark.slow
def test_chapters_opened_in_colab_install_the_linrec_they_were_written_for_and_run(tmp_path):
    """Colab, simulated: a fresh environment with only what Colab brings, each committed Colab notebook executed by
    papermill as it stands (smoke profile), its install cell pip-installing linrec from a clone of this tree."""
    url = _clone_of_the_working_tree(REPO.root, tmp_path / "linrec")
    env_dir = tmp_path / "colab"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = str(env_dir / "bin" / "python")
    pinned = [
        line for line in (REPO.root / "requirements.txt").read_text().split() if line.split("==")[0] in COLAB_BRINGS
    ]
    assert len(pinned) == len(COLAB_BRINGS), pinned
    subprocess.run([python, "-m", "pip", "install", "-q", "--progress-bar", "off", *pinned], check=True)
    kernels = tmp_path / "jupyter" / "kernels" / "colab"
    kernels.mkdir(parents=True)
    argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (kernels / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Colab", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"LINREC_REPO": url, "JUPYTER_PATH": str(tmp_path / "jupyter"), "LINREC_PROGRESS": "0"}
    (tmp_path / "content").mkdir()
    for stem in ("01_method", "02_heterogeneity"):
        out = tmp_path / f"{stem}.ipynb"
        command = [sys.executable, "-m", "papermill", str(REPO.notebooks / f"{stem}.ipynb"), str(out), "-k", "colab",
                   "-p", "PROFILE", "smoke", "--cwd", str(tmp_path / "content"), "--no-progress-bar"]  # fmt: skip
        run = subprocess.run(command, env=env, capture_output=True, text=True)
        assert run.returncode == 0, f"{stem} failed on the simulated Colab:\n{run.stderr[-4000:]}"
        install = nbformat.read(out, as_version=4).cells[1]
        printed = "".join(o.get("text", "") for o in install.outputs)
        assert ("pip install linrec[" in printed) == (stem == "01_method")  # the first installs, the next checks it
    shown = subprocess.run([python, "-m", "pip", "show", "linrec"], capture_output=True, text=True, check=True)
    assert f"Version: {linrec.__version__}" in shown.stdout
