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


def test_deferred_choices_are_imported_only_to_check_a_value_or_list_them(capsys):
    """A choice given is checked against the module's names, a wrong one listed in the error, and ``--help`` lists them;
    until then the module is not imported (the parser is built in a fresh process, as a command line builds it)."""
    import subprocess
    import sys

    from linrec.commands.args import DTYPES, Deferred
    from linrec.models.loading import DTYPES as LOADING_DTYPES

    assert list(DTYPES) == list(LOADING_DTYPES) and "bf16" in DTYPES and "fp8" not in DTYPES
    assert list(Deferred("linrec.experiment.profiles", "profile_names"))[:3] == ["paper", "offline", "smoke"]
    probe = (
        "import sys\nfrom linrec.cli import build_parser\n"
        "for name in ('measure', 'replace', 'export'):\n    build_parser(name)\n"
        "print(sorted({'torch', 'transformers', 'pandas', 'linrec.models.loading'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    with pytest.raises(SystemExit):
        main(["measure", "--dtype", "fp8"])
    assert "invalid choice: 'fp8' (choose from 'float32', 'fp32', 'bfloat16'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "blocks, words",
    [([0], "0"), ([3, 5], "3, 5"), ([2, 0, 1, 5, 6, 9], "0-2, 5-6, 9"), (range(30), "0-29"), ([4, 4, 3], "3-4")],
)
def test_block_spans_join_neighbours(blocks, words):
    from linrec.commands.args import block_spans

    assert block_spans(blocks) == words
