"""bookbuild.reader: What a reader trips over on the built pages, found in headless Chromium at 1280 px once MathJax is
done."""

from __future__ import annotations

import pytest

from bookbuild.browser import Browser
from bookbuild.reader import maths_problems, page_problems, tab_problems
from support.reader import needs_chromium, page

WIDE = " ".join(f"column_{i}" for i in range(40))


CELLS = "</td><td>".join(WIDE.split())


FADE = "linear-gradient(to right, #000 90%, transparent)"  # the cue: the box's right edge fades out


def table(cells: str, rows: list[str]) -> str:
    body = "".join(f"<tr><th>{r}</th><td>{cells}</td></tr>" for r in rows)
    return f"<table><thead><tr><th></th><th>value</th></tr></thead><tbody>{body}</tbody></table>"


def mathjax_page(
    frames: int = 1, family: str = "STIXMathJax_Main", declared: str = "STIXMathJax_Main", extra: str = ""
):
    """A page's DOM as MathJax 2 leaves it: a @font-face per web font it loaded, one math/tex script per formula it
    read and a frame, styled inline, per formula it drew."""
    drawn = "".join(
        f'<span class="MathJax" id="MathJax-Element-{i}-Frame"><span style="font-family: {family};">x</span></span>'
        for i in range(1, frames + 1)
    )
    return (
        f"<html><head><style>@font-face {{font-family: {declared}; src: url(x.woff)}}</style></head><body>"
        f'{drawn}<script type="math/tex">x</script>{extra}</body></html>'
    )


@needs_chromium
def test_clipped_content_and_row_numbers_are_found_and_scrolling_with_a_cue_or_wrapping_passes(tmp_path):
    planted = page(
        tmp_path,
        f'<div style="overflow: hidden">{table(CELLS, ["a", "b"])}</div>'  # cut at the column's edge
        f'<pre style="overflow: auto">{WIDE}</pre>'  # scrolls, but no cue is drawn
        f'<div style="overflow-x: auto; mask-image: {FADE}">{table(CELLS, ["c", "d"])}</div>'  # fine
        f'<pre style="white-space: pre-wrap">{WIDE}</pre>'  # wraps: fine
        f"{table('1.0', ['0', '1', '2'])}{table('1.0', ['zoo-gpt2', 'zoo-llama'])}"  # row numbers; labels: fine
        '<a href="#verdict-x">x</a><span id="verdict-x"></span><a href="#verdict-gone">gone</a>',  # one lands nowhere
    )
    found = page_problems([planted], tmp_path)
    assert len(found) == 4, found
    assert found[3] == 'page.html: a link to #verdict-gone lands nowhere on the page: "gone"'
    assert found[0].startswith("page.html: clipped table (") and "column_0" in found[0]
    assert found[1].startswith("page.html: clipped pre (") and "no scroll cue in view" in found[1]
    assert "pandas' row numbers" in found[2] and "linrec.report.show" in found[2]


@pytest.mark.slow
@needs_chromium
def test_the_book_stylesheet_scrolls_wide_outputs_with_a_cue_and_wraps_code(tmp_path):
    outputs = (
        f'<div class="cell_input"><div class="highlight"><pre>x = f({WIDE})</pre></div></div>'
        f'<div class="cell_output"><div class="output text_html">{table(CELLS, list("abcdefghij" * 8))}</div></div>'
        f'<div class="cell_output"><div class="output stream"><pre>{WIDE}</pre></div></div>'
    )
    assert page_problems([page(tmp_path, outputs, css=True)], tmp_path) == []
    assert len(page_problems([page(tmp_path, outputs, css=False)], tmp_path)) == 3  # the same page unstyled


FADES = """(async (id, left) => {
  const box = document.getElementById(id);
  box.scrollLeft = left;
  await new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)));  // the timeline moved
  const style = getComputedStyle(box);
  return ["--linrec-fade-left", "--linrec-fade-right", "--linrec-bar"].map(p => style.getPropertyValue(p).trim());
})"""
"""How far a box of the page fades at its left and right edges, and the strip kept for a vertical bar, once scrolled
``left`` px from its start."""


@pytest.mark.slow
@needs_chromium
def test_the_book_stylesheet_fades_an_edge_only_while_more_of_the_table_lies_beyond_it(tmp_path):
    outputs = (
        f'<div class="cell_output"><div class="output text_html" id="wide">{table(CELLS, ["a", "b"])}</div></div>'
        f'<div class="cell_output"><div class="output text_html" id="long">{table(CELLS, list("ab" * 60))}</div></div>'
        f'<div class="cell_output"><div class="output text_html" id="narrow">{table("1.0", ["a", "b"])}</div></div>'
    )
    with Browser() as browser:
        tab = browser.open(page(tmp_path, outputs, css=True))
        assert tab.evaluate(f'{FADES}("narrow", 0)') == ["0px", "0px", "0px"]  # nothing to scroll: no fade
        left, right, bar = tab.evaluate(f'{FADES}("wide", 0)')
        assert left == "0px" and right != "0px" and bar == "0px"  # at the start: more to the right only
        left, right, _ = tab.evaluate(f'{FADES}("wide", 100000)')
        assert left != "0px" and right == "0px"  # at the end: more to the left only
        assert tab.evaluate(f'{FADES}("long", 0)')[2] == "10px"  # taller than its box: its vertical bar kept clear


@pytest.mark.slow
@needs_chromium
def test_a_page_read_before_mathjax_is_done_is_a_problem(tmp_path):
    stuck = page(
        tmp_path,
        '<div id="MathJax_Message">Loading [MathJax]/jax/output/HTML-CSS/fonts/TeX/fontdata.js</div>'
        "<script>window.MathJax = {Hub: {Register: {StartupHook: (n, f) => f()}, Queue: f => f()}};</script>",
    )
    with Browser() as browser:
        tab = browser.open(stuck)
        assert tab.settled.startswith("mathjax done, message still shown: Loading [MathJax]")
        (problem,) = [p for p in tab_problems(tab, "stuck.html") if "MathJax" in p]
        assert problem.startswith("stuck.html: MathJax had not finished when the page was read")
        assert browser.open(page(tmp_path, "<p>no maths</p>", "plain.html")).settled == "no mathjax"


def test_maths_problems_read_mathjax_s_own_result():
    assert maths_problems(mathjax_page(), "p") == []
    (missing,) = maths_problems(mathjax_page(family="STIXGeneral"), "p")  # the fonts asked for were never loaded
    assert "STIXGeneral" in missing and "mathjax2_config" in missing
    assert "could not render" in maths_problems(mathjax_page(extra='<span class="merror">?</span>'), "p")[0]
    assert "stalled" in maths_problems(mathjax_page(frames=0), "p")[0]
    assert "failed to load" in maths_problems(mathjax_page(extra="File failed to load: fontdata.js"), "p")[0]
    assert "no formula" in maths_problems("<html><body>text</body></html>", "p")[0]
