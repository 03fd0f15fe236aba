"""Text as a stream of newline-aligned chunks, from a string or from a local file read only as far as needed.

A measurement needs the first few thousand windows of a text, not all of it: :func:`text_chunks` cuts
a string or a :class:`TextFile` into the same chunks (so both give the same tokens), and a file is
read chunk by chunk as the tokenizer asks for more, so a gigabyte file at a small row budget costs a
few megabytes of memory. A file's :attr:`TextFile.sha256` is the sha256 of all its bytes (what
``sha256sum`` prints), hashed in 1 MiB reads once and remembered in the cache's digest index
(:func:`linrec.cache.file_sha256`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from linrec.cache import file_sha256
from linrec.errors import LinrecError


@dataclass(frozen=True)
class TextFile:
    """A local UTF-8 text file, read lazily (universal newlines, as ``Path.read_text`` reads it)."""

    path: Path

    @property
    def sha256(self) -> str:
        """The sha256 of the file's bytes."""
        try:
            return file_sha256(self.path)
        except OSError as err:
            raise LinrecError(f"cannot read the text file {self.path}: {err}") from err

    def blank(self) -> bool:
        """Whether the file holds nothing but whitespace (read only up to its first other character)."""
        return not any(chunk.strip() for chunk in text_chunks(self))


def _cut(read: Callable[[int], str], chunk_chars: int) -> Iterator[str]:
    """Chunks of ``chunk_chars`` characters from ``read``, each but the last ending after its last newline (one
    with no newline is cut where it is)."""
    carry = ""
    while True:
        window = carry + read(chunk_chars - len(carry))
        if not window:
            return
        more = read(1)
        if not more:  # the end of the text: the last chunk is whole
            yield window
            return
        cut = window.rfind("\n")
        end = cut + 1 if cut > 0 else len(window)
        yield window[:end]
        carry = window[end:] + more


def text_chunks(text: str | TextFile, chunk_chars: int = 200_000) -> Generator[str, None, None]:
    """Newline-aligned chunks of ``text`` (see :func:`_cut`), a file read only as far as they are asked for."""
    if chunk_chars < 2:
        raise LinrecError(f"chunk_chars must be at least 2; got {chunk_chars}")
    if isinstance(text, str):
        yield from _cut(io.StringIO(text).read, chunk_chars)
        return
    try:
        with text.path.open(encoding="utf-8") as handle:
            yield from _cut(handle.read, chunk_chars)
    except (OSError, UnicodeDecodeError) as err:
        raise LinrecError(f"cannot read {text.path} as UTF-8 text: {err}") from err
