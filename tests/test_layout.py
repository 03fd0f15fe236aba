"""The tests mirror the code: src/linrec/core/moments.py is tested in tests/core/test_moments.py, book/bookbuild/
execute.py in tests/bookbuild/test_execute.py. A module with no test file of its own fails here unless it is listed
below with the reason; a test file that mirrors no module fails unless it tests the repository as a whole."""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT

CODE = {ROOT / "src" / "linrec": Path(), ROOT / "book" / "bookbuild": Path("bookbuild")}


"""Each tree of code and where its tests go under tests/."""


NOT_MODULES = {"__init__.py", "__main__.py", "_version.py"}


"""Package markers, the entry point and the version: no code of their own to test."""


WITHOUT_OWN_TESTS: dict[str, str] = {
    "linrec/errors.py": "the error and warning types only: every error path's test raises and matches them",
    "bookbuild/layout.py": "where a book's files are, paths only: every test under tests/bookbuild builds on them",
    "bookbuild/render.py": "runs Jupyter Book: `make book` and CI's smoke book (.ci/book) render every page with "
    "warnings as errors; its configuration and footer are tested in tests/bookbuild/test_publish.py",
}


"""Modules tested through another module's tests, each with where and why."""


REPOSITORY_TESTS = {
    "test_layers.py": "the package's layers: no module imports upwards or in a cycle",
    "test_layout.py": "this file: the tests mirror the code",
    "test_packaging.py": "pyproject.toml, the pins, CITATION.cff and what the wheel ships",
    "test_resources.py": "book/resources.py, the script that measures the book's memory, disk and time",
    "test_gpu_check.py": "book/gpu_check.py, the prepared GPU check (make gpu-check)",
    "test_workflows.py": ".ci/run and the GitHub workflows: CI runs the README's commands, pages builds the book",
}


"""Test files about the repository as a whole, not one module."""


def mirror(code_roots: dict[Path, Path], tests: Path) -> tuple[list[str], list[str]]:
    """(modules without a test file, test files that mirror no module), as paths relative to their roots."""
    expected: dict[Path, str] = {}
    for root, under in code_roots.items():
        for module in sorted(root.rglob("*.py")):
            if module.name in NOT_MODULES:
                continue
            rel = module.relative_to(root)
            expected[tests / under / rel.parent / f"test_{rel.name}"] = str(Path(root.name) / rel)
    found = {p for p in tests.rglob("test_*.py")}
    untested = [name for path, name in expected.items() if path not in found]
    orphans = [str(p.relative_to(tests)) for p in sorted(found - set(expected))]
    return untested, orphans


def test_every_module_has_its_test_file_and_every_test_file_its_module():
    untested, orphans = mirror(CODE, ROOT / "tests")
    assert sorted(set(untested) - set(WITHOUT_OWN_TESTS)) == [], "modules without tests/<same path>/test_<module>.py"
    assert sorted(set(WITHOUT_OWN_TESTS) - set(untested)) == [], "listed without tests, but they exist (or no module)"
    assert sorted(set(orphans) - set(REPOSITORY_TESTS)) == [], "test files that mirror no module"


def test_the_mirror_finds_a_module_without_tests_and_a_test_without_a_module(tmp_path):
    code, tests = tmp_path / "src" / "pkg", tmp_path / "tests"
    for path in ("__init__.py", "core/__init__.py", "core/moments.py", "core/fit.py", "cache.py"):
        (code / path).parent.mkdir(parents=True, exist_ok=True)
        (code / path).write_text("")
    for path in ("core/test_moments.py", "test_cache.py", "core/test_gone.py"):
        (tests / path).parent.mkdir(parents=True, exist_ok=True)
        (tests / path).write_text("")
    assert mirror({code: Path()}, tests) == (["pkg/core/fit.py"], ["core/test_gone.py"])
