"""The cache under concurrency: entries are absent or complete for every reader, the first writer wins,
a forced refresh replaces, one process builds a key while the others wait, damage is found and repaired."""

import functools
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

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


def test_concurrent_writers_and_readers_of_the_same_keys(tmp_path):
    start_at = time.time() + 5  # past the start-up of every process, so that they collide
    with ProcessPoolExecutor(6, mp_context=multiprocessing.get_context("spawn")) as pool:
        writers = [pool.submit(_writer, str(tmp_path), start_at) for _ in range(4)]
        readers = [pool.submit(_reader, str(tmp_path), start_at) for _ in range(2)]
        for w in writers:
            w.result()  # no ENOTEMPTY, no FileNotFoundError
        assert all(r.result() > 0 for r in readers)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"k{k}" for k in range(KEYS))  # no temporaries left
    assert all(read(tmp_path / f"k{k}") == content(k) for k in range(KEYS))


def test_second_writer_discards_its_copy_and_refresh_replaces(tmp_path):
    final = tmp_path / "entry"
    with atomic_dir(final) as tmp:
        write(tmp, content(1, "first"))
    inode = final.stat().st_ino
    with atomic_dir(final) as tmp:
        write(tmp, content(1, "second"))
    assert read(final) == content(1, "first") and final.stat().st_ino == inode
    with atomic_dir(final, replace=True) as tmp:
        write(tmp, content(1, "refreshed"))
    assert read(final) == content(1, "refreshed") and entry_complete(final)
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_an_interrupted_write_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(tmp_path / "entry") as tmp:
            write(tmp, content(2))
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def _slow_build(log: Path, tmp: Path) -> None:
    with log.open("a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(1.0)
    write(tmp, content(3))


def _build(root: str, start_at: float) -> bool:
    _wait(start_at)
    return build_entry(Path(root) / "entry", functools.partial(_slow_build, Path(root) / "builds.log"))


def test_one_process_builds_a_key_while_the_other_waits(tmp_path):
    start_at = time.time() + 5
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        built = sorted(f.result() for f in [pool.submit(_build, str(tmp_path), start_at) for _ in range(2)])
    assert built == [False, True]
    assert len((tmp_path / "builds.log").read_text().splitlines()) == 1
    assert read(tmp_path / "entry") == content(3)


@pytest.mark.parametrize("damage", ["truncate", "delete", "marker"])
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
    else:
        (final / MARKER).write_text("{not json")
    with pytest.warns(UserWarning, match=f"damaged cache entry {final}"):
        assert build_entry(final, build)
    assert len(builds) == 2 and read(final) == content(4) and entry_complete(final)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == ["entry"]


def test_an_entry_from_before_markers_is_kept_and_then_guarded(tmp_path):
    final = tmp_path / "entry"
    write(final, content(5))  # as the cache wrote entries before it had markers
    assert entry_complete(final) and (final / MARKER).exists()
    (final / "weights.bin").write_bytes(b"short")
    with pytest.warns(UserWarning, match="damaged"):
        assert not entry_complete(final)
    assert not entry_complete(tmp_path / "absent")


def test_a_damaged_measurement_is_captured_again(tmp_path, monkeypatch):
    """measurement() with the capture replaced by a known result: it is stored, loaded, and recaptured when damaged."""
    import torch

    from conftest import measurement_info
    from linrec.core.sample import Rows
    from linrec.data.corpus import Corpus
    from linrec.experiment import measurement as m
    from linrec.experiment.profiles import get_profile

    g = torch.Generator().manual_seed(0)
    rows = Rows(torch.randn(200, 4, generator=g), torch.randn(200, 4, generator=g), torch.arange(200) % 5)
    known = m.Measurement(measurement_info("zoo-gpt2", corpus="toy"), {0: rows.fold_moments(5)}, {0: rows})
    captures = []
    smoke = get_profile("smoke")

    def capture(*args) -> m.Measurement:
        captures.append(1)
        return known

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    monkeypatch.setattr(m, "_capture", capture)
    monkeypatch.setattr(
        m, "profile_corpus", lambda profile, name: Corpus("toy", "prose", "fit text", "eval text", "test")
    )
    monkeypatch.setattr(m, "zoo_model_path", lambda zoo, model, checkpoint: tmp_path / "weights")

    def same(result: m.Measurement) -> bool:
        return (
            result.info == known.info
            and torch.equal(result.samples[0].x, rows.x)
            and result.table().equals(known.table())
        )

    assert same(m.measurement(smoke, "zoo-gpt2")) and same(m.measurement(smoke, "zoo-gpt2")) and len(captures) == 1
    (entry,) = (tmp_path / "measurements").glob("smoke-zoo-gpt2-*")
    with (entry / "moments.safetensors").open("r+b") as f:
        f.truncate(64)
    with pytest.warns(UserWarning, match=str(entry)):
        assert same(m.measurement(smoke, "zoo-gpt2"))
    (entry / "info.json").unlink()
    with pytest.warns(UserWarning, match=str(entry)):
        assert same(m.measurement(smoke, "zoo-gpt2"))
    assert same(m.measurement(smoke, "zoo-gpt2", refresh=True))
    assert len(captures) == 4 and same(m.measurement(smoke, "zoo-gpt2")) and len(captures) == 4
