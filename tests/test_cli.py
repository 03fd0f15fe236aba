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


BEFORE_TORCH = """
import json, sys
from linrec.cli import main
for argv in json.loads(sys.argv[1]):
    code = main(argv)
    print(json.dumps([code, sorted({"torch", "transformers", "pandas"} & set(sys.modules))]), flush=True)
"""


def test_bad_options_files_budgets_and_outputs_fail_before_torch_is_imported(tmp_path):
    """Each a one-line error (status 2) from a fresh process that has not imported torch, transformers or pandas: the
    options, the text file, the budgets and the output place are checked before any of them loads."""
    import json

    text, a_file = tmp_path / "notes.txt", tmp_path / "a-file"
    text.write_text("some words\n" * 50, encoding="utf-8")
    a_file.write_text("not a directory")
    measure = ["measure", "--model", "smollm2-135m", "--text-file", str(text)]  # (--no-progress loads transformers')
    replace = ["replace", "--model", "smollm2-135m", "--text-file", str(text), "--out", str(tmp_path / "r")]
    missing = str(tmp_path / "missing.txt")
    cases = [
        ("cannot read --text-file", ["measure", "--model", "m", "--text-file", missing]),
        ("cannot read the memory budget 'lots'", [*measure, "--memory", "lots"]),
        ("is a file, not a directory", [*measure, "--out", str(a_file / "table.csv")]),
        ("is a directory; give a file in it", [*measure, "--out", str(tmp_path)]),
        ("--folds must be at least 2", [*measure, "--folds", "1"]),
        ("a perplexity budget (--max-ppl-increase) must be", [*replace, "--max-ppl-increase", "5 percent"]),
        ("the rank K of 'lowrank:0'", [*replace, "--blocks", "0", "--kind", "lowrank:0"]),
        ("--ablate must name each kind once", [*replace, "--blocks", "0", "--ablate", "zero,zero"]),
        ("cannot read --text-file", [*replace[:4], missing, *replace[5:], "--blocks", "0"]),
        (f"--out {a_file} is a file", [*replace[:-1], str(a_file), "--blocks", "0"]),
        ("cannot read --second-text-file", [*replace, "--blocks", "0", "--second-text-file", missing]),
        (f"--out {a_file} is a file", ["export", str(tmp_path), "--out", str(a_file)]),
    ]
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_TORCH, json.dumps([argv for _, argv in cases])], capture_output=True, text=True
    )
    errors = done.stderr.splitlines()
    assert len(errors) == len(cases), done.stderr
    for (message, _), line, result in zip(cases, errors, done.stdout.splitlines()):
        assert line.startswith("linrec: error: ") and message in line, (message, line)
        assert json.loads(result) == [2, []], (message, result)


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
