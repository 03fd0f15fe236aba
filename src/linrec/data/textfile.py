"""Text as a stream of newline-aligned chunks, from a string or from a local file read only as far as needed.

A measurement needs a few thousand windows of a text, not all of it: :func:`text_chunks` cuts
a string or a :class:`TextFile` into the same chunks (so both give the same tokens), and a file is
read chunk by chunk as the tokenizer asks for more, so a gigabyte file at a small row budget costs a
few megabytes of memory. Windows spread over a whole file (``layout="spread"`` of
:func:`linrec.data.tokens.make_batches`) read a file of up to :data:`WHOLE_FILE_BYTES` whole, and
sample a larger one: :func:`file_stretches` reads evenly spaced stretches of whole lines, the first at
the file's start and the last at its end, each a few windows long, so the cost is that of the windows
asked for, whatever the file's size.
A file's :attr:`TextFile.sha256` is the sha256 of all its bytes (what ``sha256sum`` prints), hashed in
1 MiB reads once and remembered in the cache's digest index (:func:`linrec.digests.file_sha256`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from linrec.digests import file_sha256
from linrec.errors import LinrecError

WHOLE_FILE_BYTES = 16 * 2**20
"""The largest file read whole for windows spread over it (about 4M tokens of English, seconds to tokenise)."""


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

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        try:
            return self.path.stat().st_size
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


def file_stretches(text: TextFile, count: int, length: int) -> Iterator[str]:
    """``count`` stretches of whole lines within ``length`` bytes each, from evenly spaced byte offsets of the file
    (the first at its start, the last at its end), each decoded as :meth:`Path.read_text` would (universal
    newlines). A stretch drops the partial lines at its two ends, so it may hold nothing where lines are long."""
    if count < 2 or length < 1:
        raise LinrecError(f"need at least 2 stretches of at least a byte; got {count} of {length} bytes")
    size = text.size
    try:
        with text.path.open("rb") as handle:
            for j in range(count):
                offset = j * max(size - length, 0) // (count - 1)
                handle.seek(offset)
                data = handle.read(length)
                if offset > 0:  # the first line may be a partial one
                    data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
                if offset + length < size:  # and so may the last
                    data = data[: data.rfind(b"\n") + 1]
                yield data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as err:
        raise LinrecError(f"cannot read {text.path} as UTF-8 text: {err}") from err
