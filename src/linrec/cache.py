"""The on-disk cache: where it lives, how entries are keyed, and how they are written safely.

Everything expensive (the zoo, captured measurements) is cached under :func:`cache_dir`, in a
directory named by a hash of everything that determines its content, and written into a temporary
directory that is renamed into place only when complete: an interrupted run leaves nothing that
could be mistaken for a finished entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """``$LINREC_CACHE``, else ``$XDG_CACHE_HOME/linrec``, else ``~/.cache/linrec``."""
    if os.environ.get("LINREC_CACHE"):
        return Path(os.environ["LINREC_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "linrec"


def cache_key(content: object) -> str:
    """A short stable hash of JSON-serialisable ``content``."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """A fresh temporary directory beside ``final``, renamed to ``final`` when the block completes."""
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):  # left by a killed process
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if final.exists():  # a forced rebuild, or another process finished first
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
