"""The on-disk cache: where it lives, how entries are keyed, and how they are written and read safely.

Everything expensive (the zoo, captured measurements) is cached under :func:`cache_dir`, in an entry
named by a hash of everything that determines its content. The rules that make it safe for interrupted
runs, for damaged files and for several processes at once:

- an entry is built in a temporary directory beside it (``.tmp-<pid>-<random>-<name>``), which gets a
  completeness marker (:data:`MARKER`: the size and sha256 of every file) written last;
- the finished directory becomes a *version* (``.v-<random>-<name>``) and the entry's name is a symbolic
  link to its current version. A new entry is linked with ``symlink``, which fails when the name exists,
  so a second writer of the same content discards its own copy; a forced refresh, or the repair of a
  damaged entry, replaces the link with ``rename``, which is atomic. A reader resolves the link once
  (:func:`current_entry`) and reads that version only, so it sees the old complete entry or the new
  complete one, never a mix. A replaced version stays on disk for :data:`SUPERSEDED_S`, for the readers
  still reading it, and is then removed;
- :func:`build_entry` builds under a per-key file lock, so two processes never build the same entry:
  the second waits and then finds it;
- an entry is verified against its marker when it is read, every file hashed, once per process (again
  whenever a file's size, modification time or inode changes); one that does not match is reported
  once, with a warning naming its path, and rebuilt;
- temporaries and versions left by killed processes are removed when the next process writes beside
  them (:func:`remove_stale`).

Files outside the cache (local model weights, text files) are hashed once and their digests remembered
in an index in the cache by :func:`linrec.digests.file_sha256`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from filelock import FileLock

from linrec.errors import LinrecError
from linrec.files import check_writable, process_alive, write_atomically

MARKER = ".complete.json"
"""The file, written last into every entry, that lists the size and sha256 of each of its files."""

STALE_S = 600.0
"""Seconds after which a temporary of a process that is gone is removed. A process of another container
or machine sharing the cache looks gone from here; ten minutes without a change to its temporary is far
longer than any write the cache makes takes to touch it."""

SUPERSEDED_S = 3600.0
"""Seconds a replaced version of an entry is kept for readers that resolved it before the replacement
(a measurement handle reads its moments from disk block by block, possibly long after it was opened)."""

_TMP, _VERSION = ".tmp-", ".v-"


def cache_dir() -> Path:
    """``$LINREC_CACHE``, else ``$XDG_CACHE_HOME/linrec``, else ``~/.cache/linrec``."""
    if os.environ.get("LINREC_CACHE"):
        return Path(os.environ["LINREC_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "linrec"


def cache_key(content: object) -> str:
    """A short stable hash of JSON-serialisable ``content``."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def check_cache() -> None:
    """Fail before any work when the cache (:func:`cache_dir`) cannot hold an entry."""
    check_writable(
        cache_dir(),
        "the cache",
        "set LINREC_CACHE to a writable directory with free space (e.g. export LINREC_CACHE=/tmp/linrec-cache)",
    )


# ---------------------------------------------------------------------------------------------
# File hashes.


def hash_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks (the one place the cache hashes a file)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_signature(stat: os.stat_result) -> list[int]:
    """What says a file is unchanged without reading it: size, modification time and inode."""
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


# ---------------------------------------------------------------------------------------------
# Markers and verification.


def _files(root: Path) -> dict[str, os.stat_result]:
    """Every file under ``root`` but the marker (and a marker being written: its temporary is named after it,
    ``.<MARKER>.<pid>...``, by :func:`linrec.files.write_atomically`), by relative path."""
    return {
        p.relative_to(root).as_posix(): p.stat()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith((MARKER, f".{MARKER}"))
    }


def _write_marker(root: Path) -> None:
    files = {name: [stat.st_size, hash_file(root / name)] for name, stat in _files(root).items()}
    write_atomically(root / MARKER, lambda f: f.write(json.dumps({"files": files}, indent=1)))


_VERIFIED: dict[str, list[list[int]]] = {}
"""Versions this process has hashed and found intact, with the signatures of their files then."""


def _verify(version: Path) -> bool | None:
    """Whether the version directory ``version`` matches its marker: True, False (damaged) or None (absent)."""
    try:
        marker = version / MARKER
        signatures = [file_signature(marker.stat())]
        expected = json.loads(marker.read_text())["files"]
        found = _files(version)
    except FileNotFoundError:
        if not version.is_dir():
            return None  # removed while it was read: a superseded version
        if (version / MARKER).exists() or version.name.startswith(_VERSION):
            return False  # a file vanished: damaged
        return _adopt(version)
    except (ValueError, KeyError, TypeError):
        return False
    if not isinstance(expected, dict) or set(expected) != set(found):
        return False
    signatures += [file_signature(found[name]) for name in sorted(found)]
    if _VERIFIED.get(str(version)) == signatures:
        return True
    # a plain directory's marker of sizes only (from before checksums): checksums are added below
    legacy = not version.name.startswith(_VERSION) and all(isinstance(v, int) for v in expected.values())
    try:
        for name, stat in found.items():
            size, digest = (expected[name], None) if legacy else expected[name]
            if stat.st_size != size or (digest is not None and hash_file(version / name) != digest):
                return False
    except (ValueError, TypeError):  # a marker entry that is no [size, sha256] pair
        return False
    except FileNotFoundError:
        return None if not version.is_dir() else False
    if legacy:
        return _adopt(version)
    _VERIFIED[str(version)] = signatures
    return True


def _adopt(version: Path) -> bool:
    """Give an entry from before checksums (no marker, or sizes only: complete, since it was renamed into place
    whole) its marker now, so that later damage is caught."""
    with suppress(OSError, LinrecError):  # a read-only cache: still complete, unguarded
        _write_marker(version)
    return True


_REPORTED: set[str] = set()
"""Damaged versions this process has warned about (each is reported once)."""


def current_entry(final: Path) -> Path | None:
    """The directory holding the current version of the entry ``final``, verified; None when there is none.

    Read an entry through this path only: it stays the same complete version while the entry is replaced
    (for :data:`SUPERSEDED_S` at least). A damaged entry is reported with a warning naming it (once per process)
    and counts as absent, so that the caller rebuilds it.
    """
    version = _resolve(final)
    state = None if version is None else _verify(version)
    if state is False and str(version) not in _REPORTED:
        _REPORTED.add(str(version))
        warnings.warn(
            f"damaged cache entry {final} (a file changed, missing or truncated since it was written); rebuilding it",
            stacklevel=2,
        )
    return version if state else None


def built_entry(final: Path) -> Path:
    """The current version of ``final`` after :func:`build_entry` made it; a LinrecError in the rare case that it
    was damaged between the two (ask again, and it is rebuilt)."""
    found = current_entry(final)
    if found is None:
        raise LinrecError(f"the cache entry {final} was damaged while in use; run again to rebuild it")
    return found


def entry_complete(final: Path) -> bool:
    """Whether ``final`` holds a complete, undamaged cache entry (see :func:`current_entry`)."""
    return current_entry(final) is not None


def _resolve(final: Path) -> Path | None:
    """The version ``final`` names now: its link's target, or ``final`` itself for a plain directory."""
    try:
        target = os.readlink(final)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
        return final if final.is_dir() else None  # a plain directory: an entry made before versions
    return final.parent / target


def intact(version: Path) -> bool:
    """Whether a version directory :func:`current_entry` gave still matches its marker (cheap when unchanged)."""
    return bool(_verify(version))


# ---------------------------------------------------------------------------------------------
# Writing.


def _newest_change(path: Path) -> float:
    """The latest modification time of ``path`` and everything under it (0 when it vanished)."""
    try:
        return max([path.lstat().st_mtime, *(p.lstat().st_mtime for p in path.rglob("*"))])
    except OSError:
        return 0.0


def _pid(name: str) -> int | None:
    """The writer's pid in a temporary's name (``.tmp-<pid>-...``)."""
    field = name[len(_TMP) :].split("-", 1)[0]
    return int(field) if field.isdigit() else None


def remove_stale(parent: Path, *, older_than: float = STALE_S) -> None:
    """Remove, in the directory ``parent``, the temporaries of writers that are gone and unchanged for
    ``older_than`` seconds, and the versions no entry names that have been replaced for :data:`SUPERSEDED_S`."""
    now = time.time()
    try:
        names = [p.name for p in parent.iterdir()]
    except OSError:
        return
    for name in names:
        path = parent / name
        if name.startswith(_TMP):
            pid = _pid(name)
            if pid is not None and pid != os.getpid() and not process_alive(pid):
                if now - _newest_change(path) >= older_than:
                    _remove(path)
        elif name.startswith(_VERSION):
            entry = parent / name[len(_VERSION) :].split("-", 1)[-1]
            if _resolve(entry) == path:
                continue
            try:
                replaced = entry.lstat().st_mtime  # when the link to the current version was made
            except FileNotFoundError:
                replaced = 0.0
            if now - max(replaced, _newest_change(path)) >= SUPERSEDED_S:
                _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with suppress(OSError):
            path.unlink()


_SWEPT: set[str] = set()


def _sweep(parent: Path) -> None:
    """:func:`remove_stale` in ``parent``, once per process."""
    if str(parent) not in _SWEPT:
        _SWEPT.add(str(parent))
        remove_stale(parent)


_NO_LINKS = (errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP)
"""What ``symlink`` fails with on a file system without symbolic links (Google Drive mounted on Colab, FAT)."""


def _link(target: str, link: Path) -> bool:
    """Make ``link`` a symbolic link to ``target``; False where the file system has no symbolic links."""
    try:
        os.symlink(target, link)
    except OSError as err:
        if err.errno in _NO_LINKS:
            return False
        raise
    return True


def _commit(tmp: Path, final: Path, replace: bool) -> None:
    """Make the finished ``tmp`` the current version of ``final`` (see the module docstring).

    Where the file system has no symbolic links the version itself is renamed to ``final``: a new entry is still
    made whole or not at all, but a refresh moves the old one aside first, so a reader may find it missing for a
    moment (and rebuild it) or lose the files of the version it resolved."""
    version = Path(tempfile.mkdtemp(prefix=_VERSION, suffix=f"-{final.name}", dir=final.parent))
    os.rename(tmp, version)  # onto the empty directory just made: a fresh, unique name
    try:
        if not replace:
            try:
                if not _link(version.name, final):
                    _rename_new(version, final)
                return
            except FileExistsError:
                if _verify_quietly(final):
                    _remove(version)  # the same content, committed first by another writer: ours is discarded
                    return
        link = final.with_name(f"{_TMP}{os.getpid()}-{version.name[len(_VERSION) :]}")
        if not _link(version.name, link):
            with suppress(FileNotFoundError):
                os.rename(final, version.with_name(f"{version.name}-old"))
            os.rename(version, final)
            return
        try:
            os.replace(link, final)
        except IsADirectoryError:  # an entry made before versions: it becomes a replaced version
            os.rename(final, version.with_name(f"{version.name}-old"))
            os.replace(link, final)
    except BaseException:
        _remove(version)
        raise


def _rename_new(version: Path, final: Path) -> None:
    """Rename ``version`` to ``final`` unless ``final`` exists (FileExistsError then)."""
    if final.exists() or final.is_symlink():
        raise FileExistsError(final)
    try:
        os.rename(version, final)
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):  # another writer renamed its copy there first
            raise FileExistsError(final) from err
        raise


@contextmanager
def atomic_dir(final: Path, *, replace: bool = False) -> Iterator[Path]:
    """A fresh temporary directory beside ``final``, made its current version when the block completes.

    The marker is written last, then the version is linked (see the module docstring). If ``final`` is
    already a complete entry it is kept and the new copy discarded, unless ``replace`` (a forced refresh).
    An exception in the block (an interrupt too) removes the temporary directory.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    _sweep(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP}{os.getpid()}-", suffix=f"-{final.name}", dir=final.parent))
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
    replaces an existing entry. Read the entry through :func:`built_entry` (or :func:`current_entry`).
    """
    if not refresh and entry_complete(final):
        return False
    with entry_lock(final):
        if not refresh and _verify_quietly(final):  # built by another process while this one waited
            return False
        with atomic_dir(final, replace=True) as tmp:
            build(tmp)
    return True


def _verify_quietly(final: Path) -> bool:
    version = _resolve(final)
    return version is not None and bool(_verify(version))
