"""Progress in a log: lines, not redraws; no estimate; a bar where one is drawn in place, and redrawn while a step runs
long; a stage without a counter named and beating; and the commands' progress as a log shows it: every stage named,
every total known, no count past it."""

from __future__ import annotations

import io
import itertools
import re
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


def test_in_a_log_a_bar_nested_under_another_writes_plain_lines_without_cursor_moves(monkeypatch):
    """As ``linrec replace --tasks`` nests its task requests under its swaps: no ``ESC [ A`` (a log's ``[A``)."""
    log = _Log()
    monkeypatch.setattr(sys, "stderr", log)
    outer = progress.progress_bar(total=2, desc="swap", unit="block")
    for _ in range(2):
        for _ in progress.progress_bar(range(3), desc="task requests", unit="request"):
            pass
        outer.update(1)
    outer.close()
    assert "\x1b" not in log.getvalue() and "[A" not in log.getvalue()
    lines = log.getvalue().splitlines()
    assert "swap: 2/2 block" in " ".join(lines) and sum(line.startswith("task requests: 3/3") for line in lines) == 2


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


def test_a_bar_drawn_in_place_is_redrawn_while_a_step_runs_long_and_stops_when_closed(monkeypatch):
    import time

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    bar = progress.progress_bar(total=2, desc="fit", unit="block")
    time.sleep(0.4)  # one block's fits: no update for eight intervals, yet its clock is drawn again
    assert terminal.getvalue().count("\r") >= 4
    bar.update(2)
    bar.close()
    closed = terminal.getvalue()
    time.sleep(0.3)
    assert terminal.getvalue() == closed and "2/2" in closed


@pytest.mark.parametrize("stream", [_Log, _Terminal])
def test_an_iterated_bar_whose_steps_outlast_its_beat_never_counts_past_its_total(monkeypatch, stream):
    """tqdm's own loop, its clock reset by the beat, pushed the same items twice: "fit: 10/? block" of 6."""
    import time

    err = stream()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    for _ in progress.progress_bar(range(6), desc="fit", unit="block"):
        time.sleep(0.13)  # each block's fits longer than a beat
    drawn = [part.strip() for part in re.split(r"[\r\n]", err.getvalue()) if part.strip()]
    counts = [int(m[1]) for m in map(re.compile(r"fit: +(?:\d+%\|[^|]*\| )?(\d+)/6\b").match, drawn) if m]
    assert len(counts) == len(drawn) >= 7  # every line against its total ("/6"), none with "?"
    assert counts == sorted(counts) and counts[-1] == 6  # never back, never past 6


def test_a_stage_without_a_counter_is_named_on_stderr_as_it_starts_then_beats_there(monkeypatch, capsys):
    import time

    monkeypatch.setattr(progress, "LOG_EVERY", 0.05)
    with progress.stage("timing greedy decoding"):
        time.sleep(0.3)
    time.sleep(0.2)
    out, err = capsys.readouterr()
    first, *beats = err.splitlines()
    assert out == "" and first == "timing greedy decoding..."
    assert len(beats) >= 3 and all(re.fullmatch(r"timing greedy decoding: \d+ s so far", line) for line in beats)
    with progress.stage("timing greedy decoding", show=False):
        time.sleep(0.2)
    assert capsys.readouterr() == ("", "")


def test_a_busy_machine_draws_the_hint_to_run_one_thread(monkeypatch):
    import torch

    import linrec.threads

    monkeypatch.setattr(linrec.threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(progress.os, "getloadavg", lambda: (5.2, 1.0, 1.0))
    hint = progress.busy_hint()
    assert hint is not None and "load 5.2 on 2 usable cores" in hint and "LINREC_THREADS=1" in hint
    monkeypatch.setattr(progress.os, "getloadavg", lambda: (1.9, 1.0, 1.0))
    assert progress.busy_hint() is None  # no more work than cores
    monkeypatch.setattr(progress.os, "getloadavg", lambda: (5.2, 1.0, 1.0))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert progress.busy_hint() is None  # one thread already


def test_a_duration_reads_in_the_unit_a_reader_takes_it_in():
    assert [progress.duration(s) for s in (0.2, 40, 89, 192, 5400, 9000)] == [
        "1 s", "40 s", "89 s", "3.2 min", "1.5 h", "2.5 h"
    ]  # fmt: skip


COUNTER = re.compile(r"(?P<stage>[^:]+): (?P<n>\d+)/(?P<total>\S+) (?P<unit>\S+) after \S+")
"""A counter's line in a log (:data:`linrec.progress.LINE`)."""


def counters(err: str) -> list[tuple[str, int, str]]:
    """(stage, count, total as written) of every counter's line in ``err``, in order."""
    return [(m["stage"], int(m["n"]), m["total"]) for m in map(COUNTER.fullmatch, err.splitlines()) if m]


def assert_truthful(seen: list[tuple[str, int, str]]) -> None:
    """Every total known, no count past it, and every bar ended at its total (a bar's lines run from 0)."""
    assert seen and all(total.isdigit() and n <= int(total) for _, n, total in seen), seen
    ends = [previous for previous, line in zip(seen, seen[1:]) if line[1] == 0] + [seen[-1]]
    assert all(n == int(total) for _, n, total in ends), seen


def test_measure_in_a_log_names_each_group_and_stage_with_known_totals_and_an_estimate_first(
    model_dirs, text_file, capsys
):
    """A capture in two groups with the residual-stream scores: the plan and its estimate, then each group's capture,
    layer linearity and fits, every counter within a known total."""
    import torch
    from transformers import AutoConfig

    from linrec.cli import main
    from linrec.core.plan import config_weights_bytes, footprint

    config = AutoConfig.from_pretrained(model_dirs["llama"])
    weights = (config_weights_bytes(config, torch.float32), 0)
    fp = footprint(config, blocks=2, folds=12, windows=48, seq_len=16, batch_size=8, dtype=torch.float32,
                   on_gpu=False, weights=weights, extras=frozenset({"scores"}))  # fmt: skip
    argv = ["measure", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--folds", "12"]
    argv += ["--seq-len", "16", "--max-rows", "768", "--extras", "scores", "--memory", str(fp.host(1, 2))]
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("Loading weights")]
    assert lines[0].startswith("plan: 2 groups of 1 block (0, 1)")
    assert re.match(r"estimate: about .+ \(capture .+, layer linearity .+, fits .+\)", lines[2])
    assert "group 1 of 2: block 0" in lines and "group 2 of 2: block 1" in lines
    seen = counters("\n".join(lines))
    assert_truthful(seen)
    starts = [stage for stage, n, _ in seen if n == 0]
    assert starts == ["capture", "layer linearity", "fit"] * 2
    group_two = lines.index("group 2 of 2: block 1")
    assert [s for s, n, _ in counters("\n".join(lines[:group_two])) if n == 0] == starts[:3]  # group 1's own bars


def test_replace_in_a_log_counts_every_pass_within_a_known_total(model_dirs, text_file, tmp_path, capsys):
    """The perplexity bar counted a generator (its total read "?"); every counter of replace now knows its total, and
    the capture and fits are estimated with the passes."""
    from linrec.cli import main

    argv = ["replace", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), "--blocks", "1,0"]
    argv += ["--max-rows", "384", "--seq-len", "16", "--folds", "3", "--eval-rows", "256", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    seen = counters(err)
    assert_truthful(seen)
    assert {stage for stage, _, _ in seen} == {"capture", "fit", "maps", "perplexity", "joint ΔPPL"}
    assert re.search(r"^replace: estimate of the capture and the fits: about .+ \(capture .+, fits .+\)", err, re.M)
    assert "\ntiming greedy decoding, with the chosen maps and without...\n" in err


def test_the_layer_linearity_shows_as_its_capture_does(tokenizer, text, capsys):
    """The layer-linearity fits, handed no progress flag, follow the capture's: a bar with it, silence without."""
    from conftest import tiny_model
    from linrec.core.measure import Measurement
    from linrec.data.tokens import make_batches

    model, batches = tiny_model("llama"), make_batches(tokenizer, text, seq_len=16, max_rows=384)
    Measurement.capture(model, batches, folds=3, extras="scores", progress=False)
    assert capsys.readouterr().err == ""
    Measurement.capture(model, batches, folds=3, extras="scores", progress=True)
    seen = counters(capsys.readouterr().err)
    assert_truthful(seen)
    assert [stage for stage, n, _ in seen if n == 0] == ["capture", "layer linearity"]
