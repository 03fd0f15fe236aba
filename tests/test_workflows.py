"""Tests of linrec.workflows."""

from __future__ import annotations

import re
import shlex

import yaml

from conftest import ROOT

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
