"""Lazy attributes for packages (PEP 562): a package's submodules, and names homed elsewhere, imported on first use.

Every ``__init__`` of linrec calls :func:`lazy` once::

    __getattr__, __dir__ = lazy(__name__, globals())

so that ``import linrec`` stays cheap (no torch, no transformers) while ``linrec.analysis.bilinear.probe_sweep``
works after a plain ``import linrec``: the first access to ``linrec.analysis`` imports that subpackage, the
first to ``linrec.analysis.bilinear`` imports that module, and each is kept in the package's namespace after.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, MutableMapping


def lazy(
    package: str, namespace: MutableMapping[str, object], homes: Mapping[str, str] | None = None
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose module namespace is ``namespace``.

    ``__getattr__(name)`` returns ``name`` from its home module when ``homes`` (name -> module) lists it, else
    the submodule ``package.name`` when there is one, importing it on first use and keeping it in ``namespace``;
    anything else is an :class:`AttributeError`, as for an ordinary module."""
    homes = dict(homes or {})

    def __getattr__(name: str) -> object:
        if name in homes:
            value = getattr(importlib.import_module(homes[name]), name)
        elif not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes, *_submodules(package, namespace)})

    return __getattr__, __dir__


def _submodules(package: str, namespace: Mapping[str, object]) -> list[str]:
    """The names of ``package``'s submodules and subpackages (from its ``__path__``), without importing them."""
    import pkgutil

    path = namespace.get("__path__")
    return [info.name for info in pkgutil.iter_modules(path)] if isinstance(path, list) else []
