"""book/resources.py: a chapter's peak memory counts the processes it starts (the kernel), and the page reports it."""

from __future__ import annotations

import json
import re
import sys

import pytest

from conftest import ROOT, book_script


@pytest.fixture
def resources():
    return book_script("resources")


@pytest.mark.slow
def test_the_peak_of_a_grandchild_is_counted(resources, tmp_path):
    """Papermill runs a chapter in a kernel, a grandchild of the process started: its memory must count."""
    grandchild = (  # touches every page of 400 MB, so that it is resident
        "import time; block = bytearray(400_000_000); block[::4096] = b'x' * len(block[::4096]); time.sleep(1.5)"
    )
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}], check=True)"
    row = resources.run_tree([sys.executable, "-c", child], {}, tmp_path / "log")
    assert row["ok"] and row["peak_rss_gb"] > 0.4 and row["tree_rss_gb"] > 0.4
    assert row["cpu_s"] >= 0 and row["wall_s"] > 1.5
    assert not resources.run_tree([sys.executable, "-c", "raise SystemExit(3)"], {}, tmp_path / "log")["ok"]


def test_the_page_states_the_reductions_budgets_and_missing_gpu(resources):
    row = {
        "chapter": "02_x",
        "ok": True,
        "peak_rss_gb": 3.0,
        "tree_rss_gb": 3.5,
        "cpu_s": 60.0,
        "wall_s": 40.0,
        "cache_added_gb": 2.0,
    }
    results = {
        "profile": "shapes",
        "reduced": resources.REDUCED,
        "budgets": resources.BUDGETS,
        "machine": "m",
        "torch": "t",
        "date": "d",
        "cache_gb": 9.0,
        "cache_parts_gb": {"measurements": 9.0},
        "chapters": [row],
        "offline": [{**row, "ok": False}],
        "gpu": None,
    }
    page = resources.page(results)
    assert "| 02_x | 3.00 | 3.50 | 2.00 | 60 | 40 | **fails** | not measured (no GPU lent) |" in page
    assert "budget 10 GB per chapter (met)" in page and "budget 8 GB (**not met**)" in page
    assert "`eval_tokens` = `4096`" in page


def test_a_chapter_measured_again_alone_takes_its_row_dated_and_adds_its_cache(resources, tmp_path, monkeypatch):
    def row(chapter: str, **extra) -> dict:
        return {"chapter": chapter, "ok": True, "peak_rss_gb": 1.0, "tree_rss_gb": 1.0, "cpu_s": 1.0,
                "wall_s": 1.0, "cache_added_gb": 0.5, **extra}  # fmt: skip

    recorded = {"profile": "shapes", "date": "2026-11-22", "cache_gb": 7.0, "cache_parts_gb": {"measurements": 7.0},
                "chapters": [row("01_a"), row("02_b")], "offline": [row("01_a")], "gpu": {"01_a": "1 (H100)"},
                "notes": ["kept"]}  # fmt: skip
    monkeypatch.setattr(resources, "RESULTS", tmp_path / "resources.json")
    monkeypatch.setattr(resources, "OUT", tmp_path / "out")
    resources.RESULTS.write_text(resources.json.dumps(recorded))
    later = {"date": "2026-11-27", "cache_added_gb": 2.0}
    monkeypatch.setattr(resources, "run_chapter", lambda stem, *a, **k: row(stem, **later))
    results = resources.measure("shapes", ["02_b", "11_c"], offline_pass=False)
    assert [r["chapter"] for r in results["chapters"]] == ["01_a", "02_b", "11_c"]  # the others kept, in order
    assert results["chapters"][1]["date"] == "2026-11-27" and results["gpu"] == {"01_a": "1 (H100)"}
    assert results["cache_gb"] == 7.0 and results["notes"] == ["kept"]  # the whole run's cache, its notes
    page = resources.page(results)
    assert "Measured later, each alone on an empty cache of its own" in page and "11_c (2026-11-27)" in page
    assert "The whole book's cache: 11.00 GB" in page and "4.00 GB the chapters measured later added" in page
    assert "for chapter 10_scale only, profile field `budgets`" in page
    fresh = resources.measure("paper", ["02_b"], offline_pass=False)  # another profile: a record of its own
    assert [r["chapter"] for r in fresh["chapters"]] == ["02_b"] and "The whole book's cache" in resources.page(fresh)


def test_a_section_keeps_its_label_and_blocks_and_a_build_its_note(resources):
    table = ["| a |", "| --- |", "| 1 |"]
    lines = resources.section_lines(
        [{"label": "resources-x", "title": "X, measured", "text": ["On 2026-11-28: 5 s.", table]}]
    )
    assert lines == ["(resources-x)=", "## X, measured", "", "On 2026-11-28: 5 s.", "", *table, ""]
    build = {"profile": "offline", "machine": "m", "date": "d", "zoo_s": 500.0, "chapters": {"01_a": 10.0}}
    described = [{**build, "note": "The first build, described."}, *[build] * resources.SHOWN_BUILDS]
    page = resources.build_lines(described)  # the described build is older than the columns shown: its note stays
    assert page[0] == f"({resources.BUILDS_LABEL})=" and "- The first build, described." in page
    assert page[5].count("offline, m, d, cold") == resources.SHOWN_BUILDS  # the last columns only


def test_the_committed_page_is_the_json_s_and_every_link_to_one_of_its_sections_lands(resources):
    results = json.loads(resources.RESULTS.read_text())
    assert resources.PAGE.read_text() == resources.page(results), "run book/resources.py --page-only"
    labels = [s["label"] for s in results["sections"]] + [resources.BUILDS_LABEL]
    assert len(labels) == len(set(labels))
    pages = "".join(page.read_text() for page in (ROOT / "book").glob("*.md"))
    linked = set(re.findall(r"\]\((resources-[\w-]+)\)", pages))
    assert linked and linked <= set(labels), sorted(linked - set(labels))
