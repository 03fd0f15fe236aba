"""Cache entries planted and read back, and the writers, readers and builders the cache's tests run in other
processes: those are spawned, so what they run must be importable by name (a test module is not)."""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

from linrec.cache import MARKER, atomic_dir, build_entry, entry_complete

KEYS = 30


def content(key: int, version: str = "v1") -> dict[str, bytes]:
    """What entry ``key`` holds: a large file, a small one in a subdirectory (checkpoints are subdirectories)."""
    return {
        "weights.bin": bytes([key % 251]) * (50_000 + key),
        "step0/config.json": json.dumps([key, version]).encode(),
    }


def write(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def read(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MARKER
    }


def names(root: Path) -> list[str]:
    """What a directory of entries holds, each entry's current version as ``version``, other versions as ``old``."""
    current = {os.readlink(p) for p in root.iterdir() if p.is_symlink()}
    return sorted(
        "version" if p.name in current else "old" if p.name.startswith(".v-") else p.name
        for p in root.iterdir()
        if not p.name.endswith(".lock")
    )


def _wait(start_at: float) -> None:
    while time.time() < start_at:
        time.sleep(0.001)


def _writer(root: str, start_at: float) -> None:
    _wait(start_at)
    for key in range(KEYS):
        with atomic_dir(Path(root) / f"k{key}") as tmp:
            write(tmp, content(key))


def _reader(root: str, start_at: float) -> int:
    """Read every entry over and over until all are there; how many complete reads it made."""
    _wait(start_at)
    reads, deadline = 0, time.time() + 120
    while time.time() < deadline:
        present = 0
        for key in range(KEYS):
            path = Path(root) / f"k{key}"
            if path.exists():
                assert read(path) == content(key), f"entry {path} seen incomplete"
                assert entry_complete(path)
                present += 1
        reads += present
        if present == KEYS:
            return reads
    raise AssertionError("the writers never finished")


def _slow_build(log: Path, tmp: Path) -> None:
    with log.open("a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(1.0)
    write(tmp, content(3))


def _build(root: str, start_at: float) -> bool:
    _wait(start_at)
    return build_entry(Path(root) / "entry", functools.partial(_slow_build, Path(root) / "builds.log"))
