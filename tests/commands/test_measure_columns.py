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
