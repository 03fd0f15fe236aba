"""The versions at work, read in one place: for a result's provenance, and the releases that key the cache."""

from __future__ import annotations

import platform
import re
from collections.abc import Sequence
from importlib import metadata

LIBRARIES = ("linrec", "torch", "transformers")
"""What a measurement records: the code running and the libraries that compute the activations."""


def versions(names: Sequence[str] = LIBRARIES) -> dict[str, str]:
    """The version of each of ``names`` at work: ``python`` the interpreter's, ``linrec`` the running code's (not
    install metadata), torch and transformers their modules' ``__version__``, any other library its installed
    distribution's ("absent" where it is not installed)."""
    found = {}
    for name in names:
        if name == "python":
            found[name] = platform.python_version()
        elif name in LIBRARIES:
            found[name] = _module_version(name)
        else:
            try:
                found[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                found[name] = "absent"
    return found


def releases() -> dict[str, str]:
    """The releases of torch and transformers as major.minor.patch (a build tag such as ``+cu124`` dropped): their
    kernels and model code compute the activations, so they key every cached measurement."""
    return {name: _release(_module_version(name)) for name in ("torch", "transformers")}


def _module_version(name: str) -> str:
    if name == "linrec":
        from linrec._version import __version__

        return __version__
    import importlib

    return str(importlib.import_module(name).__version__)


def _release(version: str) -> str:
    found = re.match(r"\d+(\.\d+){0,2}", version)
    return found.group() if found else version
