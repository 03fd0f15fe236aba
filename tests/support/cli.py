"""A local text file and the rows to ask of it, a helper that runs a failing command, and one that says what an
import loads, for the command tests and the torch-free modules the commands check their options with."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from linrec.cli import main

ROWS = ["--max-rows", "384", "--seq-len", "16", "--folds", "3", "--no-progress"]


@pytest.fixture(scope="session")
def text_file(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    return path


def _fails(args, capsys, *patterns):
    assert main(args) == 2
    err = capsys.readouterr().err
    for p in patterns:
        assert p in err, err
    return err


def heavy_imports(module: str) -> list[str]:
    """Which of torch, transformers and pandas importing ``module`` loads, in a fresh interpreter."""
    heavy = "{'torch', 'transformers', 'pandas'}"
    probe = f"import json, sys, {module}; print(json.dumps(sorted({heavy} & set(sys.modules))))"
    return json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
