"""Writing files safely: a place checked by trying to write there, a file written whole or not at all (the one way
linrec writes a file atomically: outputs, and the cache's markers and digest index), the temporaries of killed runs
removed at the next start, and SIGTERM stopping a run as Ctrl-C does.

Checks try rather than ask: ``os.access`` answers yes to root (as Colab runs) whatever the permissions, and
nothing but a write finds a full disk. So a directory is created, and a file with an unpredictable name is
created in it exclusively (``O_EXCL``, never through a planted symlink), written and removed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from linrec.errors import LinrecError


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def check_writable(directory: Path, what: str, fix: str) -> None:
    """Raise a one-line :class:`LinrecError` naming ``directory`` (``what`` it is) and ``fix`` unless it can be
    created (with its parents) and a file created and written in it."""
    directory = directory.expanduser()
    try:  # a name too long fails already in exists(), with an OSError
        blocker = next((p for p in (directory, *directory.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise LinrecError(f"cannot write {what} {directory}: {blocker} is a file, not a directory; {fix}")
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".linrec-probe-")
        try:
            os.write(fd, b"\0")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        raise LinrecError(f"cannot write {what} {directory}: {_reason(err)}; {fix}") from err


def check_new_file(path: Path, option: str) -> None:
    """Fail before the work unless ``path`` (given as ``option``) could be written: its directory by
    :func:`check_writable`, its name by looking it up (a name too long for the file system fails there)."""
    check_writable(path.parent, f"{option} {path}: the directory", "choose another place")
    try:
        path.stat()
    except FileNotFoundError:
        return
    except OSError as err:
        raise LinrecError(f"cannot write {option} {path}: {_reason(err)}; choose another name") from err


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (signal 0 asks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temporary_prefix(path: Path) -> str:
    """Prefix of the temporaries of ``path``: the name cut short (so the temporary's name fits where the final one
    does) and this process's id (so a later run knows whether its writer is gone)."""
    return f".{path.name[:64]}.{os.getpid()}."


_TEMPORARY = re.compile(r"\.(\d+)\.[a-z0-9_]{8}\.tmp$")
"""The tail of a temporary's name: its writer's process id, then :func:`tempfile.mkstemp`'s random part."""


def remove_orphans(directory: Path, pattern: str, pid: re.Pattern[str]) -> None:
    """Remove the files of ``directory`` matching the glob ``pattern`` whose writer, the process id that ``pid``
    reads from the name (its group 1), is gone: what a killed process could not clean up."""
    for stale in directory.glob(pattern):
        found = pid.search(stale.name)
        if found and not process_alive(int(found.group(1))):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)


def remove_stale_temporaries(path: Path) -> None:
    """Remove the temporaries (files or directories) of ``path`` whose writer is gone (killed before it could clean
    up)."""
    remove_orphans(path.parent, f".{path.name[:64]}.*.tmp", _TEMPORARY)


def write_atomically(path: Path, write: Callable[[IO], object], binary: bool = False) -> None:
    """Call ``write`` on a file (text, or ``binary``) that becomes ``path`` once it returns: a temporary with an
    unpredictable name beside ``path`` (created exclusively), renamed into place; removed on any failure or
    interrupt."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=_temporary_prefix(path), suffix=".tmp")
    except OSError as err:
        raise LinrecError(f"could not write {path}: {_reason(err)}") from err
    try:
        umask = os.umask(0o022)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # the permissions a plain open() would have given, not mkstemp's 0o600
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            write(file)
        os.replace(name, path)
    except OSError as err:
        raise LinrecError(f"could not write {path}: {_reason(err)}") from err
    finally:
        Path(name).unlink(missing_ok=True)


def check_new_directory(directory: Path, option: str, force: bool = False) -> None:
    """Fail before the work unless ``directory`` (given as ``option``) can be written whole: it is absent or empty
    (or ``force``: it will be replaced), and a file can be written beside it (:func:`check_writable`)."""
    directory = directory.expanduser()
    if directory.exists() and not directory.is_dir():
        raise LinrecError(f"{option} {directory} is a file; give a directory to create")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise LinrecError(
            f"{option} {directory} exists and is not empty; give a new directory, or add --force to replace it"
        )
    check_writable(directory.parent, f"{option} {directory}: the directory", "choose another place")


@contextmanager
def new_directory(directory: Path, option: str = "--out", force: bool = False) -> Iterator[Path]:
    """A fresh directory beside ``directory``, filled within the block and then renamed to it, so ``directory`` holds
    all of it or stays as it was (an error, Ctrl-C or a full disk remove the temporary). Refused as
    :func:`check_new_directory` refuses; with ``force`` an existing ``directory`` is replaced."""
    directory = directory.expanduser()
    check_new_directory(directory, option, force)
    remove_stale_temporaries(directory)
    try:
        tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=_temporary_prefix(directory), suffix=".tmp"))
    except OSError as err:
        raise LinrecError(f"could not write {option} {directory}: {_reason(err)}") from err
    try:
        yield tmp
        umask = os.umask(0o022)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # what mkdir would have given, not mkdtemp's 0o700
        for path in tmp.rglob("*"):  # and what open() would have: a library may write its files 0o600 (safetensors)
            path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
        old = None
        if directory.is_dir() and any(directory.iterdir()):  # only with force (checked above): moved aside first
            old = Path(tempfile.mkdtemp(dir=directory.parent, prefix=_temporary_prefix(directory), suffix=".tmp"))
            os.replace(directory, old)
        os.replace(tmp, directory)  # onto nothing, or onto an empty directory
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as err:
        raise LinrecError(f"could not write {option} {directory}: {_reason(err)}") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`KeyboardInterrupt` as Ctrl-C does, so ``finally`` blocks remove
    temporaries and stop workers (a no-op outside the main thread, where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
