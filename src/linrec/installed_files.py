"""Files inside pinned releases of distributions installed from the package index (models, texts).

A file is found through the installed distribution's metadata, never by importing its package (such
packages often import what is not installed), and checked against a sha256 before it is used: one pinned
in linrec, or else the one the wheel's RECORD lists. Every way it can fail (not installed, another
release, the file missing, a different hash) is one :class:`LinrecError` naming the distribution, the
release and the pip command that fixes it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from linrec.digests import file_sha256
from linrec.errors import LinrecError


def _record_sha256(installed: metadata.Distribution, file: str) -> str | None:
    """The sha256 (hex) the wheel's RECORD lists for ``file``."""
    for entry in installed.files or []:
        if entry.as_posix() == file and entry.hash is not None and entry.hash.mode == "sha256":
            padded = entry.hash.value + "=" * (-len(entry.hash.value) % 4)
            return base64.urlsafe_b64decode(padded).hex()
    return None


def installed_releases(what: str, pins: Mapping[str, str]) -> dict[str, metadata.Distribution]:
    """The installed distributions of ``pins`` (project -> pinned release), or one error naming every one that is
    missing or of another release and the pip command that installs them all; ``what`` names what needs them."""
    installed: dict[str, metadata.Distribution] = {}
    wrong = []
    for project, version in pins.items():
        try:
            installed[project] = metadata.distribution(project)
        except metadata.PackageNotFoundError:
            wrong.append(f"{project}=={version} (not installed)")
            continue
        if installed[project].version != version:
            wrong.append(f"{project}=={version} (release {installed[project].version} is installed)")
    if wrong:
        # --no-deps: such packages often declare runtimes linrec does not use
        command = "pip install --no-deps " + " ".join(f"{d}=={v}" for d, v in pins.items())
        them = "them" if len(pins) > 1 else "it"
        raise LinrecError(f"{what} needs {', '.join(wrong)}: install {them} with `{command}` (`make install` does)")
    return installed


def installed_file(what: str, distribution: str, version: str, file: str, sha256: str | None = None) -> Path:
    """The path of ``file`` inside release ``version`` of ``distribution``, checked against ``sha256`` (when None, the
    sha256 the wheel's RECORD lists); ``what`` names what needs it in the errors (e.g. "the corpus 'x'")."""
    installed = installed_releases(what, {distribution: version})[distribution]
    path = Path(str(installed.locate_file(file)))
    expected = sha256 or _record_sha256(installed, file)
    reinstall = f"`pip install --force-reinstall --no-deps {distribution}=={version}`"
    if not path.is_file() or expected is None:
        raise LinrecError(f"{what}: {distribution} {version} is missing its file {file}: reinstall it, {reinstall}")
    if file_sha256(path) != expected:
        pinned = "its wheel records" if sha256 is None else f"linrec pins for {distribution} {version}"
        raise LinrecError(f"{path} does not match the sha256 {pinned} (damaged or replaced): reinstall it, {reinstall}")
    return path
