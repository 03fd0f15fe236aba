"""linrec.commands.args: What the ``linrec`` commands share: the help format, argparse types, and checking and writing
``--out`` tables."""

from __future__ import annotations

import pytest

from linrec.cli import main


@pytest.mark.parametrize(
    "argv, message",
    [
        (["measure", "--seed", "99999999999999999999999"], "a seed must be an integer from 0 to 2**64 - 1"),
        (["measure", "--seed", "-1"], "a seed must be an integer from 0 to 2**64 - 1"),
        (["zoo", "--workers", "0"], "expected a positive integer; got '0'"),
        (["zoo", "--workers", "-3"], "expected a positive integer; got '-3'"),
        (["measure", "--skip-first", "-1"], "expected an integer of at least 0; got '-1'"),
    ],
)
def test_out_of_range_numbers_are_refused_when_read(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and message in err
    assert err.startswith("linrec: error: argument ") and err.count("\n") == 1  # one line, no usage


def test_a_value_that_starts_with_a_dash_reaches_its_own_check(capsys):
    argv = ["replace", "--model", "m", "--text-file", "t", "--out", "o", "--max-ppl-increase", "-5%"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "linrec: error: a perplexity budget (--max-ppl-increase) must be a finite number above 0, absolute (2.5) or "
        "relative to the model's perplexity (5%); got '-5%'\n"
    )
