"""Chapter sources to Colab notebooks: ``notebooks/NN_topic.py`` -> ``notebooks/NN_topic.ipynb``.

The percent-format ``.py`` files are the sources. :func:`sync` turns each into a plain, unexecuted
notebook (committed, so Colab can open it) with an install cell added after the title, and writes the digest of
every source into the package (:data:`DIGESTS`, ``linrec/notebook/chapter_sources.json``).

The install cell installs ``linrec`` from ``REF`` of the repository, by default the branch the Colab button opens
(``_config.yml``'s ``repository.branch``), so a chapter opened from the button gets the code it was written for; a
teacher pins a tag or commit for a course in that one line. It then checks that the linrec it imports was built
from this very chapter source (its digest in the installed package's ``chapter_sources.json``), and otherwise fails
there, saying what to do, instead of with an ImportError cells later. ``$LINREC_REPO`` points it at another clone
(``file://localhost/PATH``: how the tests simulate Colab). The committed notebooks change only when a chapter's
source does; :func:`sync_problems` names a stale one.
"""

from __future__ import annotations

import hashlib
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
DIGESTS = "src/linrec/notebook/chapter_sources.json"  # each chapter source's sha256, shipped with the package
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
    """The version in the book's pyproject.toml: the release the book's footer and citation name."""
    try:
        version = tomllib.loads((book.root / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as err:
        raise BookError(f"the book needs [project] version in {book.root / 'pyproject.toml'}: {err}") from None
    return str(version)


def source_digest(source: Path) -> str:
    """The sha256 of a chapter source: what an install cell and the installed package must agree on."""
    return hashlib.sha256(source.read_bytes()).hexdigest()


def digests_text(book: Book) -> str:
    """The contents of :data:`DIGESTS`: every chapter's source digest by its stem."""
    return json.dumps({s.stem: source_digest(s) for s in sources(book)}, indent=1) + "\n"


def install_cell_source(repo_url: str, ref: str, chapter: str, digest: str, release: str) -> str:
    """The install cell's code: install ``linrec`` from ``ref`` of ``repo_url`` unless some linrec is importable
    already (a local checkout is used as it is), then check that it was built from this chapter's source. ``release``
    is the version the comment gives as an example of a pinned tag."""
    spec = f"linrec[{INSTALL_EXTRAS}] @ git+{{REPO}}@{{REF}}"
    return f"""\
# Installs linrec from REF, the branch this notebook opens from (on Colab; a local checkout is used as it is), and
# checks that it is the linrec this notebook was written for. A course pins a tag or commit, e.g. REF = "v{release}".
REF = "{ref}"
import importlib.resources, importlib.util, json, os, subprocess, sys

REPO = os.environ.get("LINREC_REPO", "{repo_url}")
SPEC, CHAPTER, DIGEST = f"{spec}", "{chapter}", "{digest}"
if importlib.util.find_spec("linrec") is None:
    print("pip install", SPEC)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", SPEC], capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install {{SPEC}}: REF must be a branch, tag or commit of {{REPO}}, and "
                           f"this runtime needs a network. pip said:\\n{{pip.stderr}}")
    importlib.invalidate_caches()
import linrec

known = importlib.resources.files("linrec.notebook").joinpath("chapter_sources.json")
if (json.loads(known.read_text()) if known.is_file() else {{}}).get(CHAPTER) != DIGEST:
    raise RuntimeError(f"linrec {{linrec.__version__}} ({{linrec.__file__}}) was not built from this notebook's "
                       f"source ({{CHAPTER}}): set REF to the branch, tag or commit the notebook came from, run pip "
                       "uninstall -y linrec, restart the runtime and run this cell again (in a checkout of linrec: "
                       "make notebooks)")"""


def _install_cell(book: Book, source: Path) -> nbformat.NotebookNode:
    slug, branch = repository(book)
    url = f"https://github.com/{slug}"
    code = install_cell_source(url, branch, source.stem, source_digest(source), release_version(book))
    return nbformat.v4.new_code_cell(code, metadata={"tags": ["hide-input"]})


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
    nb.cells = [cells[0], _install_cell(book, source), *cells[1:]]
    for i, cell in enumerate(nb.cells):
        cell.id = f"{source.stem}-{i:03d}"  # stable ids keep the committed notebook diff-free
    nb.metadata = json.loads(json.dumps(NOTEBOOK_METADATA))
    if colab:
        collapse_solutions(nb)
    return nb


def sync(book: Book, write: bool = True) -> list[Path]:
    """Regenerate notebooks/NN_topic.ipynb and :data:`DIGESTS`; return those that were stale (written when
    ``write``)."""
    stale = []
    wanted = [
        (s.with_suffix(".ipynb"), nbformat.writes(paired_notebook(book, s, colab=True)) + "\n") for s in sources(book)
    ]
    for target, text in [*wanted, (book.root / DIGESTS, digests_text(book))]:
        if not target.exists() or target.read_text() != text:
            stale.append(target)
            if write:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    return stale


def sync_problems(book: Book) -> list[str]:
    """Each committed notebook (or the digests file) that differs from what ``sync`` would write, with the fix."""
    return [
        f"{path.relative_to(book.root)} is out of date with the chapter sources: run `make notebooks` and commit"
        for path in sync(book, write=False)
    ]
