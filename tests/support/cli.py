"""A local text file and the rows to ask of it, and a helper that runs a failing command, for the command tests."""

from __future__ import annotations

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
