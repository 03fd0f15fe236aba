"""The package's layers: a module under src/linrec may import only from its own layer or the layers beneath it,
and no modules import each other, directly or through a chain, inside one layer or across.

Every `import` counts, wherever it sits (module level, inside a function, under `if TYPE_CHECKING:`), because
each one is a dependency the lower layer would then have on a higher one, or one module on another that
depends on it."""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

from conftest import ROOT

SRC = ROOT / "src"


# Bottom to top; the modules (and sub-packages) of one entry form one layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "linrec.errors",
            "linrec.stats",
            "linrec.hub",
            "linrec.cache",
            "linrec.digests",
            "linrec.files",
            "linrec.progress",
            "linrec.threads",
            "linrec.installed_files",
            "linrec.versions",
            "linrec._version",
            "linrec._lazy",
        ),
    ),
    ("data", ("linrec.data",)),
    ("models", ("linrec.models",)),
    ("core", ("linrec.core",)),
    ("interventions", ("linrec.interventions",)),
    ("experiment", ("linrec.experiment",)),
    ("report", ("linrec.report",)),
    ("analysis", ("linrec.analysis",)),
    ("plots", ("linrec.plots",)),
    ("notebook", ("linrec.notebook",)),
    ("top", ("linrec.commands", "linrec.cli", "linrec.__main__", "linrec")),
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


def import_graph(src: Path) -> dict[str, list[str]]:
    """Each linrec module's direct imports of other linrec modules, every import counted as `violations` counts it.

    An edge is an import written in the file. Python also runs every parent package's `__init__` before a
    submodule, but those implicit runs are no edges: `linrec/__init__` imports most of the package, so with them
    every module would sit in a cycle through `linrec` and the check would say nothing. An explicit import of a
    package (`from linrec import __version__`, `from linrec.core import fit_affine`) is an edge to its
    `__init__` like any other, so a module that `__init__` reaches and that imports the package back is a cycle,
    which it really is: it would meet the package half initialised. (The layers already forbid `import linrec`
    below the top; in the top layer `linrec.cli` imports `linrec`, which imports no command, so no cycle.)
    A package `__init__` importing a name of its own (`from . import x`, x no submodule) is no edge.
    """
    modules = module_names(src)
    return {
        module: [t for t in dict.fromkeys(imported_modules(module, path, set(modules))) if t != module and t in modules]
        for module, path in modules.items()
    }


def cycles(graph: dict[str, list[str]]) -> list[str]:
    """Every import that closes a cycle, each shown as one shortest cycle through it, 'a -> b -> ... -> a'.

    For an edge a -> b, a breadth-first search from b back to a finds the shortest way round; each cycle is
    written from its alphabetically first module, so one cycle reached through each of its edges shows once.
    """
    found = set()
    for start, targets in graph.items():
        for target in targets:
            previous = {target: None}
            queue = deque([target])
            while queue and start not in previous:
                node = queue.popleft()
                for following in graph.get(node, []):
                    if following not in previous:
                        previous[following] = node
                        queue.append(following)
            if start not in previous:
                continue
            path, node = [], start
            while node is not None:
                path.append(node)
                node = previous[node]
            ring = [start, *reversed(path[1:])]  # start -> target -> ... (the way back ends at start)
            first = ring.index(min(ring))
            ring = ring[first:] + ring[:first]
            found.add(" -> ".join([*ring, ring[0]]))
    return sorted(found)


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "linrec" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_every_module_has_a_layer():
    unlisted = [m for m in module_names(SRC) if layer_of(m) is None]
    assert not unlisted, f"add these modules to a layer in tests/test_layers.py: {unlisted}"


def test_no_import_points_up_the_layers():
    found = violations(SRC)
    assert not found, "imports that point up the layers:\n" + "\n".join(found)


def test_no_modules_import_each_other():
    found = cycles(import_graph(SRC))
    assert not found, "modules that import each other (break each cycle at one of its imports):\n" + "\n".join(found)


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


def test_checker_catches_planted_cycles(tmp_path):
    src = _plant(
        tmp_path,
        {
            # Through the package's __init__, which imports the module that imports the package.
            "__init__.py": "from linrec.core.fit import solve\n__version__ = '0'\n",
            "core/__init__.py": "",
            # Two modules of one layer, one of the imports inside a function.
            "core/fit.py": "from linrec import __version__\nfrom linrec.core import moments\n",
            "core/moments.py": "import numpy\n\n\ndef f():\n    from .fit import solve\n",
            # Across two layers, with an upward import.
            "data/__init__.py": "",
            "data/tokens.py": "import linrec.models.arch\n",
            "models/__init__.py": "",
            "models/arch.py": "from linrec.data import tokens\n",
            # A chain of three, closed under TYPE_CHECKING.
            "cli.py": "from linrec.commands import bench\n",
            "commands/__init__.py": "",
            "commands/bench.py": "from linrec.commands.args import positive_int\n",
            "commands/args.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from linrec.cli import main\n"
            ),
        },
    )
    assert cycles(import_graph(src)) == [
        "linrec -> linrec.core.fit -> linrec",
        "linrec.cli -> linrec.commands.bench -> linrec.commands.args -> linrec.cli",
        "linrec.core.fit -> linrec.core.moments -> linrec.core.fit",
        "linrec.data.tokens -> linrec.models.arch -> linrec.data.tokens",
    ]


def test_checker_passes_a_planted_acyclic_tree(tmp_path):
    src = _plant(
        tmp_path,
        {
            "__init__.py": "from linrec.core.fit import solve\n__version__ = '0'\n",
            "errors.py": "class LinrecError(Exception):\n    pass\n",
            # A package __init__ importing its own submodule, and a name of its own.
            "core/__init__.py": "from linrec.core.fit import solve\nfrom . import solve as again\n",
            # Two ways down to errors (directly and through moments): shared targets, no cycle.
            "core/fit.py": "from linrec.errors import LinrecError\nfrom . import moments\nfrom ..data import tokens\n",
            "core/moments.py": "from linrec.errors import LinrecError\n",
            "data/__init__.py": "",
            "data/tokens.py": "from linrec.errors import LinrecError\n",
            # The top layer importing the package and, inside a function, its commands.
            "cli.py": "from linrec import __version__\n\n\ndef main():\n    from linrec.commands import bench\n",
            "commands/__init__.py": "",
            "commands/bench.py": "from linrec.commands.args import positive_int\nfrom linrec.core import fit\n",
            "commands/args.py": "from linrec.errors import LinrecError\n",
        },
    )
    assert cycles(import_graph(src)) == [] and violations(src) == []


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
