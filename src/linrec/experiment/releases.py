"""The releases of the libraries whose kernels and model code compute the activations, as they key the cache."""

from __future__ import annotations

import re

import torch


def library_versions() -> dict[str, str]:
    """The releases of torch and transformers, as major.minor.patch (a build tag such as ``+cu124`` dropped)."""
    import transformers

    return {"torch": _release(torch.__version__), "transformers": _release(transformers.__version__)}


def _release(version: str) -> str:
    found = re.match(r"\d+(\.\d+){0,2}", version)
    return found.group() if found else version
