"""linrec.commands.measure_columns: What each column of a ``linrec measure`` table means, and the columns that say which
releases made it and when."""

from __future__ import annotations

import pandas as pd
import pytest

from linrec.cli import main
from support.cli import ROWS


def test_profile_table_names_its_versions_prints_short_names_and_help_explains_every_column(
    model_dirs, text_file, tmp_path, capsys
):
    import datetime

    import torch
    import transformers

    import linrec

    out = tmp_path / "r.csv"
    assert (
        main(["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert str(model_dirs["gpt2"]) not in printed and model_dirs["gpt2"].name in printed
    assert str(text_file) not in printed and text_file.name in printed
    table = pd.read_csv(out)
    assert table.model.iloc[0] == str(model_dirs["gpt2"])  # the file keeps the model as given
    assert (table.linrec_version == linrec.__version__).all() and (table.torch_version == torch.__version__).all()
    assert (table.transformers_version == transformers.__version__).all()
    age = datetime.datetime.now(datetime.UTC) - datetime.datetime.fromisoformat(table.measured_at.iloc[0])
    assert datetime.timedelta(0) <= age < datetime.timedelta(minutes=10)
    with pytest.raises(SystemExit):
        main(["measure", "--help"])
    help_lines = capsys.readouterr().out.splitlines()
    described = {line.split()[0] for line in help_lines if line.startswith("  ") and not line.startswith("   ")}
    assert set(table.columns) <= described, set(table.columns) - described


def test_rows_are_too_few_below_the_default_only_where_half_the_rows_still_fall_short():
    """At 64 rows per input dimension (the default) never, whatever the half-rows check says; below it, where
    r2_lin_half_rows sits more than 0.01 below r2_lin or is NaN; and the warning names those blocks and their rows."""
    import warnings

    from linrec.commands.measure_columns import rows_too_few, warn_rows_too_few
    from linrec.errors import LinrecWarning

    table = pd.DataFrame(
        {
            "model": "m",
            "block": [0, 1, 2, 3, 4],
            "d_in": 32,
            "n_train": [1536, 800, 800, 800, 800],  # n_train + n_test: 64, then 33.3 rows per dimension
            "n_test": [512, 266, 266, 266, 266],
            "r2_lin": [0.90, 0.90, 0.90, 0.90, 0.90],
            "r2_lin_half_rows": [0.5, 0.885, 0.895, float("nan"), 0.91],
        }
    )
    assert list(rows_too_few(table)) == [False, True, False, True, False]
    with pytest.warns(LinrecWarning) as warned:
        warn_rows_too_few(table.assign(rows_too_few=rows_too_few(table)))
    assert len(warned) == 1
    message = str(warned[0].message)
    assert "R²_lin of blocks 1, 3 has not converged at 1,066 rows per block, 33.3 per input dimension of 32" in message
    assert "r2_lin_half_rows is up to 0.015 below r2_lin" in message and "--max-rows 2048" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_rows_too_few(table.assign(rows_too_few=False))  # nothing flagged, nothing said


def test_measure_prints_a_summary_flags_too_few_rows_and_keeps_every_column_in_out(
    model_dirs, text_file, tmp_path, capsys
):
    """Too few rows for the tiny model's width: flagged in the printed summary, in the table and on stderr; the
    summary is the few columns of SUMMARY, and the file holds every column."""
    from linrec.commands.measure_columns import SUMMARY

    argv = ["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), "--max-rows", "112"]
    argv += ["--seq-len", "16", "--folds", "3", "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    assert lines[0].startswith(f"{model_dirs['gpt2'].name} on {text_file.name}: 2 blocks, 112 rows each (3.5 per input")
    assert lines[1].split() == list(SUMMARY) and [line.split()[-1] for line in lines[2:4]] == ["True", "True"]
    assert "columns: --out FILE.csv keeps every one" in lines[-1] and len(lines) == 5
    assert "linrec: warning: " in printed.err and "R²_lin of blocks 0-1 has not converged at 112 rows" in printed.err
    out = tmp_path / "r.csv"
    assert main([*argv, "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert table.rows_too_few.tolist() == [True, True] and len(table.columns) > 40
    assert list(table.columns).index("rows_too_few") == list(table.columns).index("revision") - 1
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"wrote {out}: every column")


def test_a_summary_with_no_block_flagged_leaves_the_flag_out_and_fits_80_columns():
    from linrec.commands.measure_columns import SUMMARY, summary

    table = pd.DataFrame(
        {"model": "m", "corpus": "t.txt", "block": [0, 1], "r2_lin": [0.96, -118.5], "r2_lin_std": [0.0067, 81.5],
         "first_position_share": [0.0191, 0.9801], "r2_lin_after_first": [0.9587, -5.293], "rows_too_few": False,
         "n_train": 29491, "n_test": 7373, "d_in": 576, "seq_len": 128, "folds": 5}
    )  # fmt: skip
    lines = summary(table).splitlines()
    assert lines[1].split() == [c for c in SUMMARY if c != "rows_too_few"]
    assert max(len(line) for line in lines[1:]) <= 80
    flagged = summary(table.assign(rows_too_few=[False, True])).splitlines()
    assert flagged[1].split() == list(SUMMARY) and flagged[3].split()[-1] == "True"
