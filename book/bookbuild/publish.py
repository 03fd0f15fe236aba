"""What a published book says about itself: which build made each page, and how to cite it.

:func:`footer` is the line every page ends with: the profile the chapters were executed with (read from the
executed notebooks' papermill parameters, :func:`built_profiles`), the commit (``git rev-parse --short HEAD``,
"+ uncommitted changes" when the work tree differs from it, :func:`build_commit`) and the date of the build.
:func:`cite_page` writes the "How to cite this book" page from ``CITATION.cff`` at build time, so the citation
is never a hand copy: the book's own entry (title, authors, version, year of ``date-released``, url) and the
paper's (``references``), each as plain text and as BibTeX. :func:`render_config` is ``_config.yml`` with the
footer added, which :func:`bookbuild.render.html` hands to ``jupyter-book build --config``.
"""

from __future__ import annotations

import datetime as dt
import html
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nbformat
import yaml

from bookbuild.layout import Book, BookError

CITE_PAGE = "book/cite.md"
"""The generated page (listed in _toc.yml, ignored by git): :func:`cite_page`."""


def _git(book: Book, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(book.root), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def build_commit(book: Book) -> str:
    """The short commit the book is built from, "+ uncommitted changes" when tracked files differ from it;
    "an unknown commit" outside a git checkout."""
    head = _git(book, "rev-parse", "--short", "HEAD")
    if not head:
        return "an unknown commit"
    dirty = _git(book, "status", "--porcelain", "--untracked-files=no")
    return f"{head} + uncommitted changes" if dirty else head


def _profile_name(value: object) -> str:
    """A papermill ``PROFILE`` parameter as text: a name, or a dict naming a profile and the fields it changes."""
    if isinstance(value, Mapping):
        fields = {k: v for k, v in value.items() if k != "name"}
        changed = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{value.get('name')} ({changed})" if changed else str(value.get("name"))
    return str(value)


def built_profiles(book: Book) -> list[str]:
    """The distinct profiles the executed chapters ran with, from their papermill parameters (sorted)."""
    found = set()
    for executed in sorted(book.chapters.glob("[0-9][0-9]_*.ipynb")):
        parameters = nbformat.read(executed, as_version=4).metadata.get("papermill", {}).get("parameters", {})
        if "PROFILE" in parameters:
            found.add(_profile_name(parameters["PROFILE"]))
    return sorted(found)


def footer(profiles: list[str], commit: str, day: dt.date, version: str) -> str:
    """The HTML line at the foot of every page: profile(s), commit, date and linrec version of the build."""
    if not profiles:
        raise BookError("no executed chapter names its profile: run `python book/build.py execute` first")
    names = " and ".join(f"<code>{html.escape(p)}</code>" for p in profiles)
    noun = "profile" if len(profiles) == 1 else "profiles"
    return (
        f'<p class="linrec-built">Built with the {names} {noun} from commit <code>{html.escape(commit)}</code> '
        f"on {day.isoformat()}, linrec {html.escape(version)}.</p>"
    )


def render_config(book: Book, footer_html: str, partial: bool = False) -> Path:
    """``_config.yml`` with ``html.extra_footer`` set to ``footer_html``, written under ``_build`` (its local Sphinx
    extensions' folders made absolute); ``partial``: a book of some chapters only, whose links to the others Sphinx
    leaves as text without a warning."""
    config = yaml.safe_load((book.root / "_config.yml").read_text())
    config.setdefault("html", {})["extra_footer"] = footer_html
    local = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in local.items():  # Jupyter Book reads them relative to the config, now under _build
        local[name] = str((book.root / folder).resolve())
    if partial:
        config.setdefault("sphinx", {}).setdefault("config", {})["suppress_warnings"] = ["ref.doc"]
    out = book.root / "_build" / "config" / "_config.yml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return out


def partial_toc(book: Book, chapters: Sequence[str]) -> Path:
    """``_toc.yml`` without the chapters not in ``chapters`` (the front and back matter kept), under ``_build``."""
    keep = {f"book/chapters/{stem}" for stem in chapters}

    def pruned(node: Any) -> Any:
        if isinstance(node, list):
            kept = [pruned(v) for v in node if not (isinstance(v, dict) and _dropped(v.get("file"), keep))]
            return [v for v in kept if not (isinstance(v, dict) and v.get("chapters") == [])]
        if isinstance(node, dict):
            return {k: pruned(v) for k, v in node.items()}
        return node

    toc = pruned(yaml.safe_load((book.root / "_toc.yml").read_text()))
    out = book.root / "_build" / "config" / "_toc.yml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(toc, sort_keys=False))
    return out


def _dropped(file: object, keep: set[str]) -> bool:
    return isinstance(file, str) and file.startswith("book/chapters/") and file not in keep


def read_citation(book: Book) -> dict[str, Any]:
    """CITATION.cff, with the fields the cite page needs checked: title, authors, version, date-released, url."""
    path = book.root / "CITATION.cff"
    try:
        cff = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise BookError(f"cannot read {path}: {err}") from None
    missing = [f for f in ("title", "authors", "version", "date-released", "url") if not cff.get(f)]
    if missing:
        raise BookError(f"{path} lacks {', '.join(missing)}: the book's citation is made from them")
    return dict(cff)


def _author(person: Mapping[str, str], bibtex: bool) -> str:
    if "name" in person:  # an entity, e.g. "The linrec contributors": braced so BibTeX keeps it whole
        return f"{{{person['name']}}}" if bibtex else person["name"]
    return f"{person['family-names']}, {person.get('given-names', '')}".rstrip(", ")


def _year(entry: Mapping[str, Any]) -> str:
    return str(entry["year"]) if "year" in entry else str(entry["date-released"])[:4]


def _arxiv(entry: Mapping[str, Any]) -> str | None:
    ids = [str(i["value"]) for i in entry.get("identifiers", []) if str(i.get("value", "")).startswith("arXiv:")]
    return ids[0].removeprefix("arXiv:") if ids else None


def plain_citation(entry: Mapping[str, Any]) -> str:
    """One entry of CITATION.cff (the file itself, or one of its ``references``) as a line of plain text."""
    authors = "; ".join(_author(a, bibtex=False) for a in entry["authors"])
    title = str(entry["title"])
    parts = [f"{authors} ({_year(entry)}). {title}{'' if title[-1] in '.?!' else '.'}"]
    if "version" in entry:
        parts.append(f"Version {entry['version']}.")
    if arxiv := _arxiv(entry):
        parts.append(f"arXiv:{arxiv}.")
    parts.append(str(entry["url"]))
    return " ".join(parts)


def bibtex(entry: Mapping[str, Any], key: str) -> str:
    """One entry of CITATION.cff as BibTeX: ``@software`` for the file itself, ``@misc`` for an arXiv paper."""
    fields = {
        "author": " and ".join(_author(a, bibtex=True) for a in entry["authors"]),
        "title": f"{{{entry['title']}}}",
        "year": _year(entry),
    }
    if "version" in entry:
        fields["version"] = str(entry["version"])
    if arxiv := _arxiv(entry):
        fields |= {"eprint": arxiv, "archiveprefix": "arXiv"}
    fields["url"] = str(entry["url"])
    kind = "software" if entry.get("type", "software") == "software" else "misc"
    body = ",\n".join(f"  {name:<14}= {{{value}}}" for name, value in fields.items())
    return f"@{kind}{{{key},\n{body}\n}}"


def _key(entry: Mapping[str, Any], stem: str) -> str:
    """``whipp2026linear`` for a person's work (the key the book's references.bib uses), ``linrec2026`` for an
    entity's."""
    family = entry["authors"][0].get("family-names")
    return re.sub(r"\W", "", f"{family}{_year(entry)}{stem}" if family else f"{stem}{_year(entry)}").lower()


def cite_page(book: Book) -> Path:
    """Write the "How to cite this book" page (:data:`CITE_PAGE`) from CITATION.cff; return its path."""
    cff = read_citation(book)
    sections = [("This book and its code", cff, _key(cff, "linrec"))]
    sections += [("The paper it accompanies", ref, _key(ref, "linear")) for ref in cff.get("references", [])]
    lines = [
        "(cite-this-book)=",
        "# How to cite this book",
        "",
        f"{cff.get('message', '')} This page is generated from the repository's `CITATION.cff` when the book is "
        "built, so it names the version you are reading.",
    ]
    for heading, entry, key in sections:
        lines += ["", f"## {heading}", "", plain_citation(entry), "", "```bibtex", bibtex(entry, key), "```"]
    path = book.root / CITE_PAGE
    path.write_text("\n".join(lines) + "\n")
    return path


def today() -> dt.date:
    """The build's date, in UTC (the same on every machine building at that moment)."""
    return dt.datetime.now(dt.UTC).date()
