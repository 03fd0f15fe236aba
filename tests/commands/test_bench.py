"""linrec.commands.bench: ``linrec bench``: time capture + moments against the bare forward; the timing itself is
:mod:`linrec.core.cost`."""

from __future__ import annotations

import pytest

from linrec.cli import main
from support.cli import _fails


def test_bench_checks_its_arguments_before_timing(tmp_path, capsys, monkeypatch):
    import linrec.core.cost

    monkeypatch.setattr(linrec.core.cost, "run_bench", lambda *a, **k: (_ for _ in ()).throw(AssertionError("timed")))
    (tmp_path / "t.csv").mkdir()
    _fails(["bench", "--out", str(tmp_path / "t.csv")], capsys, "is a directory")
    with pytest.raises(SystemExit):
        main(["bench", "--peak-tokens", "20000,-5"])
    assert "expected a positive integer; got '-5'" in capsys.readouterr().err


def test_bench_sequence_longer_than_the_context_is_refused_before_timing(capsys, monkeypatch):
    import linrec.core.cost

    monkeypatch.setattr(
        linrec.core.cost, "shaped_model", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built"))
    )
    _fails(["bench", "--seq-len", "5000"], capsys, "seq_len 5000 exceeds the context of 1024")
