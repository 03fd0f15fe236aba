"""What a reader trips over on the built pages, found in headless Chromium at 1280 px once MathJax is done.

:data:`READER` runs in each page (:mod:`bookbuild.browser`) and lists

- **clipped content**: a table, code cell, output or formula wider than the box that shows it, unless that box
  scrolls sideways with a visible cue that there is more to the side (its edge fading out, a ``mask-image``
  gradient; ``book/static/linrec.css`` fades the right edge while more lies to the right, and keeps the scroll bar
  out of the fade) and is no taller than the window, so that the cue and the scroll bar are in view with what they
  scroll; code wraps at the column instead (the same stylesheet);
- **row numbers printed as data**: a table whose first column is pandas' default index (0, 1, 2, ...), a sign that
  it was displayed raw instead of through :func:`linrec.report.show`;
- **a link within the page that lands nowhere** (a chapter's summary links each verdict);

and :func:`page_problems` adds a page whose MathJax had not finished when it was read and formulas MathJax could
not draw (:func:`maths_problems`). Figures are checked where
they are made (:func:`linrec.plots.legibility.problems`); the run times a page states, against the build's own
measurements (:func:`bookbuild.timing.stale_run_times`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from bookbuild.browser import Browser, Tab

READER = """(() => {
  const article = document.querySelector("article") || document.body;
  const text = el => (el.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 50);
  const problems = [];
  const shown = "table, pre, img, .MathJax_Display";
  for (const el of article.querySelectorAll(shown)) {
    if (el.closest("details:not([open])") || el.parentElement.closest(shown)) continue;  // folded, or inside one
    let box = el.parentElement;
    while (box !== article && getComputedStyle(box).overflowX === "visible") box = box.parentElement;
    const wide = Math.max(el.scrollWidth, el.getBoundingClientRect().width);
    const spills = el.scrollWidth > el.clientWidth + 1;  // its content is wider than itself
    const past = el.getBoundingClientRect().right > box.getBoundingClientRect().right + 1;
    if (!spills && !past) continue;
    const scroller = spills && getComputedStyle(el).overflowX !== "visible" ? el : box;
    const style = getComputedStyle(scroller);
    const faded = /gradient/.test(style.maskImage || style.webkitMaskImage);
    const cued = ["auto", "scroll"].includes(style.overflowX) && faded
      && scroller.getBoundingClientRect().height <= window.innerHeight;
    if (!cued) problems.push(`clipped ${el.tagName.toLowerCase()} (${Math.round(wide)} px in a box of `
      + `${Math.round(scroller.clientWidth)} px, no scroll cue in view): "${text(el)}"`);
  }
  for (const table of article.querySelectorAll("table")) {
    const heads = [...table.querySelectorAll("tbody > tr")].map(row => row.firstElementChild);
    if (heads.length > 1 && heads.every((cell, i) => cell.tagName === "TH" && cell.textContent.trim() === String(i)))
      problems.push(`a table prints pandas' row numbers as its first column (show it with linrec.report.show): `
        + `"${text(table)}"`);
  }
  for (const link of article.querySelectorAll('a[href^="#"]')) {
    const target = decodeURIComponent(link.getAttribute("href").slice(1));
    if (target && !document.getElementById(target))
      problems.push(`a link to #${target} lands nowhere on the page: "${text(link)}"`);
  }
  return problems;
})()"""
"""The reader's check, run in a page; the problems it finds, one line each."""


def tab_problems(tab: Tab, name: str, formulas: bool = False) -> list[str]:
    """The problems of the page open in ``tab``: :data:`READER`'s, an unfinished MathJax, and its formulas
    (:func:`maths_problems`) where it has some or ``formulas`` says it must."""
    problems = [f"{name}: {problem}" for problem in tab.evaluate(READER)]
    if tab.settled not in ("mathjax done", "no mathjax"):
        problems.append(f"{name}: MathJax had not finished when the page was read ({tab.settled})")
    dom = tab.evaluate("document.documentElement.outerHTML")
    if formulas or '<script type="math/tex' in dom:
        problems += maths_problems(dom, name)
    return problems


def page_problems(
    pages: Iterable[Path], root: Path, formulas: Path | None = None, shot: Path | None = None
) -> list[str]:
    """What a reader would trip over on each of ``pages`` (named relative to ``root``), in one browser; the page
    ``formulas`` must have formulas, and is photographed into ``shot`` (its top 2,000 px) once settled."""
    problems = []
    with Browser() as browser:
        for page in pages:
            tab = browser.open(page)
            problems += tab_problems(tab, str(page.relative_to(root)), formulas=page == formulas)
            if shot is not None and page == formulas:
                tab.screenshot(shot, height=2000)
    return problems


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
