"""Chromium when installed (else a skip) and a planted page, for the browser and reader tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import ROOT

CHROMIUM = any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome"))


needs_chromium = pytest.mark.skipif(not CHROMIUM, reason="needs Chromium (apt-get install chromium; CI installs it)")


def page(tmp_path: Path, body: str, name: str = "page.html", css: bool = False) -> Path:
    """A page with ``body`` in an article 688 px wide (the book's column), styled by the book's stylesheet."""
    style = (ROOT / "book/static/linrec.css").read_text() if css else ""
    path = tmp_path / name
    path.write_text(
        f"<html><head><style>article {{width: 688px}} {style}</style></head><body><article>{body}</article>"
        "</body></html>"
    )
    return path
