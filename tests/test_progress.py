"""Progress in a log: lines, not redraws; no estimate; a bar where one is drawn in place."""

from __future__ import annotations

import io
import itertools
import sys

import pytest

from linrec import progress


class _Log(io.StringIO):
    def isatty(self) -> bool:
        return False


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_log_a_stage_is_a_few_plain_lines_with_elapsed_time_and_no_estimate(monkeypatch):
    log = _Log()
    monkeypatch.setattr(sys, "stderr", log)
    clock = itertools.count(0, 7)  # each reading of tqdm's clock 7 s later: 3,000 updates over hours
    bar = progress.progress_bar(total=3000, desc="capture", unit="tok")
    bar._time = lambda: float(next(clock))
    for _ in range(3000):
        bar.update(1)
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and lines[0].startswith("capture: 0/3000 tok after")
    assert lines[-1].startswith("capture: 3000/3000 tok after")
    assert len(lines) < 3000 // (progress.LOG_EVERY / 7) + 3  # at most one line per LOG_EVERY seconds
    assert not any("<" in line or "it/s" in line or "tok/s" in line for line in lines)  # no estimate, no rate


def test_a_repeated_line_is_written_once():
    out = _Log()
    lines = progress._Lines(out)
    for text in ("\rstage: 1/2", "\rstage: 1/2", "\n", "\rstage: 2/2"):
        lines.write(text)
    assert out.getvalue() == "stage: 1/2\nstage: 2/2\n"


@pytest.mark.parametrize("stream", [_Terminal, _Log])
def test_a_terminal_gets_tqdms_own_bar_and_disable_silences_both(monkeypatch, stream):
    err = stream()
    monkeypatch.setattr(sys, "stderr", err)
    bar = progress.progress_bar(range(3), desc="perplexity", disable=True)
    list(bar)
    assert err.getvalue() == ""
    bar = progress.progress_bar(range(3), desc="perplexity")
    list(bar)
    bar.close()
    assert ("\r" in err.getvalue()) == (stream is _Terminal)


def test_a_heartbeat_writes_a_line_while_the_block_runs_and_none_after(capsys):
    import time

    from linrec.progress import heartbeat

    with heartbeat("[book] measuring x", every=0.05):
        time.sleep(0.3)
    time.sleep(0.2)
    lines = capsys.readouterr().out.splitlines()
    assert 3 <= len(lines) <= 7 and all(
        line.startswith("[book] measuring x: ") and line.endswith(" s so far") for line in lines
    )
    time.sleep(0.2)
    assert capsys.readouterr().out == ""  # stopped with the block


def test_in_a_log_a_stage_waiting_on_a_long_step_writes_its_line_again_and_stops_when_closed(monkeypatch):
    import time

    log = _Log()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    bar = progress.progress_bar(total=2, desc="fit", unit="block")
    clock = itertools.count(10, 10)  # each reading of its clock 10 s later, so that each line says a new time
    bar._time, bar.start_t, bar.last_print_t = lambda: float(next(clock)), 0.0, 0.0
    time.sleep(0.4)  # one block's fits: no update for eight intervals
    waiting = log.getvalue().splitlines()
    assert len(waiting) >= 4 and all(line.startswith("fit: 0/2 block after ") for line in waiting)
    assert len(set(waiting)) == len(waiting)  # each with its own elapsed time
    bar.update(2)
    bar.close()
    closed = log.getvalue()
    time.sleep(0.3)
    assert log.getvalue() == closed and closed.splitlines()[-1].startswith("fit: 2/2 block after")
