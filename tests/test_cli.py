"""linrec.cli: The ``linrec`` command: ``profile`` measures a model, ``plot`` draws its table, ``replace`` replaces its
blocks, ``zoo`` builds the offline models, ``bench`` times the core."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from linrec.cli import main

INTERRUPTED = """
import sys, time
import linrec.core.cost
from linrec.cli import main
linrec.core.cost.run_bench = lambda *a, **k: (print("started", flush=True), time.sleep(60))
sys.exit(main(["bench"]))
"""


def test_version_and_plain_help(capsys):
    import linrec

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"linrec {linrec.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", linrec.__version__)
    for argv in (["--help"], ["measure", "--help"], ["bench", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert "``" not in out and "(default: None)" not in out
    with pytest.raises(SystemExit):
        main(["measure", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for expected in (
        "one of: paper, offline, smoke",
        "stdlib-prose, stdlib-code",
        "wikitext-2",
        "one of: float32, fp32, bfloat16",
        "sequences per forward pass (default: the profile's, else 8)",
        "(default: 0)",
    ):
        assert expected in help_text, expected


def test_top_level_help_imports_no_command_and_no_torch():
    probe = (
        "import sys\nfrom linrec.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m in ('torch', 'pandas') or m.startswith('linrec.commands')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"
    assert all(name in done.stdout for name in ("measure", "plot", "zoo", "bench"))


@pytest.mark.slow
def test_sigterm_stops_a_command_with_130_and_no_traceback():
    """SIGTERM as a scheduler or `kill` sends it, to a real process (Ctrl-C's KeyboardInterrupt is tested above)."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err.strip() == "linrec: interrupted", err
