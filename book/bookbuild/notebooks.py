"""Chapter sources to Colab notebooks: ``notebooks/NN_topic.py`` -> ``notebooks/NN_topic.ipynb``.

The percent-format ``.py`` files are the sources. :func:`sync` turns each into a plain, unexecuted
notebook (committed, so Colab can open it) with an install cell added after the title. That cell installs
the release the book was built from: ``linrec`` at the git tag ``v<version>``, the version being
pyproject.toml's (:func:`release_version`). A release is a tag (CONTRIBUTING.md), so the committed notebooks
change only when a chapter's source or the version does; :func:`sync_problems` names a stale one.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import jupytext
import nbformat
import yaml

from bookbuild import timing
from bookbuild.colab import bibliography, colab_cells, collapse_solutions
from bookbuild.layout import Book, BookError

INSTALL_EXTRAS = "paper,notebook,gguf"
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


def release_version(book: Book) -> str:
    """The version in the book's pyproject.toml: the release (git tag ``v<version>``) its install cells install."""
    try:
        version = tomllib.loads((book.root / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as err:
        raise BookError(f"the install cells need [project] version in {book.root / 'pyproject.toml'}: {err}") from None
    return str(version)


def install_cell_source(slug: str, version: str) -> str:
    """The install cell's code: install ``linrec`` at tag ``v<version>`` of github.com/``slug`` unless some
    linrec is importable already (a local checkout is used as it is), then check the version imported."""
    spec = f"linrec[{INSTALL_EXTRAS}] @ git+https://github.com/{slug}@v{version}"
    return f"""\
# Installs linrec {version}, the release this book was built from (on Colab); a local checkout is used as it is.
import importlib.util, subprocess, sys

VERSION, SPEC = "{version}", "{spec}"
if importlib.util.find_spec("linrec") is None:
    print("pip install", SPEC)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", SPEC], capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install {{SPEC}}. Likely causes: github.com/{slug} or its tag "
                           f"v{{VERSION}} is not published, or this runtime has no network. pip said:\\n{{pip.stderr}}")
    importlib.invalidate_caches()
import linrec

if linrec.__version__ != VERSION:
    raise RuntimeError(f"this book needs linrec {{VERSION}}, not {{linrec.__version__}} ({{linrec.__file__}}): run "
                       f"pip install --force-reinstall '{{SPEC}}', restart the runtime and run this cell again")"""


def _install_cell(book: Book) -> nbformat.NotebookNode:
    source = install_cell_source(repository(book)[0], release_version(book))
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["hide-input"]})


def paired_notebook(book: Book, source: Path, colab: bool = False) -> nbformat.NotebookNode:
    """The unexecuted notebook for a chapter source: its cells, its run time under the title
    (:func:`bookbuild.timing.run_time_note`, where ``book/resources.json`` exists), the install cell after it.

    ``colab``: the notebook a student opens on Colab (what :func:`sync` writes), its Markdown plain and its
    solutions collapsed cells that "Run all" does not execute (:mod:`bookbuild.colab`); otherwise the
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
    """Each committed notebook that differs from what ``sync`` would write, with the fix."""
    return [
        f"{path.relative_to(book.root)} is out of date with its .py source or the version: "
        "run `make notebooks` and commit"
        for path in sync(book, write=False)
    ]
