"""Render executed chapters into the site with Jupyter Book, and photograph a page.

:func:`html` runs ``jupyter-book build`` with warnings as errors, after copying a local MathJax where
``_config.yml`` expects it (formulas render without a network), with a footer naming the build and the pages
:mod:`linrec.book.publish` generates. :func:`screenshot` renders a page in
headless Chromium, so a check can look at it as a reader would, and :func:`maths_problems` reads MathJax's own
result from a rendered page (:func:`rendered_dom`).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from linrec.book.figures import FIGURE_DATA
from linrec.book.layout import Book, BookError
from linrec.book.notebooks import release_version
from linrec.book.publish import build_commit, built_profiles, cite_page, footer, partial_toc, render_config, today


def vendor_mathjax(book: Book) -> None:
    """Copy a local MathJax (from the jupyter-server-mathjax wheel) where _config.yml's mathjax_path
    expects it, so formulas render without a network: offline readers and classrooms included."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")  # locates the files; does not import it
    if spec is None or not spec.submodule_search_locations:
        raise BookError("jupyter-server-mathjax is missing: run `make install` (it is in requirements.txt)")
    target = book.root / "_build" / "static" / "mathjax"
    if not (target / "MathJax.js").exists():
        shutil.copytree(Path(spec.submodule_search_locations[0]) / "static", target, dirs_exist_ok=True)


def html(book: Book, chapters: Sequence[str] = ()) -> None:
    """Render the executed chapters with Jupyter Book, any Sphinx warning failing the build: every page's footer
    names the build (profile, commit, date), the cite page is written from CITATION.cff, and the figures' CSV
    files are copied beside the pages that link them. Without a claims table (no chapter executed in this
    checkout) the intro says so instead of failing on a missing include. ``chapters``: render only these chapters
    (a profile that runs a few, e.g. ``scale``) with the front and back matter; links to the others are plain
    text."""
    vendor_mathjax(book)
    cite_page(book)
    if not book.claims.exists():
        book.claims.parent.mkdir(parents=True, exist_ok=True)
        book.claims.write_text("No chapter has been executed in this checkout: run `make book` to fill this table.\n")
    line = footer(built_profiles(book), build_commit(book), today(), release_version(book))
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe), "build", str(book.root), "--all", "-W", "-n", "--keep-going"]
    cmd += ["--config", str(render_config(book, line, partial=bool(chapters)))]
    if chapters:
        cmd += ["--toc", str(partial_toc(book, chapters))]
    if subprocess.run(cmd, cwd=book.root).returncode != 0:
        raise BookError("jupyter-book build failed (warnings are errors); see the messages above")
    data = book.chapters / FIGURE_DATA
    if data.is_dir():
        shutil.copytree(data, book.html / book.chapters.relative_to(book.root) / FIGURE_DATA, dirs_exist_ok=True)


def _chromium() -> str:
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        raise BookError("no Chromium found: apt-get install -y chromium (Debian) or install Google Chrome")
    return browser


def _headless(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` with ``flags``, in a throwaway profile, with no network chatter."""
    with tempfile.TemporaryDirectory() as profile_dir:
        return subprocess.run(
            [
                _chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile_dir}",
                *flags,
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )


def screenshot(page: Path, out: Path, wait_ms: int = 20_000) -> Path:
    """A 1280x2000 PNG of ``page`` rendered by headless Chromium (install it: apt-get install chromium), taken once
    its scripts (MathJax) have run, or ``wait_ms`` of virtual time have passed: without the budget Chromium shoots
    at the first paint, with MathJax's "Loading ..." message still in the corner."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    _headless(page, f"--virtual-time-budget={wait_ms}", f"--screenshot={out}", "--window-size=1280,2000")
    if not out.exists() or out.stat().st_size < 10_000:
        raise BookError(f"Chromium wrote no usable screenshot of {page} to {out}")
    return out


def rendered_dom(page: Path, wait_ms: int = 20_000) -> str:
    """The DOM of ``page`` after headless Chromium has run its scripts (MathJax included) for ``wait_ms`` of
    virtual time."""
    return _headless(page, f"--virtual-time-budget={wait_ms}", "--dump-dom").stdout


_FACE = re.compile(r"@font-face\s*\{[^}]*?font-family:\s*['\"]?([\w-]+)")
_STYLED_FAMILY = re.compile(r'style="[^"]*?font-family:\s*([\w-]+)')


def maths_problems(dom: str, name: str) -> list[str]:
    """What is wrong with the formulas of a page, from its DOM after MathJax ran (:func:`rendered_dom`).

    MathJax 2 leaves every formula it reads as a ``math/tex`` script and draws each in a frame next to it; a
    formula it could not parse or draw becomes a ``MathJax_Error`` / ``merror``; and the fonts it draws with are
    web fonts it declares with ``@font-face`` when it loads them. A font it asks for but cannot load (the bundled
    copy lacks it) leaves the formulas drawn in a family no ``@font-face`` declares, that is, in whatever the
    browser substitutes: upright, misaligned maths. Each of these is a problem; so is a page with no formula.
    """
    formulas = len(re.findall(r'<script type="math/tex', dom))
    problems = []
    if formulas == 0:
        problems.append(f"{name}: no formula was processed (is MathJax loaded?)")
    elif len(re.findall(r'id="MathJax-Element-\d+-Frame"', dom)) < formulas:
        problems.append(f"{name}: MathJax drew fewer formulas than it read ({formulas}); it may have stalled")
    errors = len(re.findall(r'class="(?:MathJax_Error|merror)"', dom))
    if errors:
        problems.append(f"{name}: {errors} formula(s) MathJax could not render")
    if "failed to load" in dom.lower():
        problems.append(f"{name}: MathJax reports a file that failed to load")
    declared = set(_FACE.findall(dom))
    used = set(_STYLED_FAMILY.findall(dom[dom.find("<body") :]))  # MathJax styles every glyph run inline
    if missing := sorted(used - declared):
        problems.append(
            f"{name}: formulas drawn in font(s) no @font-face declares ({', '.join(missing)}): the bundled MathJax "
            "lacks the fonts its configuration asks for (_config.yml, mathjax2_config)"
        )
    return problems
