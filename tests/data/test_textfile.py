"""linrec.data.textfile: Text as a stream of newline-aligned chunks, from a string or from a local file read only as far
as needed."""

from __future__ import annotations

import pytest
import torch

from linrec.data.textfile import TextFile, file_stretches
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError


def test_a_text_file_gives_the_tokens_of_its_text(tokenizer, text, tmp_path):
    """The file is cut into the same chunks as the string it holds, so both give the same windows."""
    from linrec.data.textfile import TextFile, text_chunks

    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    for chunk_chars in (2, 97, 5_000, len(text), len(text) + 1):
        assert list(text_chunks(TextFile(path), chunk_chars)) == list(text_chunks(text, chunk_chars))
        assert "".join(text_chunks(text, chunk_chars)) == text
    assert [len(c) for c in text_chunks("ab\ncd\nef", 4)] == [3, 3, 2]  # cut after the last newline of each window
    from_file = make_batches(tokenizer, TextFile(path), seq_len=16, max_rows=2000)
    assert torch.equal(from_file.input_ids, make_batches(tokenizer, text, seq_len=16, max_rows=2000).input_ids)
    import hashlib

    assert TextFile(path).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(LinrecError, match=f"cannot read {path} as UTF-8"):
        make_batches(tokenizer, TextFile(path), seq_len=16, max_rows=64)


def test_a_large_text_file_is_read_only_as_far_as_the_rows_need(tokenizer, text, tmp_path):
    """A ~50 MB file at a 1024-row budget: Python's peak allocation stays far below the file's size."""
    import tracemalloc

    from linrec.data.textfile import TextFile

    path = tmp_path / "large.txt"
    block = text.encode()
    with path.open("wb") as f:
        for _ in range(50_000_000 // len(block) + 1):
            f.write(block)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        batches = make_batches(tokenizer, TextFile(path), seq_len=64, max_rows=1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batches.n_rows == 1024 and size > 50_000_000
    assert peak < size / 8, f"peak {peak / 1e6:.1f} MB reading a {size / 1e6:.0f} MB file"


def test_a_small_file_gives_the_windows_of_its_text_and_a_large_one_is_sampled_from_start_to_end(
    tokenizer, text, tmp_path, monkeypatch
):
    import linrec.data.tokens as tokens

    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    small = make_batches(tokenizer, TextFile(path), seq_len=16, max_rows=320)
    assert torch.equal(small.input_ids, make_batches(tokenizer, text, seq_len=16, max_rows=320).input_ids)

    large = "Zebra quilt opens the file.\n" + text * 20 + "Quartz yak closes the file.\n"
    path.write_text(large, encoding="utf-8")
    monkeypatch.setattr(tokens, "WHOLE_FILE_BYTES", 100_000)  # the file (about 3.6 MB) is large now
    read = []
    monkeypatch.setattr(tokens, "file_stretches", lambda *a: read.append(a[1:]) or file_stretches(*a))
    batches = make_batches(tokenizer, TextFile(path), seq_len=16, max_rows=32 * 16)
    assert batches.input_ids.shape == (32, 16)
    assert read == [(32, 16 * 16)]  # 32 stretches of 256 bytes, a few windows each: 8 kB of the file read
    assert large.startswith(tokenizer.decode(batches.input_ids[0]))  # the first window is the file's start
    assert tokenizer.decode(batches.input_ids[-1]) in large[-256:]  # the last from its last 256 bytes
    assert len(set(map(tuple, batches.input_ids.tolist()))) == 32


def test_file_stretches_hold_whole_lines_from_the_start_to_the_end(tmp_path):
    path = tmp_path / "lines.txt"
    lines = [f"line {i:04d} " + "x" * (i % 13) + "\r\n" for i in range(2000)]
    path.write_bytes("".join(lines).encode())
    stretches = list(file_stretches(TextFile(path), 8, 300))
    assert len(stretches) == 8
    assert stretches[0].startswith("line 0000 ") and stretches[-1].endswith("line 1999 " + "x" * (1999 % 13) + "\n")
    normalised = {line.replace("\r\n", "\n") for line in lines}
    for stretch in stretches:
        assert stretch and stretch.endswith("\n") and set(stretch.splitlines(keepends=True)) <= normalised
    offsets = [int(s[5:9]) for s in stretches]
    assert offsets == sorted(offsets) and len(set(offsets)) == 8
