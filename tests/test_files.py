"""A directory written whole or not at all (linrec replace --out, Measurement.save)."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from linrec.errors import LinrecError
from linrec.files import new_directory


def test_a_new_directory_appears_whole_with_ordinary_permissions(tmp_path):
    out = tmp_path / "out"
    with new_directory(out) as tmp:
        (tmp / "a.txt").write_text("a")
        (tmp / "private.bin").touch(mode=0o600)  # as safetensors writes its files
        assert not out.exists() and tmp.parent == tmp_path  # filled beside it, renamed at the end
    assert (out / "a.txt").read_text() == "a" and os.listdir(tmp_path) == ["out"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((out / "private.bin").stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("stop", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_an_error_or_interrupt_leaves_nothing_half_written(tmp_path, stop):
    out = tmp_path / "out"
    with pytest.raises(type(stop)):
        with new_directory(out) as tmp:
            (tmp / "a.txt").write_text("a")
            raise stop
    assert os.listdir(tmp_path) == []


def test_an_existing_directory_is_replaced_only_when_forced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with new_directory(out) as tmp:  # an empty one is no loss
        (tmp / "new.txt").write_text("1")
    with pytest.raises(LinrecError, match="--out .* exists and is not empty; give a new directory, or add --force"):
        with new_directory(out):
            pytest.fail("the block ran")
    with new_directory(out, force=True) as tmp:
        (tmp / "newer.txt").write_text("2")
    assert os.listdir(out) == ["newer.txt"] and os.listdir(tmp_path) == ["out"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(LinrecError, match="is a file; give a directory"):
        with new_directory(tmp_path / "file", force=True):
            pass


def test_the_temporary_of_a_killed_writer_is_removed(tmp_path):
    gone = subprocess.Popen(["true"])  # a process that has ended: its id names no live writer
    gone.wait()
    stale = tmp_path / f".out.{gone.pid}.abcd1234.tmp"
    stale.mkdir()
    (stale / "half.bin").write_bytes(b"\0")
    with new_directory(tmp_path / "out"):
        pass
    assert os.listdir(tmp_path) == ["out"]
