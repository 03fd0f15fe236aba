"""linrec.digests: Digests of files outside the cache (local model weights, text files), hashed once and remembered."""

from __future__ import annotations

import os

from linrec import digests
from linrec.digests import file_sha256


def test_a_file_digest_is_computed_once_and_again_when_the_file_is_replaced(tmp_path, monkeypatch):
    import hashlib

    hashed = []
    real = digests.hash_file
    monkeypatch.setattr(digests, "hash_file", lambda path: hashed.append(path) or real(path))
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(digests, "_DIGESTS", {})
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 1000)
    assert file_sha256(weights) == hashlib.sha256(b"a" * 1000).hexdigest()
    monkeypatch.setattr(digests, "_DIGESTS", {})  # a new process: the index in the cache remembers it
    assert file_sha256(weights) == hashlib.sha256(b"a" * 1000).hexdigest() and len(hashed) == 1
    replacement = tmp_path / "new.safetensors"
    replacement.write_bytes(b"b" * 1000)  # the same size, then renamed over it (a new inode)
    os.replace(replacement, weights)
    assert file_sha256(weights) == hashlib.sha256(b"b" * 1000).hexdigest() and len(hashed) == 2
