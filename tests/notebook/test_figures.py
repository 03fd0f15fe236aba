"""linrec.notebook.figures: A chapter's figure with the data it plots, downloadable as CSV beside it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import nbformat
import pandas as pd
import pytest

from bookbuild import check
from linrec import LinrecError
from linrec.experiment.profiles import get_profile
from linrec.notebook import figures
from linrec.notebook.chapter import Chapter


def test_a_figure_is_shown_with_its_data_as_csv_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_FIGURE_DATA", str(tmp_path))
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False, metadata=None: shown.append(obj))
    table = pd.DataFrame({"block": [0, 1], "r2_lin": [0.25, 1 / 3]})
    pivot = table.set_index("block")
    fig, ax = plt.subplots()
    ax.plot(table.block, table.r2_lin)
    links = figures.show_figure(fig, {"profile": table, "pivot": pivot, "absent": None}, "02_demo", "fig-demo")
    assert links == [
        ("fig-demo-profile.csv", "figure-data/02_demo/fig-demo-profile.csv"),
        ("fig-demo-pivot.csv", "figure-data/02_demo/fig-demo-pivot.csv"),
    ]
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / links[0][1]), table)  # the numbers, in full
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / links[1][1], index_col="block"), pivot)  # labels kept
    assert not plt.fignum_exists(fig.number)  # closed: the inline backend will not draw it again
    (bundle,) = shown
    html = bundle["text/html"]
    assert html.startswith('<img src="data:image/png;base64,') and bundle["image/png"] in html
    assert '<a href="figure-data/02_demo/fig-demo-pivot.csv" download>fig-demo-pivot.csv</a>' in html
    chapter = Chapter("02_demo", get_profile("smoke"), seed=0)
    assert chapter.figure(plt.figure(), table, "fig-other") is None  # a returned value would be a second output
    assert len(shown) == 2 and (tmp_path / "figure-data/02_demo/fig-other.csv").exists()


@pytest.mark.illegible_on_purpose
def test_an_illegible_figure_is_shown_with_its_problems_which_the_book_check_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_FIGURE_DATA", str(tmp_path))
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False, metadata=None: shown.append(metadata))
    fig, ax = plt.subplots(figsize=(7.5, 3))
    ax.annotate("oddgelu-mlp", (0.5, 0.0))
    ax.annotate("oddgelu-mlp-narrow", (0.52, 0.01))  # planted: printed over the first
    figures.show_figure(fig, None, "02_demo", "fig-overprinted")
    (metadata,) = shown
    assert metadata[figures.ILLEGIBLE] and "overlaps" in metadata[figures.ILLEGIBLE][0]
    output = nbformat.v4.new_output("display_data", data={"text/plain": "fig-overprinted"}, metadata=metadata)
    path = tmp_path / "02_demo.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[output])]), path)
    (problem,) = [p for p in check._output_problems(path) if "oddgelu-mlp'" in p]
    assert problem.startswith("02_demo.ipynb: cell 0: figure fig-overprinted: text 'oddgelu-mlp' overlaps")
    fig, ax = plt.subplots(figsize=(7.5, 3))
    ax.plot([0, 1])
    figures.show_figure(fig, None, "02_demo", "fig-fine")
    assert shown[-1] is None  # nothing to report


def test_a_diagram_has_no_data_link_and_bad_figure_data_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_FIGURE_DATA", str(tmp_path))
    assert figures.figure_html(b"png", []) == '<img src="data:image/png;base64,cG5n" alt="figure"/>'
    links = figures.save_figure_data(pd.DataFrame({"a": [1]}), "02_demo", "../fig-real-EleutherAI/pythia-160m")
    assert links == [("fig-real-EleutherAI-pythia-160m.csv", "figure-data/02_demo/fig-real-EleutherAI-pythia-160m.csv")]
    assert [p.name for p in tmp_path.rglob("*.csv")] == ["fig-real-EleutherAI-pythia-160m.csv"]  # in its folder
    with pytest.raises(LinrecError, match="cannot name"):
        figures.save_figure_data(pd.DataFrame({"a": [1]}), "02_demo", "/..")
    with pytest.raises(LinrecError, match="must be a pandas DataFrame"):
        figures.save_figure_data({"x": [1, 2]}, "02_demo", "fig-x")  # type: ignore[dict-item]
    with pytest.raises(LinrecError, match="no table"):
        figures.save_figure_data({"x": None}, "02_demo", "fig-x")  # type: ignore[dict-item]
