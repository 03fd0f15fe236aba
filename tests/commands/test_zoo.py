"""linrec.commands.zoo: ``linrec zoo``: train (or find cached) a profile's model zoo and print its table."""

from __future__ import annotations

import argparse

import numpy as np

from linrec.commands.zoo import _print_zoo, add_cli
from linrec.models.zoo import (
    ZOOS,
)


def test_cli_parses_and_prints_the_table(built, capsys):
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["zoo", "--profile", "smoke", "--force", "--workers", "1"])
    assert (args.profile, args.force, args.workers) == ("smoke", True, 1) and callable(args.handler)
    _, table = built
    _print_zoo(table)
    out = capsys.readouterr().out
    for word in ("params", "tokens_seen", "train_seconds", "unigram_ppl", "stdlib-prose", "stdlib-code", "zoo-llama"):
        assert word in out
    assert all(
        table[f"ppl:{c}"].round(6).equals(np.exp(table[f"loss:{c}"]).round(6)) for c in ZOOS["smoke"].eval_corpora
    )
