"""Progress that reads well wherever it goes: a live bar on a terminal or in a notebook, plain lines in a log.

tqdm redraws its bar in place with carriage returns. Written to a file or a CI log, every redraw stays (thousands
of them in one book build), and an estimate made after one slow first step reads as hours ("53:03:48").
:func:`progress_bar` keeps tqdm's bar where one is drawn in place (a terminal, a Jupyter notebook) and elsewhere
writes one line when a stage starts, at most one every :data:`LOG_EVERY` seconds while it advances, and one
when it ends, each with its count and the time since the stage started, and never an estimate.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, TypeVar

from tqdm import tqdm as text_bar
from tqdm.auto import tqdm as auto_bar
from tqdm.autonotebook import tqdm as chosen_bar

LOG_EVERY = 30.0
"""Seconds between two lines of one stage in a log."""

LINE = "{desc}: {n_fmt}/{total_fmt} {unit} after {elapsed}{postfix}"
"""One line of a stage in a log: no bar, no rate, no estimate."""

_T = TypeVar("_T")


class _Lines(io.TextIOBase):
    """A stream for tqdm that turns each redraw into one line, and drops a redraw that repeats the last line."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.last = out, ""

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()
        if line and line != self.last:
            self.out.write(line + "\n")
            self.out.flush()
            self.last = line
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def in_place() -> bool:
    """Whether a bar redrawn in place is seen as one: stderr is a terminal, or tqdm draws a notebook widget."""
    return sys.stderr.isatty() or chosen_bar is not text_bar  # autonotebook chose tqdm's notebook widget


def progress_bar(iterable: Iterable[_T] | None = None, **options: Any) -> text_bar:
    """A tqdm bar over ``iterable`` (``options`` as tqdm's: ``total``, ``desc``, ``unit``, ``disable``, ...), drawn in
    place where that is seen as one (:func:`in_place`), else written as lines (see the module docstring)."""
    if options.get("disable") or in_place():
        return auto_bar(iterable, **options)
    # miniters=1: every update checks the clock, and tqdm's monitor thread (which refreshes a bar whose miniters it
    # raised, every maxinterval) never prints between two lines
    lines = {"mininterval": LOG_EVERY, "maxinterval": LOG_EVERY, "miniters": 1, "bar_format": LINE, "unit": "it"}
    return text_bar(iterable, file=_Lines(sys.stderr), **{**lines, **options})


@contextlib.contextmanager
def no_library_bars() -> Iterator[None]:
    """transformers' own progress bars (loading or saving weights) hidden inside the block, and as they were after."""
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()


@contextlib.contextmanager
def heartbeat(what: str, every: float | None = None) -> Iterator[None]:
    """While the block runs, print "``what``: N s so far" every ``every`` seconds (default :data:`LOG_EVERY`): a
    log line for a stage that reports no progress of its own, so that a log is never silent for minutes."""
    start, done = time.perf_counter(), threading.Event()
    wait = LOG_EVERY if every is None else every

    def beat() -> None:
        while not done.wait(wait):
            print(f"{what}: {time.perf_counter() - start:.0f} s so far", flush=True)

    threading.Thread(target=beat, daemon=True).start()
    try:
        yield
    finally:
        done.set()
