"""Publishing the book: the release version, the footer naming the build, the cite page from CITATION.cff, each
figure's data as CSV, and the GitHub workflows (bookbuild.publish, linrec.book.figures, .github/workflows)."""

import ast
import datetime as dt
import re
import shlex
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pandas as pd
import pytest
import yaml

import linrec
from bookbuild import check, notebooks, publish
from bookbuild.layout import Book, BookError
from linrec import LinrecError
from linrec.book import figures
from linrec.book.chapter import Chapter
from linrec.experiment.profiles import get_profile
from linrec.plots import method

ROOT = Path(__file__).resolve().parents[1]
REPO = Book(ROOT)


def test_version_and_repository_agree_across_pyproject_package_citation_and_config():
    cff = publish.read_citation(REPO)
    assert notebooks.release_version(REPO) == linrec.__version__ == cff["version"]
    slug, _ = notebooks.repository(REPO)
    assert cff["repository-code"] == f"https://github.com/{slug}"
    owner, name = slug.split("/")
    assert cff["url"] == f"https://{owner}.github.io/{name}/"  # where pages.yml publishes the book
    dt.date.fromisoformat(str(cff["date-released"]))


def git_book(tmp_path: Path) -> Book:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return Book(tmp_path)


def test_build_commit_is_the_short_head_and_says_when_the_tree_is_dirty(tmp_path):
    book = git_book(tmp_path)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert publish.build_commit(book) == head.stdout.strip()
    (tmp_path / "untracked.txt").write_text("x")  # untracked files are not part of the build's sources
    assert publish.build_commit(book) == head.stdout.strip()
    (tmp_path / "a.txt").write_text("two\n")
    assert publish.build_commit(book) == f"{head.stdout.strip()} + uncommitted changes"
    assert publish.build_commit(Book(tmp_path / "nowhere")) == "an unknown commit"


def executed(book: Book, stem: str, profile: object) -> None:
    book.chapters.mkdir(parents=True, exist_ok=True)
    completed = {"parameters": {"PROFILE": profile, "SEED": 0}, "exception": None, "end_time": "2026-01-02T00:00:00"}
    nb = nbformat.v4.new_notebook(metadata={"papermill": completed})  # as papermill records a completed run
    nbformat.write(nb, book.chapters / f"{stem}.ipynb")


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
    import nbformat

    from bookbuild import check

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


@pytest.mark.illegible_on_purpose
def test_legibility_finds_overprinted_ticks_and_text_shrunk_below_8_pt_and_passes_a_plain_figure():
    from matplotlib.figure import Figure

    from linrec.plots.legibility import problems

    fig, ax = plt.subplots(figsize=(7.5, 3))
    ax.set_xticks(range(30), [f"block {i}" for i in range(30)])  # 30 labels in 7.5 inches run together
    assert any("'block 10' overlaps 'block 11'" in p for p in problems(fig))
    ax.set_xticks(range(0, 30, 5), [f"block {i}" for i in range(0, 30, 5)])
    assert problems(fig) == []
    ax.set_xlim(0, 10)  # ticks beyond the view are not drawn, so not read
    assert problems(fig) == []
    wide, ax = plt.subplots(figsize=(15, 3))  # shrunk to half in the column: 10-pt ticks read as 5 pt
    ax.plot([0, 1])
    assert problems(wide) and all("pt as shown" in p for p in problems(wide))
    assert problems(wide, column_px=1500) == []
    bare = Figure(figsize=(7.5, 3))  # a canvas with no renderer, as in a notebook's inline backend
    bare.subplots().set_xticks(range(30), [f"block {i}" for i in range(30)])
    assert any("overlaps" in p for p in problems(bare))
    plt.close("all")


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


def figure_names(code: str) -> list[str]:
    """The name argument of each ``ch.figure(fig, data, name)`` call in ``code`` (an f-string's leading text)."""
    names = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "ch.figure":
            last = node.args[-1]
            part = last.values[0] if isinstance(last, ast.JoinedStr) else last
            names.append(part.value if isinstance(part, ast.Constant) else "")
    return names


def test_every_figure_cell_shows_its_figure_with_its_data_under_its_name():
    for source in notebooks.sources(REPO):
        for cell in notebooks.paired_notebook(REPO, source).cells:
            name = cell.metadata.get("mystnb", {}).get("figure", {}).get("name")
            if cell.cell_type != "code" or not name:
                continue
            calls = figure_names(cell.source)
            assert calls and all(c.startswith(name) for c in calls), f"{source.name}: {name} needs ch.figure(fig, ...)"
            assert "plt.show()" not in cell.source, f"{source.name}: {name} is shown by ch.figure"


def test_the_gelu_map_table_holds_each_grid_value_at_its_scale_and_offset():
    scales, offsets = np.array([0.1, 1.0, 10.0]), np.array([-1.0, 2.0])
    grid = offsets[:, None] * 100 + scales[None, :]  # a planted value that names its own cell
    table = method.gelu_map_table(scales, offsets, grid)
    assert len(table) == 6 and (table.exact == table.offset * 100 + table.scale).all()
    with pytest.raises(LinrecError, match="must be"):
        method.gelu_map_table(scales, offsets, grid.T)


WORKFLOWS = ROOT / ".github" / "workflows"


def workflow(name: str) -> dict:
    parsed = yaml.safe_load((WORKFLOWS / name).read_text())
    parsed["on"] = parsed.pop(True, parsed.get("on"))  # YAML 1.1 reads the key `on` as True
    return parsed


def commands(job: dict) -> list[str]:
    return [line.strip() for step in job["steps"] if "run" in step for line in step["run"].splitlines()]


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def test_ci_runs_the_readmes_test_command_and_the_smoke_book():
    ci = workflow("ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    run = [c for job in ci["jobs"].values() for c in commands(job)]
    assert "bash .ci/run" in run and (ROOT / ".ci/run").exists()
    ci_run = (ROOT / ".ci/run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^make test-all\b", ci_run, re.M) and "bash .ci/book" in ci_run
    assert "make test-all" in readme and {"test", "test-all"} <= make_targets()


def test_pages_builds_the_offline_book_caches_it_and_deploys_the_html():
    pages = workflow("pages.yml")
    assert pages["on"]["push"]["branches"] == ["main"] and pages["on"]["push"]["tags"] == ["v*"]
    assert pages["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build, deploy = pages["jobs"]["build"], pages["jobs"]["deploy"]
    uses = {step.get("uses", "").split("@")[0]: step for step in build["steps"]}
    assert uses["actions/upload-pages-artifact"]["with"]["path"] == "_build/html"
    assert "hashFiles(" in uses["actions/cache"]["with"]["key"]
    assert uses["actions/cache"]["with"]["path"] == "${{ env.LINREC_CACHE }}"
    for line in commands(build):
        words = shlex.split(line)
        if words[:1] == ["make"]:
            assert set(w for w in words[1:] if "=" not in w) <= make_targets(), line
    assert any(line.startswith("make book") and "PROFILE=offline" in line for line in commands(build))
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]


def test_book_check_wants_the_footer_and_every_figure_data_link_to_resolve(tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, "release_version", lambda book: "1.0.0")
    book = Book(tmp_path)
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/o/n\n")
    (tmp_path / "_toc.yml").write_text("root: intro\nchapters:\n  - file: book/chapters/01_demo\n")
    book.notebooks.mkdir()
    (book.notebooks / "01_demo.py").write_text('# %% [markdown]\n# # Demo\n\n# %% tags=["parameters"]\nPROFILE = 1\n')
    notebooks.sync(book)
    executed(book, "01_demo", "smoke")
    page = book.page("01_demo")
    page.parent.mkdir(parents=True)
    link = f"{figures.FIGURE_DATA}/01_demo/fig-a.csv"
    body = f'<img src="data:image/png;base64,AA"/><a href="{notebooks.colab_link(book, "01_demo")}">Colab</a>'
    page.write_text(f'{body}<a href="{link}" download>fig-a.csv</a>')
    problems = check.check(book)
    assert problems == [
        f"_build/html/book/chapters/01_demo.html: links {link}, which the build did not copy",
        "_build/html/book/chapters/01_demo.html: no footer naming the build (profile, commit, date)",
    ]
    (page.parent / link).parent.mkdir(parents=True)
    (page.parent / link).write_text("a\n1\n")
    page.write_text(page.read_text() + publish.footer(["smoke"], "abc1234", dt.date(2026, 1, 2), "1.0.0"))
    assert check.check(book) == []
