"""Digests of files outside the cache (local model weights, text files), hashed once and remembered.

:func:`file_sha256` keeps each digest in this process and in a small index in the cache
(``digests.json``), by path, size, modification time and inode, so a second run does not read a large
unchanged file again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from filelock import FileLock

from linrec.cache import cache_dir, file_signature, hash_file
from linrec.errors import LinrecError
from linrec.files import remove_stale_temporaries, write_atomically

_DIGESTS: dict[str, tuple[list[int], str]] = {}
"""This process's copy of the digest index (path -> (signature, sha256))."""


def _index() -> Path:
    return cache_dir() / "digests.json"


def file_sha256(path: Path) -> str:
    """The sha256 of the file at ``path``, hashed once and remembered by path, size, modification time and inode.

    The digest is kept in this process and in an index in the cache (``digests.json``), so a second run does
    not read a large unchanged file again; a file replaced in place (another size, time or inode) is hashed again.
    """
    path = Path(path).expanduser().resolve()
    signature = file_signature(path.stat())
    key = str(path)
    known = _DIGESTS.get(key)
    if known is None or known[0] != signature:
        stored = _read_index().get(key)
        if stored is not None:
            _DIGESTS[key] = (stored[0], stored[1])
            known = _DIGESTS[key]
    if known is not None and known[0] == signature:
        return known[1]
    digest = hash_file(path)
    if file_signature(path.stat()) == signature:  # not changed while it was read
        _DIGESTS[key] = (signature, digest)
        _remember(key, signature, digest)
    return digest


def _read_index() -> dict[str, list]:
    try:
        index = json.loads(_index().read_text())
    except (OSError, ValueError):
        return {}
    return index if isinstance(index, dict) else {}


def _remember(key: str, signature: list[int], digest: str) -> None:
    """Add one digest to the index, dropping files that are gone (best effort: an index that cannot be written only
    costs a hash next time)."""
    index = _index()
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(index)  # an index half written by a killed process
        with FileLock(index.parent / ".digests.json.lock"):
            known = {path: entry for path, entry in _read_index().items() if os.path.exists(path)}  # drop the gone
            known[key] = [signature, digest]
            write_atomically(index, lambda f: f.write(json.dumps(known)))
    except (OSError, LinrecError):
        pass
