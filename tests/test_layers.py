"""The package's layers: a module under src/linrec may import only from its own layer or the layers beneath it.

Every `import` counts, wherever it sits (module level, inside a function, under `if TYPE_CHECKING:`), because
each one is a dependency the lower layer would then have on a higher one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top; the modules (and sub-packages) of one entry form one layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("linrec.errors", "linrec.stats", "linrec.hub", "linrec.cache")),
    ("data", ("linrec.data",)),
    ("models", ("linrec.models",)),
    ("core", ("linrec.core",)),
    ("interventions", ("linrec.interventions",)),
    ("experiment", ("linrec.experiment",)),
    ("report", ("linrec.report",)),
    ("analysis", ("linrec.analysis",)),
    ("plots", ("linrec.plots",)),
    ("book", ("linrec.book",)),
    ("top", ("linrec.commands", "linrec.cli", "linrec.bench", "linrec.__main__", "linrec")),
]


def layer_of(module: str) -> int | None:
    """Index in LAYERS of a linrec module, by its longest listed prefix; None outside linrec or unlisted.

    The package `linrec` itself matches only exactly: its `__init__` imports everything, so it is top.
    """
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            exact_only = prefix == "linrec"
            if (module == prefix or (not exact_only and module.startswith(prefix + "."))) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def module_names(src: Path) -> dict[str, Path]:
    """Every module under src/linrec by dotted name (a package by its own name, from its __init__.py)."""
    names = {}
    for path in sorted((src / "linrec").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imported_modules(module: str, path: Path, known: set[str]) -> list[str]:
    """The linrec modules one file imports: relative imports resolved, `from pkg import sub` read as pkg.sub."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append(sub if sub in known else target)
    return [name for name in found if name == "linrec" or name.startswith("linrec.")]


def violations(src: Path) -> list[str]:
    """Each import that points up the layers, as 'module -> imported (layer a above b)'."""
    modules = module_names(src)
    problems = []
    for module, path in modules.items():
        own = layer_of(module)
        for target in dict.fromkeys(imported_modules(module, path, set(modules))):
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                problems.append(f"{module} -> {target} (layer {LAYERS[theirs][0]} above {LAYERS[own][0]})")
    return problems


def test_every_module_has_a_layer():
    unlisted = [m for m in module_names(SRC) if layer_of(m) is None]
    assert not unlisted, f"add these modules to a layer in tests/test_layers.py: {unlisted}"


def test_no_import_points_up_the_layers():
    found = violations(SRC)
    assert not found, "imports that point up the layers:\n" + "\n".join(found)


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "linrec" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_catches_a_planted_upward_import(tmp_path):
    src = _plant(
        tmp_path,
        {
            "__init__.py": "from linrec.core.fit import solve\n",
            "errors.py": "class LinrecError(Exception):\n    pass\n",
            "core/__init__.py": "",
            # Allowed: own layer, lower layers, relative imports downwards.
            "core/fit.py": "from linrec.errors import LinrecError\nfrom . import moments\nfrom ..data import tokens\n",
            "core/moments.py": "import numpy\n",
            "data/__init__.py": "",
            # Upward: inside a function, relative, and through the package's __init__.
            "data/tokens.py": "def f():\n    from ..core import fit\n    import linrec\n",
        },
    )
    assert sorted(violations(src)) == [
        "linrec.data.tokens -> linrec (layer top above data)",
        "linrec.data.tokens -> linrec.core.fit (layer core above data)",
    ]


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("linrec", "top"),
        ("linrec.cli", "top"),
        ("linrec.cache", "foundation"),
        ("linrec.models.zoo", "models"),
        ("linrec.plots.depth", "plots"),
        ("numpy", None),
    ],
)
def test_layer_of_known_modules(module, layer):
    index = layer_of(module)
    assert (LAYERS[index][0] if index is not None else None) == layer
