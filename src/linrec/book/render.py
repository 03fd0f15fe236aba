"""Render executed chapters into the site with Jupyter Book, and photograph a page.

:func:`html` runs ``jupyter-book build`` with warnings as errors, after copying a local MathJax where
``_config.yml`` expects it (formulas render without a network). :func:`screenshot` renders a page in
headless Chromium, so a check can look at it as a reader would.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from linrec.book.layout import Book, BookError


def vendor_mathjax(book: Book) -> None:
    """Copy a local MathJax (from the jupyter-server-mathjax wheel) where _config.yml's mathjax_path
    expects it, so formulas render without a network: offline readers and classrooms included."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")  # locates the files; does not import it
    if spec is None or not spec.submodule_search_locations:
        raise BookError("jupyter-server-mathjax is missing: run `make install` (it is in requirements.txt)")
    target = book.root / "_build" / "static" / "mathjax"
    if not (target / "MathJax.js").exists():
        shutil.copytree(Path(spec.submodule_search_locations[0]) / "static", target, dirs_exist_ok=True)


def html(book: Book) -> None:
    """Render the executed chapters with Jupyter Book; any Sphinx warning fails the build."""
    vendor_mathjax(book)
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe), "build", str(book.root), "--all", "-W", "-n", "--keep-going"]
    if subprocess.run(cmd, cwd=book.root).returncode != 0:
        raise BookError("jupyter-book build failed (warnings are errors); see the messages above")


def screenshot(page: Path, out: Path) -> Path:
    """A 1280x2000 PNG of ``page`` rendered by headless Chromium (install it: apt-get install chromium)."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        raise BookError("no Chromium found: apt-get install -y chromium (Debian) or install Google Chrome")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile_dir:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile_dir}",
                f"--screenshot={out}",
                "--window-size=1280,2000",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    if not out.exists() or out.stat().st_size < 10_000:
        raise BookError(f"Chromium wrote no usable screenshot of {page} to {out}")
    return out
