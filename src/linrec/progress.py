"""Progress that reads well wherever it goes: a live bar on a terminal or in a notebook, plain lines in a log.

tqdm redraws its bar in place with carriage returns. Written to a file or a CI log, every redraw stays (thousands
of them in one book build), and an estimate made after one slow first step reads as hours ("53:03:48").
:func:`progress_bar` keeps tqdm's bar where one is drawn in place (a terminal, a Jupyter notebook) and elsewhere
writes one line when a stage starts, at most one every :data:`LOG_EVERY` seconds while it advances, one every
:data:`LOG_EVERY` seconds while it waits on a long step (a width-4,096 block's fits take minutes on a CPU), and one
when it ends, each with its count and the time since the stage started, and never an estimate. A bar drawn in place
is redrawn as often while a step runs long, so that its clock moves. A stage with no counter of its own is named as
it starts and then beats (:func:`stage`, :func:`heartbeat`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO, TypeVar

from tqdm import TqdmWarning
from tqdm import tqdm as text_bar

with warnings.catch_warnings():  # a kernel without ipywidgets: tqdm takes its text bar, as this module wants, and warns
    warnings.filterwarnings("ignore", "IProgress not found", TqdmWarning)
    from tqdm.auto import tqdm as auto_bar
    from tqdm.autonotebook import tqdm as chosen_bar

LOG_EVERY = 30.0
"""Seconds between two lines of one stage in a log."""

LINE = "{desc}: {n_fmt}/{total_fmt} {unit} after {elapsed}{postfix}"
"""One line of a stage in a log: no bar, no rate, no estimate."""

_T = TypeVar("_T")


_CURSOR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
"""A terminal's control sequence: tqdm moves the cursor up (``ESC [ A``) to redraw a bar nested under another."""


class _Lines(io.TextIOBase):
    """A stream for tqdm that turns each redraw into one line, and drops a redraw that repeats the last line (and the
    cursor moves of a nested bar, which a log would show as ``[A``)."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.last = out, ""

    def write(self, text: str) -> int:
        line = _CURSOR.sub("", text).replace("\r", "").strip()
        if line and line != self.last:
            self.out.write(line + "\n")
            self.out.flush()
            self.last = line
        return len(text)

    def flush(self) -> None:
        self.out.flush()


class _Beating:
    """A tqdm bar that draws its line again after ``LOG_EVERY`` seconds without one, so that a stage whose steps each
    take minutes is never silent for longer (tqdm's monitor thread does not: it only lowers ``miniters``). The beat
    holds the bar weakly and stops when it is closed.

    Iterated, it counts each item with :meth:`update` as the item is done: tqdm's own loop keeps the count in a
    variable of its own, pushed to the bar only when a line is due by its own clock, so a beat's line showed an old
    count, and, its clock reset by the beat, the loop pushed the same items twice: counts past the total, which tqdm
    then writes as "?" (``fit: 278/? block`` of 30 blocks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._closed = threading.Event()
        super().__init__(*args, **kwargs)
        _repeat(LOG_EVERY, self._closed, functools.partial(_beat, weakref.ref(self)))

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.iterable:  # type: ignore[attr-defined]  # (tqdm's, the next class of the bar)
                yield item
                self.update(1)  # type: ignore[attr-defined]
        finally:
            self.close()

    def close(self) -> None:
        self._closed.set()
        super().close()  # type: ignore[misc]  # tqdm's, the next class of the bar


class _LogBar(_Beating, text_bar):
    """tqdm for a log: one line per redraw (:class:`_Lines`), and the beat of :class:`_Beating`."""


class _LiveBar(_Beating, auto_bar):
    """tqdm's bar drawn in place (a terminal, a notebook), with the beat of :class:`_Beating`: its clock moves."""


def _beat(ref: weakref.ref[Any]) -> bool:
    """Draw the bar's line again if it drew none for ``LOG_EVERY`` seconds; False once it is gone."""
    bar = ref()
    if bar is None or bar.disable:
        return False
    now = bar._time()  # tqdm's own clock, as its lines read it
    if now - bar.last_print_t >= LOG_EVERY:
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
    if options.get("disable"):
        return auto_bar(iterable, **options)
    if in_place():
        return _LiveBar(iterable, **options)
    # miniters=1: every update checks the clock, and tqdm's monitor thread (which refreshes a bar whose miniters it
    # raised, every maxinterval) never prints between two lines; only the beat does, while a step runs long
    lines = {"mininterval": LOG_EVERY, "maxinterval": LOG_EVERY, "miniters": 1, "bar_format": LINE, "unit": "it"}
    return _LogBar(iterable, file=_Lines(sys.stderr), **{**lines, **options})


def duration(seconds: float) -> str:
    """``seconds`` as a reader takes them in after "about": 1 s (for any less too), 40 s, 3.2 min, 1.5 h."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def busy_hint() -> str | None:
    """A hint where the machine is busy (its load average over the last minute above the cores this process may use)
    and torch runs more than one thread: shared cores make torch's threads wait on one another (see
    :mod:`linrec.threads`), so an estimate made now may be low and ``LINREC_THREADS=1`` often runs faster. None
    otherwise."""
    import torch

    from linrec.threads import usable_cores

    load, cores = os.getloadavg()[0], usable_cores()
    if load <= cores or torch.get_num_threads() == 1:
        return None
    return (
        f"the machine is busy (load {load:.1f} on {cores} usable core{'s' * (cores > 1)}): the work may take longer "
        "than estimated; LINREC_THREADS=1 (one torch thread) often runs faster on shared cores"
    )


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
def heartbeat(what: str, every: float | None = None, out: TextIO | None = None) -> Iterator[None]:
    """While the block runs, print "``what``: N s so far" every ``every`` seconds (default :data:`LOG_EVERY`) to
    ``out`` (stdout by default, where the book's build prints; :func:`stage` writes to stderr): a log line for a stage
    that reports no progress of its own, so that a log is never silent for minutes."""
    start, done = time.perf_counter(), threading.Event()

    def beat() -> bool:
        print(f"{what}: {time.perf_counter() - start:.0f} s so far", file=out, flush=True)
        return True

    _repeat(LOG_EVERY if every is None else every, done, beat)
    try:
        yield
    finally:
        done.set()


@contextlib.contextmanager
def stage(what: str, show: bool = True) -> Iterator[None]:
    """A stage with no counter of its own (``show``: reported at all): named on stderr as it starts ("``what``..."),
    beside the bars, then :func:`heartbeat` lines there while it runs."""
    if not show:
        yield
        return
    print(f"{what}...", file=sys.stderr, flush=True)
    with heartbeat(what, out=sys.stderr):
        yield
