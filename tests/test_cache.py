"""linrec.cache: The on-disk cache: where it lives, how entries are keyed, and how they are written and read safely."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from linrec import cache
from linrec.cache import MARKER, atomic_dir, build_entry, current_entry, entry_complete
from support.cache_entries import KEYS, _build, _reader, _writer, content, names, read, write

REFRESHER = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("cache", sys.argv[1])  # linrec.cache alone: no torch to import
cache = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cache)
final = Path(sys.argv[2])
def write(r, tmp):
    (tmp / "step0").mkdir()
    (tmp / "weights.bin").write_bytes(bytes([7]) * 50_007)
    (tmp / "step0" / "config.json").write_bytes(json.dumps([7, f"v{r}"]).encode())
for r in range(int(sys.argv[3])):
    cache.build_entry(final, lambda tmp, r=r: write(r, tmp), refresh=True)
"""


@pytest.mark.slow
def test_concurrent_writers_and_readers_of_the_same_keys(tmp_path):
    start_at = time.time() + 5  # past the start-up of every process, so that they collide
    with ProcessPoolExecutor(6, mp_context=multiprocessing.get_context("spawn")) as pool:
        writers = [pool.submit(_writer, str(tmp_path), start_at) for _ in range(4)]
        readers = [pool.submit(_reader, str(tmp_path), start_at) for _ in range(2)]
        for w in writers:
            w.result()  # no ENOTEMPTY, no FileNotFoundError
        assert all(r.result() > 0 for r in readers)
    # no temporaries left, one version per entry
    assert names(tmp_path) == sorted([f"k{k}" for k in range(KEYS)] + ["version"] * KEYS)
    assert all(read(tmp_path / f"k{k}") == content(k) for k in range(KEYS))


def test_second_writer_discards_its_copy_and_refresh_replaces(tmp_path):
    final = tmp_path / "entry"
    with atomic_dir(final) as tmp:
        write(tmp, content(1, "first"))
    first = current_entry(final)
    with atomic_dir(final) as tmp:
        write(tmp, content(1, "second"))
    assert read(final) == content(1, "first") and current_entry(final) == first
    with atomic_dir(final, replace=True) as tmp:
        write(tmp, content(1, "refreshed"))
    assert read(final) == content(1, "refreshed") and entry_complete(final)
    assert first is not None and read(first) == content(1, "first")  # kept for readers that resolved it
    assert names(tmp_path) == ["entry", "old", "version"]


def test_a_file_system_without_symbolic_links_still_gets_whole_entries(tmp_path, monkeypatch):
    import errno

    def no_links(*args, **kwargs):  # what Google Drive mounted on Colab answers
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "symlink", no_links)
    final = tmp_path / "entry"
    assert build_entry(final, lambda tmp: write(tmp, content(2, "first")))
    assert not final.is_symlink() and read(current_entry(final)) == content(2, "first")
    assert not build_entry(final, lambda tmp: write(tmp, content(2, "second")))  # found, not rebuilt
    with atomic_dir(final) as tmp:  # a second writer of the same entry discards its copy
        write(tmp, content(2, "second"))
    assert read(final) == content(2, "first")
    assert build_entry(final, lambda tmp: write(tmp, content(2, "refreshed")), refresh=True)
    assert read(current_entry(final)) == content(2, "refreshed")
    assert names(tmp_path) == ["entry", "old"]  # the replaced one kept aside for its readers, then swept


def test_an_interrupted_write_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(tmp_path / "entry") as tmp:
            write(tmp, content(2))
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_one_process_builds_a_key_while_the_other_waits(tmp_path):
    start_at = time.time() + 5
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        built = sorted(f.result() for f in [pool.submit(_build, str(tmp_path), start_at) for _ in range(2)])
    assert built == [False, True]
    assert len((tmp_path / "builds.log").read_text().splitlines()) == 1
    assert read(tmp_path / "entry") == content(3)


@pytest.mark.parametrize("damage", ["truncate", "delete", "marker", "same size", "extra file"])
def test_a_damaged_entry_is_reported_and_rebuilt(tmp_path, damage):
    final = tmp_path / "entry"
    builds = []

    def build(tmp: Path) -> None:
        builds.append(1)
        write(tmp, content(4))

    assert build_entry(final, build) and not build_entry(final, build)
    if damage == "truncate":
        with (final / "weights.bin").open("r+b") as f:
            f.truncate(100)
    elif damage == "delete":
        (final / "step0" / "config.json").unlink()
    elif damage == "marker":
        (final / MARKER).write_text("{not json")
    elif damage == "same size":
        with (final / "weights.bin").open("r+b") as f:
            f.seek(30_000)
            f.write(b"\xff")
    else:
        (final / "step0" / "stray.json").write_text("{}")
    with pytest.warns(UserWarning, match=f"damaged cache entry {final}") as warned:
        assert build_entry(final, build)
    assert len(warned) == 1  # reported once
    assert len(builds) == 2 and read(final) == content(4) and entry_complete(final)
    assert names(tmp_path) == ["entry", "old", "version"]


@pytest.mark.parametrize("marker", ["none", "sizes"])
def test_an_entry_from_before_checksums_is_kept_then_guarded_then_replaced(tmp_path, marker):
    final = tmp_path / "entry"
    write(final, content(5))  # a plain directory, as the cache wrote entries before versions
    if marker == "sizes":  # the marker before checksums
        sizes = {name: len(data) for name, data in content(5).items()}
        (final / MARKER).write_text(json.dumps({"files": sizes}))
    assert entry_complete(final)
    assert all(len(v) == 2 for v in json.loads((final / MARKER).read_text())["files"].values())  # checksums now
    with (final / "weights.bin").open("r+b") as f:
        f.write(b"\x00")  # same size
    with pytest.warns(UserWarning, match="damaged"):
        assert not entry_complete(final)
    assert not entry_complete(tmp_path / "absent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported once, above
        assert build_entry(final, lambda tmp: write(tmp, content(5, "new")))
    assert final.is_symlink() and read(final) == content(5, "new")


def test_a_byte_changed_after_a_read_is_found_in_the_same_process(tmp_path):
    """Verification is remembered per process, but only while every file keeps its size, time and inode."""
    final = tmp_path / "entry"
    build_entry(final, lambda tmp: write(tmp, content(6)))
    version = current_entry(final)
    assert version is not None and cache.intact(version)
    data = (version / "weights.bin").read_bytes()
    (version / "weights.bin").write_bytes(data[:-1] + b"\x01")
    assert not cache.intact(version)


def test_a_forced_refresh_never_shows_a_reader_a_torn_entry(tmp_path):
    """A reader loop beside a process that replaces the entry again and again: every read is one whole version."""
    final = tmp_path / "entry"
    build_entry(final, lambda tmp: write(tmp, content(7, "v-first")))
    refresher = subprocess.Popen([sys.executable, "-c", REFRESHER, cache.__file__, str(final), "150"])
    reads, seen = 0, set()
    while refresher.poll() is None or reads == 0:
        version = current_entry(final)
        assert version is not None
        files = read(version)
        tag = json.loads(files["step0/config.json"])[1]
        assert files == content(7, tag), "a torn read"
        reads, seen = reads + 1, seen | {tag}
    assert refresher.returncode == 0
    assert content(7, "v0")["weights.bin"] == content(7, "v-first")["weights.bin"]  # the child writes content()
    assert reads > 10 and len(seen) > 2 and read(final) == content(7, "v149")


def test_temporaries_of_killed_writers_and_replaced_versions_are_removed_later(tmp_path, monkeypatch):
    final = tmp_path / "entry"
    build_entry(final, lambda tmp: write(tmp, content(8, "a")))
    old = current_entry(final)
    build_entry(final, lambda tmp: write(tmp, content(8, "b")), refresh=True)
    dead = 2**22 + 12345  # above the kernel's default pid_max: no process has it
    for name, age in (
        (f".tmp-{dead}-old-entry", 3600),
        (f".tmp-{dead}-new-entry", 0),
        (f".tmp-{os.getppid()}-x-entry", 3600),
    ):
        write(tmp_path / name, {"part": b"x"})
        past = time.time() - age
        for p in [tmp_path / name, tmp_path / name / "part"]:
            os.utime(p, (past, past))
    cache.remove_stale(tmp_path)
    kept = {p.name for p in tmp_path.iterdir()}
    assert f".tmp-{dead}-old-entry" not in kept and {f".tmp-{dead}-new-entry", f".tmp-{os.getppid()}-x-entry"} <= kept
    assert old is not None and old.exists()  # replaced a moment ago: a reader may still be reading it
    monkeypatch.setattr(cache, "SUPERSEDED_S", 0.0)
    cache.remove_stale(tmp_path)
    assert not old.exists() and read(final) == content(8, "b")
