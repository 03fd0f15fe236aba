"""Chapter sources to Colab notebooks: ``notebooks/NN_topic.py`` -> ``notebooks/NN_topic.ipynb``.

The percent-format ``.py`` files are the sources. :func:`sync` turns each into a plain, unexecuted
notebook (committed, so Colab can open it) with an install cell added after the title. That cell installs
linrec pinned to the last commit that changed its sources (:data:`PINNED_SOURCES`), not to HEAD: a commit
cannot name itself, whereas the source commit is already known when the notebooks are regenerated, and a
commit of only the regenerated notebooks leaves it unchanged, so sync, commit, sync again is stable. Change
sources, commit them, then run ``make notebooks`` and commit the notebooks; :func:`sync_problems` names a
stale pin.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import jupytext
import nbformat
import yaml

from linrec.book import timing
from linrec.book.colab import bibliography, colab_cells, collapse_solutions
from linrec.book.layout import Book, BookError

INSTALL_EXTRAS = "paper,notebook,gguf"
PINNED_SOURCES = ("src", "notebooks/*.py", "pyproject.toml")  # what the install cell's commit pins
_PIN = re.compile(r'^COMMIT = "([0-9a-f]{40})"$', re.MULTILINE)
COLAB = "https://colab.research.google.com"
BIBLIOGRAPHY = "book/references.bib"  # the citations a Colab notebook spells out as (Author, year)
RESOURCES = "book/resources.json"  # the measured run times each chapter states at its top
NOTEBOOK_METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",  # Colab opens the notebook on a GPU runtime when one is available
    "colab": {"provenance": []},
}


def sources(book: Book) -> list[Path]:
    """The chapter sources, in chapter order (their NN_ prefix)."""
    return sorted(book.notebooks.glob("[0-9][0-9]_*.py"))


def repository(book: Book) -> tuple[str, str]:
    """(owner/name, branch) of the GitHub repository named once, in _config.yml."""
    repo = yaml.safe_load((book.root / "_config.yml").read_text())["repository"]
    url = urlparse(repo["url"])
    slug = url.path.strip("/").removesuffix(".git")
    if url.netloc != "github.com" or slug.count("/") != 1:
        raise BookError(f"repository.url in _config.yml must be https://github.com/OWNER/NAME; got {repo['url']}")
    return slug, repo.get("branch", "main")


def colab_link(book: Book, stem: str) -> str:
    """The Colab URL of the committed notebook notebooks/<stem>.ipynb."""
    slug, branch = repository(book)
    return f"{COLAB}/github/{slug}/blob/{branch}/notebooks/{stem}.ipynb"


def _git(book: Book, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(book.root), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or err
        raise BookError(
            f"the install cells pin linrec to a commit, which needs git and this repository's history: "
            f"`git {' '.join(args)}` failed ({str(detail).strip()})"
        ) from None
    return done.stdout.rstrip("\n")


@functools.cache
def source_commit(book: Book) -> str:
    """The last commit that changed linrec's sources (:data:`PINNED_SOURCES`): what the install cells pin."""
    if _git(book, "rev-parse", "--is-shallow-repository") == "true":
        raise BookError("a shallow clone cannot tell which commit last changed the sources: git fetch --unshallow")
    commit = _git(book, "log", "-1", "--format=%H", "--", *PINNED_SOURCES)
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise BookError(f"no commit touches {', '.join(PINNED_SOURCES)}: commit the sources first")
    return commit


def uncommitted_sources(book: Book) -> list[str]:
    """Sources changed since the last commit (the install cells cannot pin those changes)."""
    return [line[3:] for line in _git(book, "status", "--porcelain", "--", *PINNED_SOURCES).splitlines()]


def _install_cell(book: Book) -> nbformat.NotebookNode:
    slug, _ = repository(book)
    spec = f"linrec[{INSTALL_EXTRAS}] @ git+https://github.com/{slug}@{{COMMIT}}"
    source = f"""\
# Installs linrec at the commit this notebook was built from (e.g. on Colab; an installed torch is kept),
# then checks that the linrec imported is this project's; a local checkout's linrec is used as it is.
import importlib.util, json, subprocess, sys
from importlib import metadata

COMMIT = "{source_commit(book)}"


def installed_commit():
    \"\"\"The commit a git install of linrec came from; "" for any other install; None when there is none.\"\"\"
    if importlib.util.find_spec("linrec") is None:
        return None
    try:
        url = json.loads(metadata.distribution("linrec").read_text("direct_url.json") or "{{}}")
    except metadata.PackageNotFoundError:  # a source tree on the path
        return ""
    return url.get("vcs_info", {{}}).get("commit_id", "")


if installed_commit() not in ("", COMMIT):
    spec = f"{spec}"
    print("pip install", spec)
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", spec], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as err:
        print(err.stdout, err.stderr, sep="\\n")
        raise RuntimeError(f"pip could not install {{spec}}; its output is above") from None
    if "linrec" in sys.modules:
        raise RuntimeError("linrec changed after it was imported: Runtime → Restart session, then run again")
    importlib.invalidate_caches()
import linrec

if not hasattr(linrec, "measure") or installed_commit() not in ("", COMMIT):
    raise RuntimeError(
        f"the linrec at {{linrec.__file__}} is not this book's ({slug} at {{COMMIT[:12]}}): "
        "pip uninstall -y linrec, restart the runtime (Runtime → Restart session) and run again"
    )
print(f"linrec {{linrec.__version__}} from {{linrec.__file__}}")"""
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["hide-input"]})


def pinned_commit(notebook: Path) -> str | None:
    """The commit the install cell of a written notebook pins (None: no notebook, or no pin in it)."""
    if not notebook.exists():
        return None
    cells = nbformat.read(notebook, as_version=4).cells
    return next((m.group(1) for c in cells if c.cell_type == "code" and (m := _PIN.search(c.source))), None)


def paired_notebook(book: Book, source: Path, colab: bool = False) -> nbformat.NotebookNode:
    """The unexecuted notebook for a chapter source: its cells, its run time under the title
    (:func:`linrec.book.timing.run_time_note`, where ``book/resources.json`` exists), the install cell after it.

    ``colab``: the notebook a student opens on Colab (what :func:`sync` writes), its Markdown plain and its
    solutions collapsed cells that "Run all" does not execute (:mod:`linrec.book.colab`); otherwise the
    book's, in MyST, which ``execute`` runs.
    """
    nb = jupytext.read(source, fmt="py:percent")
    cells = nb.cells
    if not cells or cells[0].cell_type != "markdown" or not cells[0].source.startswith("# "):
        raise BookError(f"{source.name}: the first cell must be a markdown cell starting with '# Title'")
    if not any("parameters" in c.metadata.get("tags", []) and "PROFILE" in c.source for c in cells):
        raise BookError(
            f"{source.name}: needs a cell tagged 'parameters' (# %% tags=[\"parameters\"]) that sets PROFILE"
        )
    if colab:
        bib = book.root / BIBLIOGRAPHY
        cells = colab_cells(cells, bibliography(bib) if bib.exists() else {}, source.name)
    if (resources := timing.load(book.root / RESOURCES)) is not None:  # under the title, before the text
        title, _, text = cells[0].source.partition("\n")
        cells[0].source = f"{title}\n\n{timing.run_time_note(resources, source.stem)}\n{text}"
    nb.cells = [cells[0], _install_cell(book), *cells[1:]]
    for i, cell in enumerate(nb.cells):
        cell.id = f"{source.stem}-{i:03d}"  # stable ids keep the committed notebook diff-free
    nb.metadata = json.loads(json.dumps(NOTEBOOK_METADATA))
    if colab:
        collapse_solutions(nb)
    return nb


def sync(book: Book, write: bool = True) -> list[Path]:
    """Regenerate notebooks/NN_topic.ipynb; return those that were stale (written when ``write``)."""
    stale = []
    for source in sources(book):
        target = source.with_suffix(".ipynb")
        text = nbformat.writes(paired_notebook(book, source, colab=True)) + "\n"
        if not target.exists() or target.read_text() != text:
            stale.append(target)
            if write:
                target.write_text(text)
    return stale


def sync_problems(book: Book) -> list[str]:
    """Why each committed notebook differs from what ``sync`` would write: a stale pin, or stale cells."""
    problems = []
    for path in sync(book, write=False):
        pinned, name = pinned_commit(path), path.relative_to(book.root)
        if pinned is not None and pinned != source_commit(book):
            problems.append(
                f"{name} installs linrec at {pinned[:12]}, but the sources last changed in {source_commit(book)[:12]}: "
                "run `make notebooks` and commit"
            )
        else:
            problems.append(f"{name} is out of date with its .py source: run `make notebooks` and commit")
    return problems
