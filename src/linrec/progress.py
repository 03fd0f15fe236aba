"""Progress that reads well wherever it goes: a live bar on a terminal or in a notebook, plain lines in a log.

tqdm redraws its bar in place with carriage returns. Written to a file or a CI log, every redraw stays (thousands
of them in one book build), and an estimate made after one slow first step reads as hours ("53:03:48").
:func:`progress_bar` keeps tqdm's bar where one is drawn in place (a terminal, a Jupyter notebook) and elsewhere
writes one line when a stage starts, at most one every :data:`LOG_EVERY` seconds while it advances, one every
:data:`LOG_EVERY` seconds while it waits on a long step (a width-4,096 block's fits take minutes on a CPU), and one
when it ends, each with its count and the time since the stage started, and never an estimate.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
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


class _LogBar(text_bar):
    """tqdm for a log: besides its own lines, the stage's line again after ``mininterval`` seconds without one, so
    that a stage whose steps each take minutes is never silent for longer (tqdm's monitor thread does not: it only
    lowers ``miniters``). The beat holds the bar weakly and stops when it is closed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._closed = threading.Event()
        super().__init__(*args, **kwargs)
        _repeat(self.mininterval, self._closed, functools.partial(_beat, weakref.ref(self)))

    def close(self) -> None:
        self._closed.set()
        super().close()


def _beat(ref: weakref.ref[_LogBar]) -> bool:
    """Write the bar's line again if it wrote none for ``mininterval`` seconds; False once it is gone."""
    bar = ref()
    if bar is None or bar.disable:
        return False
    now = bar._time()  # type: ignore[attr-defined]  # tqdm's own clock, as its lines read it
    if now - bar.last_print_t >= bar.mininterval:
        bar.refresh()
        bar.last_print_t = now
    return True


def _repeat(every: float, stop: threading.Event, action: Callable[[], bool]) -> None:
    """Call ``action`` every ``every`` seconds on a daemon thread until ``stop`` is set or it returns False."""

    def loop() -> None:
        while not stop.wait(every) and action():
            pass

    threading.Thread(target=loop, daemon=True).start()


def in_place() -> bool:
    """Whether a bar redrawn in place is seen as one: stderr is a terminal, or tqdm draws a notebook widget."""
    return sys.stderr.isatty() or chosen_bar is not text_bar  # autonotebook chose tqdm's notebook widget


def progress_bar(iterable: Iterable[_T] | None = None, **options: Any) -> text_bar:
    """A tqdm bar over ``iterable`` (``options`` as tqdm's: ``total``, ``desc``, ``unit``, ``disable``, ...), drawn in
    place where that is seen as one (:func:`in_place`), else written as lines (see the module docstring)."""
    if options.get("disable") or in_place():
        return auto_bar(iterable, **options)
    # miniters=1: every update checks the clock, and tqdm's monitor thread (which refreshes a bar whose miniters it
    # raised, every maxinterval) never prints between two lines; only _LogBar's beat does, while a step runs long
    lines = {"mininterval": LOG_EVERY, "maxinterval": LOG_EVERY, "miniters": 1, "bar_format": LINE, "unit": "it"}
    return _LogBar(iterable, file=_Lines(sys.stderr), **{**lines, **options})


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

    def beat() -> bool:
        print(f"{what}: {time.perf_counter() - start:.0f} s so far", flush=True)
        return True

    _repeat(LOG_EVERY if every is None else every, done, beat)
    try:
        yield
    finally:
        done.set()
