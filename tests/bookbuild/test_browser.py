"""bookbuild.browser: Headless Chromium driven over the DevTools protocol: open a page, wait until its MathJax has
finished, read it with JavaScript, photograph it or print it."""

from __future__ import annotations

import struct

import pytest

from bookbuild.browser import Browser
from bookbuild.reader import page_problems
from support.reader import needs_chromium, page


@pytest.mark.slow
@needs_chromium
def test_a_screenshot_is_taken_once_the_page_is_settled(tmp_path):
    shot = tmp_path / "shot.png"
    first = page(tmp_path, "<p>text</p>" * 200)
    page_problems([first], tmp_path, shot=shot)  # photographs the page whose formulas are checked: none given
    assert not shot.exists()
    found = page_problems([first], tmp_path, formulas=first, shot=shot)
    assert found == ["page.html: no formula was processed (is MathJax loaded?)"]  # the page must have maths
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@needs_chromium
def test_a_screenshot_is_as_tall_as_asked_and_gives_the_window_its_height_back(tmp_path):
    """The window is made as tall as the shot for it (chapter 2's wide tables made Chromium's capture beyond the
    window shift the page, a fault seen by eye, not reproduced here): the PNG is the asked height at the window's
    width, and the window is its own height again after."""
    shot = tmp_path / "shot.png"
    with Browser() as browser:
        tab = browser.open(page(tmp_path, "<p>text</p>" * 200))
        tab.screenshot(shot, height=1500)
        width, height = struct.unpack(">II", shot.read_bytes()[16:24])  # the PNG's IHDR
        assert (width, height) == (tab.evaluate("document.documentElement.clientWidth"), 1500)
        assert tab.evaluate("window.innerHeight") == 900
