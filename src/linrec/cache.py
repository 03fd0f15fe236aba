"""The on-disk cache: where it lives, how entries are keyed, and how they are written safely.

Everything expensive (the zoo, captured measurements) is cached under :func:`cache_dir`, in a
directory named by a hash of everything that determines its content. The rules that make it safe
for interrupted runs and for several processes at once:

- an entry is built in a temporary directory beside it, which gets a completeness marker
  (:data:`MARKER`: the size of every file) written last, and is then renamed into place, so every
  reader sees an entry either absent or complete;
- since the key names the content, a second writer of an entry that is already there discards its
  own copy rather than replacing the first (which a reader may be reading);
- a forced refresh, or the repair of a damaged entry, renames the old entry aside before removing
  it, then renames the new one in;
- :func:`build_entry` builds under a per-key file lock, so two processes never build the same
  entry: the second waits and then finds it;
- an entry whose files do not match its marker is reported (a warning with its path) and rebuilt.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

MARKER = ".complete.json"
"""The file, written last into every entry, that lists the size of each of its files."""


def cache_dir() -> Path:
    """``$LINREC_CACHE``, else ``$XDG_CACHE_HOME/linrec``, else ``~/.cache/linrec``."""
    if os.environ.get("LINREC_CACHE"):
        return Path(os.environ["LINREC_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "linrec"


def cache_key(content: object) -> str:
    """A short stable hash of JSON-serialisable ``content``."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _file_sizes(root: Path) -> dict[str, int]:
    """Size of every file under ``root`` but the marker (and a marker being written), by relative path."""
    return {
        p.relative_to(root).as_posix(): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(MARKER)
    }


def _write_marker(root: Path) -> None:
    tmp = root / f"{MARKER}.{os.getpid()}"
    tmp.write_text(json.dumps({"files": _file_sizes(root)}, indent=1))
    os.replace(tmp, root / MARKER)


def _check(path: Path) -> bool | None:
    """True for a complete entry, False for a damaged one, None for none (absent, or being replaced)."""
    try:
        expected = json.loads((path / MARKER).read_text())["files"]
    except FileNotFoundError:
        if not path.is_dir():
            return None
        try:  # an entry written before markers existed (by an atomic rename, so complete): mark it now
            _write_marker(path)
        except OSError:
            pass  # a read-only cache: still complete
        return True
    except (ValueError, KeyError, TypeError):
        return False
    try:
        found = _file_sizes(path)
    except FileNotFoundError:  # files vanished while listed: the entry is being moved aside
        return False if path.is_dir() else None
    return all(found.get(name) == size for name, size in expected.items())


def entry_complete(path: Path) -> bool:
    """Whether ``path`` holds a complete cache entry (false when it is absent or damaged).

    A damaged entry (its marker unreadable, a file missing or of another size than the marker says)
    is reported with a warning and counts as absent, so the caller rebuilds it. An entry written
    before markers existed gets its marker now, so that later damage is caught too.
    """
    state = _check(path)
    if state is False:
        warnings.warn(f"damaged cache entry {path} (files missing or truncated); rebuilding it", stacklevel=2)
    return bool(state)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(final: Path) -> None:
    """Remove the temporary directories of ``final`` left by processes that are gone (killed writers)."""
    prefix = f".tmp-{final.name}-"
    for stale in final.parent.glob(f"{prefix}*"):
        pid = stale.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _commit(tmp: Path, final: Path, replace: bool) -> None:
    """Rename the finished ``tmp`` to ``final``; see the module docstring for what happens when ``final`` exists."""
    try:
        os.rename(tmp, final)  # fails on a non-empty ``final``: never replaces it behind a reader's back
        return
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if not replace and _check(final):
        return  # the same content, committed first by another writer: ours is discarded
    aside = tmp.with_name(f"{tmp.name}.old")
    try:
        os.rename(final, aside)
    except FileNotFoundError:
        pass  # another process moved it aside first
    try:
        os.rename(tmp, final)
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise  # else a fresh entry from another writer is in place: ours is discarded
    shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def atomic_dir(final: Path, *, replace: bool = False) -> Iterator[Path]:
    """A fresh temporary directory beside ``final``, committed to ``final`` when the block completes.

    The marker is written last, then the directory is renamed into place. If ``final`` is already a
    complete entry it is kept and the new copy discarded, unless ``replace`` (a forced refresh).
    An exception in the block (an interrupt too) removes the temporary directory.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-{os.getpid()}-", dir=final.parent))
    try:
        yield tmp
        _write_marker(tmp)
        _commit(tmp, final, replace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def entry_lock(final: Path) -> Iterator[None]:
    """Hold the file lock of one cache key (``.<name>.lock`` beside it); the OS releases it if the holder dies."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(final.parent / f".{final.name}.lock"):
        yield


def build_entry(final: Path, build: Callable[[Path], None], *, refresh: bool = False) -> bool:
    """Make ``final`` a complete entry by ``build(tmp)`` unless it is one already; whether it built.

    It builds under the key's lock and looks again once it holds it, so of two processes that want
    the same missing entry one builds it and the other waits and finds it. ``refresh`` rebuilds and
    replaces an existing entry.
    """
    if not refresh and entry_complete(final):
        return False
    with entry_lock(final):
        if not refresh and _check(final):  # built by another process while this one waited
            return False
        with atomic_dir(final, replace=refresh) as tmp:
            build(tmp)
    return True
