"""book/bookkeeping.py: the count of each chapter's bookkeeping lines, on a planted chapter and on the book's own."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("bookkeeping", ROOT / "book" / "bookkeeping.py")


assert _spec and _spec.loader


bookkeeping = importlib.util.module_from_spec(_spec)


sys.modules["bookkeeping"] = bookkeeping


_spec.loader.exec_module(bookkeeping)


PLANTED = """# ---
# jupyter: {}
# ---

# %% [markdown]
# # A chapter
# import nothing here: a markdown cell is never counted

# %% tags=["parameters"]
PROFILE = None
ROWS = 5
MODELS = None

# %%
import pandas as pd

import linrec
from linrec.book import chapter

ch = chapter.begin("00_x", globals(),
                   positive_int=["ROWS"])
MODELS = list(ch.profile.models)
WIDTH = 3

# %%
# a comment is not code
table = linrec.analysis.thing.table(ROWS)

ch.show(table)
word = ("up" if table.r.mean() > 0 else
        "down")
ch.show(pd.DataFrame({"claim": [f"r = {table.r.mean():.2f}"],
                      "n": [len(table)]}))
plain = pd.DataFrame({"n": [len(table)]})
for row in table.itertuples():
    print(row)

# %% tags=["hide-input"] mystnb={"figure": {"name": "fig-x"}}
fig = linrec.plots.thing.figure(table)
fig.tight_layout()
ax = fig.axes[0]
ax.set_xlabel("x")
ch.figure(fig, table, "fig-x")
"""


CHAPTERS = bookkeeping.chapters(ROOT)


NOT_YET = {
    "06_pitfall",
    "07_corpora",
    "08_training",
    "10_paper_vs_run",
    "11_scale",
    "12_pruning",
}


"""Short chapters (21 to 52 code lines) whose two imports, ``begin`` call and parameter defaults alone are over the
target: each an expected failure, named, so that one brought under it (or a longer one going over) fails here."""


def test_a_planted_chapter_is_counted_by_the_rules():
    c = bookkeeping.count(PLANTED, "planted")
    # code: 6 set-up cell lines (+ 0 blank) ... counted by hand:
    # cell 1: 3 imports + 2 begin + 1 MODELS + 1 WIDTH = 7 code lines, 6 of them bookkeeping (imports 3, set-up
    #         3: WIDTH, a constant the parameters cell does not set, is not set-up)
    # cell 2: table, show, word (2), show (2), plain, for, print = 9 code lines; wording: word's ternary (2)
    #         and the DataFrame of f-strings (2); `plain` has no f-string
    # cell 3: 5 code lines; plumbing: fig.tight_layout() and ax.set_xlabel(...) (2); `ax = fig.axes[0]` calls
    #         nothing and the plots function and ch.figure are not plumbing
    assert (c.code, c.imports, c.setup, c.wording, c.plumbing) == (21, 3, 3, 4, 2)
    assert c.bookkeeping == 12 and c.share == pytest.approx(12 / 21)


def test_a_line_matched_by_two_rules_counts_once_and_magics_are_code():
    source = '# %% tags=["parameters"]\nPROFILE = None\n# %%\n!pip install linrec\nPROFILE = "x" if True else "y"\n'
    c = bookkeeping.count(source)
    assert (c.code, c.setup, c.wording, c.bookkeeping) == (2, 1, 1, 1)


def test_the_script_prints_every_chapter_and_fails_above_the_target(tmp_path, capsys):
    chapter = tmp_path / "01_x.py"
    chapter.write_text("# %%\nimport os\nprint(os.sep)\n", encoding="utf-8")
    assert bookkeeping.main([str(chapter)]) == 1  # 1 of 2 lines
    assert bookkeeping.main([str(chapter), "--no-target"]) == 0
    assert "01_x" in capsys.readouterr().out


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            p, marks=pytest.mark.xfail(strict=True, reason="a short chapter: its set-up alone is over the target")
        )
        if p.stem in NOT_YET
        else p
        for p in CHAPTERS
    ],
    ids=[p.stem for p in CHAPTERS],
)
def test_every_chapter_keeps_its_bookkeeping_under_the_target(path):
    c = bookkeeping.count_file(path)
    assert c.share <= bookkeeping.TARGET, f"{c.chapter}: {c.bookkeeping} of {c.code} code lines are bookkeeping"
