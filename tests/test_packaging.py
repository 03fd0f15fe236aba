"""The package's metadata: license, citation, pinned environment, version floors, and what the wheel ships."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


PROJECT = PYPROJECT["project"]


def declared() -> dict[str, list[Requirement]]:
    """Every requirement in pyproject.toml (base and extras), by canonical name."""
    reqs = [*PROJECT["dependencies"], *(r for extra in PROJECT["optional-dependencies"].values() for r in extra)]
    out: dict[str, list[Requirement]] = {}
    for line in reqs:
        req = Requirement(line)
        out.setdefault(canonicalize_name(req.name), []).append(req)
    return out


def pins(text: str | None = None) -> dict[str, Version]:
    """requirements.txt (or `text`) as name -> pinned version; fails on any line that is not `name==version`."""
    if text is None:
        text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version, f"not pinned: {line}"
        out[canonicalize_name(req.name)] = Version(specs[0].version)
    return out


def test_the_license_file_is_the_license_pyproject_declares_held_by_its_authors():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PROJECT["license-files"] == ["LICENSE"] and text.splitlines()[0] == f"{PROJECT['license']} License"
    [author] = [a["name"] for a in PROJECT["authors"]]
    assert re.search(rf"^Copyright \(c\) 20\d\d {re.escape(author)}$", text, re.MULTILINE)
    assert PROJECT["license"] != "MIT" or "Permission is hereby granted, free of charge" in text  # MIT's own grant
    # PEP 639 metadata (an SPDX string and license-files) is read by setuptools from 77 on.
    setuptools = next(Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    assert "76.1" not in setuptools.specifier and "77.0" in setuptools.specifier


def test_citation_cff_cites_this_package_and_the_paper():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["license"] == PROJECT["license"] and cff["version"] == PROJECT["version"]
    [paper] = [r for r in cff["references"] if r["type"] == "article"]
    assert paper["title"].startswith("How Linear Is a Transformer Feed-Forward Block?")
    assert paper["year"] == 2026 and paper["authors"][0]["family-names"] == "Whipp"
    assert {"type": "other", "value": "arXiv:2606.19379"}.items() <= paper["identifiers"][0].items()


@pytest.mark.parametrize("line", ["tqdm", "numpy>=2.4", "torch==2.*", "pandas==3.1.1,<4"])
def test_an_unpinned_requirement_is_refused(line):
    assert pins("numpy==2.4.6  # fine\n") == {"numpy": Version("2.4.6")}
    with pytest.raises(AssertionError, match="not pinned"):
        pins(f"numpy==2.4.6\n{line}\n")


def test_requirements_pin_everything_pyproject_declares_within_its_ranges():
    pinned, wanted = pins(), declared()
    assert sorted(set(wanted) - set(pinned)) == [], "declared in pyproject.toml but not pinned in requirements.txt"
    assert sorted(set(pinned) - set(wanted)) == [], "pinned in requirements.txt but not declared in pyproject.toml"
    outside = [
        f"{name}=={pinned[name]} outside {req}"
        for name, reqs in wanted.items()
        for req in reqs
        if not req.specifier.contains(pinned[name], prereleases=True)
    ]
    assert outside == []


def test_version_floors():
    assert PROJECT["requires-python"] == ">=3.11"
    # linrec.models.loading passes `dtype=` to from_pretrained, which transformers accepts from 4.56.
    [transformers] = declared()["transformers"]
    assert "4.55.4" not in transformers.specifier and "4.56.0" in transformers.specifier


def test_python_floor_is_the_oldest_the_pinned_packages_support():
    """Read each installed pin's own Requires-Python: all must admit 3.11, and at least one must refuse 3.10."""
    floors = {}
    for name, version in pins().items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(dist.version).public == version.public and dist.metadata["Requires-Python"]:
            floors[name] = Requirement(f"python{dist.metadata['Requires-Python']}").specifier
    assert {"numpy", "pandas", "scikit-learn", "transformers"} <= set(floors), "run in the pinned environment"
    assert [n for n, spec in floors.items() if "3.11" not in spec] == []
    assert [n for n, spec in floors.items() if "3.10" not in spec], "nothing pinned needs 3.11: lower the floor"


@pytest.mark.slow
def test_import_linrec_needs_no_plotting_library():
    """Everything but linrec.plots imports without matplotlib or seaborn (they are in the notebook/book extras)."""
    code = (
        "import importlib, pkgutil, sys, linrec\n"
        "for m in pkgutil.walk_packages(linrec.__path__, 'linrec.'):\n"
        "    if not m.name.startswith(('linrec.plots', 'linrec.__main__')):\n"
        "        importlib.import_module(m.name)\n"
        "print(sorted({k.split('.')[0] for k in sys.modules} & {'matplotlib', 'seaborn'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    base = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert not base & {"matplotlib", "seaborn"}
    assert {"matplotlib", "seaborn"} <= {
        canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["notebook"]
    }


def test_wheel_ships_the_library_typed_and_licensed_and_not_the_books_build(tmp_path):
    """Build the wheel from a copy of the sources (offline, no isolation) and read what it contains: the library,
    with what a chapter calls at run time (linrec.notebook), and not the book's build (book/bookbuild)."""
    pytest.importorskip("setuptools", minversion="77")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    code = "from setuptools import build_meta; print(build_meta.build_wheel('dist'))"
    (tmp_path / "dist").mkdir()
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    info = f"linrec-{PROJECT['version']}.dist-info"
    with zipfile.ZipFile(tmp_path / "dist" / out.stdout.strip().splitlines()[-1]) as wheel:
        names = set(wheel.namelist())
        meta = Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert (ROOT / "src" / "linrec" / "py.typed").is_file() and "linrec/py.typed" in names
    assert f"{info}/licenses/LICENSE" in names
    assert meta["License-Expression"] == "MIT" and meta["License-File"] == "LICENSE"
    assert meta["Requires-Python"] == ">=3.11"
    assert all(n.startswith(("linrec/", f"{info}/")) for n in names), sorted(names)
    shipped = {n.removeprefix("linrec/notebook/") for n in names if n.startswith("linrec/notebook/")}
    # the library's modules and the chapter digests a Colab install cell checks (bookbuild.notebooks.DIGESTS)
    assert shipped == {p.name for p in (ROOT / "src" / "linrec" / "notebook").glob("*.py")} | {"chapter_sources.json"}
    assert "chapter.py" in shipped and not shipped & {p.name for p in (ROOT / "book" / "bookbuild").glob("*.py")} - {
        "__init__.py"
    }


@pytest.mark.slow
def test_import_linrec_defers_torch_until_a_public_name_is_used():
    probe = (
        "import sys, linrec; heavy = {'torch', 'transformers', 'pandas'} & set(sys.modules); "
        "assert not heavy, heavy; linrec.measure; assert 'torch' in sys.modules; "
        "names = dir(linrec); assert set(linrec.__all__) <= set(names) and len(names) == len(set(names))"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        import linrec

        linrec.nosuch  # noqa: B018
