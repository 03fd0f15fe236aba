"""bookbuild.browser: Headless Chromium driven over the DevTools protocol: open a page, wait until its MathJax has
finished, read it with JavaScript, photograph it or print it."""

from __future__ import annotations

import pytest

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
