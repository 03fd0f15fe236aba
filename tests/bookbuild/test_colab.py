"""bookbuild.colab: A chapter as a student meets it on Colab: plain Markdown, and exercises whose solutions "Run all"
leaves alone."""

from __future__ import annotations

import re

import jupytext
import nbformat
import pytest

from bookbuild.colab import bibliography, colab_cells, raw_myst
from bookbuild.layout import BookError
from conftest import ROOT

PLANTED = """# %% [markdown]
# # A chapter
#
# As {cite}`whipp2026linear` and {cite:t}`chan1979updating` say, {numref}`fig-b` is later. Value
# {glue:text}`rows:.1%`.

# %%
x = 1

# %% mystnb={"figure": {"caption": "A.", "name": "fig-a"}}
fig_a = 1

# %% mystnb={"figure": {"caption": "B.", "name": "fig-b"}}
fig_b = 1

# %% [markdown]
# {numref}`fig-a` and {numref}`fig-b` are above.
#
# :::{admonition} Note
# Careful.
# :::
#
# ## Exercises
#
# :::{exercise} Planted
# :label: ex-demo-planted
# What is $x$?
# :::

# %% tags=["remove-cell"]
answer = None

# %% [markdown]
# :::{solution-start} ex-demo-planted
# :class: dropdown
# :::
# It is one; see {numref}`fig-a`.

# %% tags=["solution"]
print("SOLUTION-CODE", x)

# %% [markdown]
# :::{solution-end}
# :::
#
# :::{exercise} Second
# :label: ex-demo-second
# Why? See {ref}`ex-demo-planted`.
# :::
#
# :::{solution} ex-demo-second
# :class: dropdown
# Because.
# :::
#
# ## Provenance

# %%
print("end")
"""


def planted_cells(text: str = PLANTED) -> list[nbformat.NotebookNode]:
    return colab_cells(jupytext.reads(text, fmt="py:percent").cells, bibliography(ROOT / "book/references.bib"), "x")


def test_colab_cells_write_plain_markdown_and_solutions_that_do_not_run():
    cells = planted_cells()
    markdown = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    code = [c.source for c in cells if c.cell_type == "code"]
    assert raw_myst(markdown) == []
    assert "As (Whipp, 2026) and Chan et al. (1979) say, the second figure below is later." in markdown
    assert "`rows` (printed above)" in markdown
    assert "The second figure above and the figure above are above." in markdown
    assert "**Note.** Careful." in markdown
    assert "### Exercise 1: Planted\n\nWhat is $x$?" in markdown
    assert "### Exercise 2: Second\n\nWhy? See exercise 1." in markdown
    assert code == ["x = 1", "fig_a = 1", "fig_b = 1", "answer = None", 'print("end")']  # the check cell runs
    solutions = [c for c in cells if c.metadata.get("solution")]
    assert [s.source.splitlines()[0] for s in solutions] == [
        "#### Solution to exercise 1",
        "#### Solution to exercise 2",
    ]
    assert 'It is one; see the second figure above.\n\n```python\nprint("SOLUTION-CODE", x)\n```' in solutions[0].source
    assert all(s.metadata["jp-MarkdownHeadingCollapsed"] for s in solutions)
    order = [c.source.splitlines()[0] for c in cells if c.cell_type == "markdown"]
    assert (
        order.index("### Exercise 1: Planted")
        < order.index("#### Solution to exercise 1")
        < order.index("### Exercise 2: Second")
    )


@pytest.mark.parametrize(
    "text, message",
    [
        (PLANTED.replace("# :::{solution-end}\n# :::\n", ""), "without its solution-end"),
        (PLANTED.replace(":::{solution} ex-demo-second", ":::{solution} ex-demo-none"), "no exercise before it"),
        (PLANTED.replace("{cite}`whipp2026linear`", "{cite}`nobody2000`"), "nobody2000"),
        (PLANTED.replace("# %%\nx = 1", '# %% tags=["solution"]\nx = 1'), "outside solution-start"),
    ],
)
def test_colab_cells_name_a_broken_exercise(text, message):
    with pytest.raises(BookError, match=message):
        planted_cells(text)


def test_bibliography_labels_every_entry_by_author_and_year():
    labels = bibliography(ROOT / "book/references.bib")
    keys = re.findall(r"^@\w+\{([^,]+),", (ROOT / "book/references.bib").read_text(), re.MULTILINE)
    assert sorted(labels) == sorted(keys)
    assert labels["whipp2026linear"] == "Whipp, 2026" and labels["chan1979updating"] == "Chan et al., 1979"
