"""bookbuild.compare: two copies of executed chapters compared to the last printed digit, timings and paths aside;
and its command line, ``python book/build.py compare BEFORE AFTER``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bookbuild import compare
from bookbuild.layout import BookError
from conftest import book_script


def _chapter(directory: Path, name: str, *outputs: dict) -> Path:
    """An executed notebook of one markdown cell and one code cell per output."""
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# A chapter"}]
    cells += [{"cell_type": "code", "metadata": {}, "source": "x", "outputs": [o], "execution_count": 1}
              for o in outputs]  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _printed(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _table(value: str) -> dict:
    html = f"<table><tr><th>block</th><th>r2_lin</th></tr><tr><td>0</td><td>{value}</td></tr></table>"
    return {"output_type": "display_data", "data": {"text/html": html, "text/plain": f"0 {value}"}, "metadata": {}}


def test_the_same_results_match_whatever_the_timings_and_paths(tmp_path):
    _chapter(tmp_path / "a", "01_x.ipynb", _printed("captured in 12.5 s from /home/a/cache/m\n"), _table("0.91234"))
    _chapter(tmp_path / "b", "01_x.ipynb", _printed("captured in 3.1 s from /tmp/other/m\n"), _table("0.91234"))
    assert compare.compare(tmp_path / "a", tmp_path / "b") == []


def test_the_last_digit_of_a_table_is_a_difference(tmp_path):
    _chapter(tmp_path / "a", "02_y.ipynb", _table("0.91234"))
    _chapter(tmp_path / "b", "02_y.ipynb", _table("0.91235"))
    [difference] = compare.compare(tmp_path / "a", tmp_path / "b")
    assert difference.notebook == "02_y.ipynb"
    shown = compare.report([difference])
    assert "-0 0.91234" in shown and "+0 0.91235" in shown


def test_a_chapter_in_one_copy_only_and_figures_on_request(tmp_path):
    png = {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}}
    _chapter(tmp_path / "a", "01_x.ipynb", png)
    _chapter(tmp_path / "b", "01_x.ipynb", {**png, "data": {"image/png": "BBBB"}})
    _chapter(tmp_path / "b", "03_z.ipynb", _printed("1\n"))
    assert [d.notebook for d in compare.compare(tmp_path / "a", tmp_path / "b")] == ["03_z.ipynb"]
    with_images = compare.compare(tmp_path / "a", tmp_path / "b", images=True)
    assert [d.notebook for d in with_images] == ["03_z.ipynb", "01_x.ipynb"]
    assert compare.compare(tmp_path / "a", tmp_path / "b", ignore=(r"^1$",), images=False)[0].notebook == "03_z.ipynb"


def test_no_notebook_in_common_or_one_that_cannot_be_read_is_an_error(tmp_path):
    _chapter(tmp_path / "a", "01_x.ipynb", _printed("1\n"))
    (tmp_path / "b").mkdir()
    with pytest.raises(BookError, match="no executed notebook is in both"):
        compare.compare(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "01_x.ipynb").write_text("{not json")
    with pytest.raises(BookError, match="cannot be read"):
        compare.compare(tmp_path / "a", tmp_path / "b")


def test_the_command_says_what_differs_and_exits_1(tmp_path, capsys):
    build = book_script("build")
    _chapter(tmp_path / "a", "02_y.ipynb", _table("0.5"))
    _chapter(tmp_path / "b", "02_y.ipynb", _table("0.5"))
    assert build.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    _chapter(tmp_path / "b", "02_y.ipynb", _table("0.6"))
    assert build.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert "02_y.ipynb: 1 differing stretch" in capsys.readouterr().err
