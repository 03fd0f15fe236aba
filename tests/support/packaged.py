"""The packaged real models by name and a skip for those not installed, for the packaged-model tests."""

from __future__ import annotations

from importlib import metadata

import pytest

from linrec.models.packaged import PACKAGED

SMOL, GEMMA = "smollm2-135m", "gemma3-270m"


QWEN05, QWEN15 = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"


def installed_or_skip(name: str) -> None:
    """Skip, saying what to install, unless every distribution of packaged model ``name`` is installed."""
    missing = []
    for project, version in PACKAGED[name].pins.items():
        try:
            metadata.version(project)
        except metadata.PackageNotFoundError:
            missing.append(f"{project}=={version}")
    if missing:
        target = "make install-scale" if name in (QWEN05, QWEN15) else "make install"
        pytest.skip(f"{name} is not installed ({', '.join(missing)}): {PACKAGED[name].install} (`{target}` does)")
