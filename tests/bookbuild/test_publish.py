"""bookbuild.publish: What a published book says about itself: which build made each page, and how to cite it."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

import linrec
from bookbuild import publish
from bookbuild.layout import Book, BookError
from conftest import ROOT
from linrec import LinrecError
from linrec.plots import method
from support.publish import executed


def git_book(tmp_path: Path) -> Book:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return Book(tmp_path)


CFF = """\
cff-version: 1.2.0
message: "Cite it."
type: software
title: "tool: does it work?"
authors:
  - name: "The tool team"
  - family-names: Doe
    given-names: Jane
version: "2.3.4"
date-released: "2025-06-07"
url: "https://o.github.io/n/"
references:
  - type: article
    title: "A Paper"
    authors:
      - family-names: Roe
        given-names: R.
    year: 2024
    identifiers:
      - type: other
        value: "arXiv:2401.00001"
    url: "https://arxiv.org/abs/2401.00001"
"""


def test_build_commit_is_the_short_head_and_says_when_the_tree_is_dirty(tmp_path):
    book = git_book(tmp_path)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert publish.build_commit(book) == head.stdout.strip()
    (tmp_path / "untracked.txt").write_text("x")  # untracked files are not part of the build's sources
    assert publish.build_commit(book) == head.stdout.strip()
    (tmp_path / "a.txt").write_text("two\n")
    assert publish.build_commit(book) == f"{head.stdout.strip()} + uncommitted changes"
    assert publish.build_commit(Book(tmp_path / "nowhere")) == "an unknown commit"


def test_the_footer_names_the_profile_the_chapters_ran_with_the_commit_and_the_date(tmp_path):
    book = Book(tmp_path)
    with pytest.raises(BookError, match="no executed chapter"):
        publish.footer(publish.built_profiles(book), "abc1234", dt.date(2026, 1, 2), "0.1.0")
    executed(book, "01_a", "smoke")
    executed(book, "02_b", "smoke")
    line = publish.footer(publish.built_profiles(book), "abc1234 + uncommitted changes", dt.date(2026, 1, 2), "0.1.0")
    assert line == (
        '<p class="linrec-built">Built with the <code>smoke</code> profile from commit '
        "<code>abc1234 + uncommitted changes</code> on 2026-01-02, linrec 0.1.0.</p>"
    )
    executed(book, "03_c", {"name": "offline", "eval_tokens": 4096})  # a chapter re-run with changed fields
    assert publish.built_profiles(book) == ["offline (eval_tokens=4096)", "smoke"]
    assert "<code>offline (eval_tokens=4096)</code> and <code>smoke</code> profiles" in publish.footer(
        publish.built_profiles(book), "abc1234", dt.date(2026, 1, 2), "0.1.0"
    )


def test_the_render_config_is_the_book_config_plus_the_footer(tmp_path):
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    path = publish.render_config(Book(tmp_path), "<p>built</p>")
    config, original = yaml.safe_load(path.read_text()), yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["html"].pop("extra_footer") == "<p>built</p>"
    local = config["sphinx"]["local_extensions"]
    assert local == {"single_page": str(tmp_path / "book/_ext")}  # absolute: the copy is read from under _build
    local["single_page"] = original["sphinx"]["local_extensions"]["single_page"]
    assert config == original


def test_the_cite_page_is_made_from_citation_cff(tmp_path):
    (tmp_path / "CITATION.cff").write_text(CFF)
    (tmp_path / "book").mkdir()
    page = publish.cite_page(Book(tmp_path)).read_text()
    assert page.startswith("(cite-this-book)=\n# How to cite this book\n\nCite it.")
    assert "The tool team; Doe, Jane (2025). tool: does it work? Version 2.3.4. https://o.github.io/n/" in page
    assert "Roe, R. (2024). A Paper. arXiv:2401.00001. https://arxiv.org/abs/2401.00001" in page
    book_entry, paper_entry = re.findall(r"```bibtex\n(.*?)\n```", page, re.DOTALL)
    assert book_entry.startswith("@software{linrec2025,")
    assert "author        = {{The tool team} and Doe, Jane}" in book_entry
    assert "version       = {2.3.4}" in book_entry and "year          = {2025}" in book_entry
    assert paper_entry.startswith("@misc{roe2024linear,") and "eprint        = {2401.00001}" in paper_entry


def test_the_cite_page_of_this_repository_names_this_version_and_the_paper_key_the_book_cites(tmp_path):
    (tmp_path / "CITATION.cff").write_text((ROOT / "CITATION.cff").read_text())
    (tmp_path / "book").mkdir()
    page = publish.cite_page(Book(tmp_path)).read_text()
    assert f"version       = {{{linrec.__version__}}}" in page
    assert "@misc{whipp2026linear," in page and "@misc{whipp2026linear," in (ROOT / "book/references.bib").read_text()


def test_a_citation_without_the_needed_fields_is_refused(tmp_path):
    (tmp_path / "CITATION.cff").write_text(CFF.replace('version: "2.3.4"\n', ""))
    with pytest.raises(BookError, match="lacks version"):
        publish.read_citation(Book(tmp_path))


def test_the_gelu_map_table_holds_each_grid_value_at_its_scale_and_offset():
    scales, offsets = np.array([0.1, 1.0, 10.0]), np.array([-1.0, 2.0])
    grid = offsets[:, None] * 100 + scales[None, :]  # a planted value that names its own cell
    table = method.gelu_map_table(scales, offsets, grid)
    assert len(table) == 6 and (table.exact == table.offset * 100 + table.scale).all()
    with pytest.raises(LinrecError, match="must be"):
        method.gelu_map_table(scales, offsets, grid.T)


def test_a_partial_book_keeps_the_front_and_back_matter_and_only_the_chapters_asked_for(tmp_path):
    root = ROOT
    (tmp_path / "_toc.yml").write_text((root / "_toc.yml").read_text())
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    toc = yaml.safe_load(publish.partial_toc(Book(tmp_path), ["02_heterogeneity", "10_scale"]).read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert toc["root"] == "book/intro"
    assert files == ["book/chapters/02_heterogeneity", "book/chapters/10_scale", "book/usage", "book/models",
                     "book/resources", "book/references", "book/cite"]  # fmt: skip
    config = yaml.safe_load(publish.render_config(Book(tmp_path), "x", partial=True).read_text())
    assert config["sphinx"]["config"]["suppress_warnings"] == ["ref.doc"]
    assert "suppress_warnings" not in str(yaml.safe_load(publish.render_config(Book(tmp_path), "x").read_text()))
