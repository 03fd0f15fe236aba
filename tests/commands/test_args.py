"""linrec.commands.args: What the ``linrec`` commands share: the help format, argparse types, and checking and writing
``--out`` tables."""

from __future__ import annotations

import pytest

from linrec.cli import main


@pytest.mark.parametrize(
    "argv, message",
    [
        (["profile", "--seed", "99999999999999999999999"], "a seed must be an integer from 0 to 2**64 - 1"),
        (["profile", "--seed", "-1"], "a seed must be an integer from 0 to 2**64 - 1"),
        (["zoo", "--workers", "0"], "expected a positive integer; got '0'"),
        (["zoo", "--workers", "-3"], "expected a positive integer; got '-3'"),
        (["profile", "--skip-first", "-1"], "expected an integer of at least 0; got '-1'"),
    ],
)
def test_out_of_range_numbers_are_refused_when_read(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2 and message in capsys.readouterr().err
