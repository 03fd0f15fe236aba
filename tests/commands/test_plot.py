"""linrec.commands.plot: ``linrec plot``: draw a table written by ``linrec measure --out`` as the book draws a depth
profile."""

from __future__ import annotations

import pandas as pd

from linrec.cli import main
from support.cli import ROWS, _fails


def test_plot_draws_a_profile_table_one_panel_per_model(model_dirs, text_file, tmp_path, capsys, monkeypatch):
    import linrec.plots.measured as measured_plots

    out = tmp_path / "r.csv"
    assert (
        main(["measure", "--model", str(model_dirs["gpt2"]), "--text-file", str(text_file), *ROWS, "--out", str(out)])
        == 0
    )
    two = tmp_path / "two.csv"
    table = pd.read_csv(out)
    pd.concat([table, table.assign(model="other/model", r2_lin=0.5)]).to_csv(two, index=False)
    drawn, real = [], measured_plots.measured_figure
    monkeypatch.setattr(measured_plots, "measured_figure", lambda t, title: drawn.append(t) or real(t, title))
    figure = tmp_path / "fig" / "profile.png"
    assert main(["plot", str(two), "--out", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(dict.fromkeys(drawn[-1].model)) == [model_dirs["gpt2"].name, "other/model"]  # short names, in order
    assert main(["plot", str(two), "--out", str(figure), "--model", "other/model"]) == 0
    assert set(drawn[-1].model) == {"other/model"}
    capsys.readouterr()
    _fails(["plot", str(two), "--out", str(figure), "--model", "nosuch"], capsys, "no model ['nosuch']", "other/model")
    _fails(["plot", str(two), "--out", str(tmp_path / "f.jpg")], capsys, "--out must end in .png or .pdf or .svg")
    _fails(["plot", str(tmp_path / "missing.csv"), "--out", str(figure)], capsys, "cannot read the table")


def test_plot_scores_draws_every_score_of_a_profile_table(model_dirs, text_file, tmp_path, capsys):
    from linrec.plots.pruning import LABELS

    out = tmp_path / "r.csv"
    argv = ["measure", "--model", str(model_dirs["llama"]), "--text-file", str(text_file), *ROWS, "--out", str(out)]
    assert main(argv) == 0
    figure = tmp_path / "scores.png"
    assert main(["plot", str(out), "--scores", "--out", str(figure)]) == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(out)
    bare = tmp_path / "bare.csv"
    table.drop(columns=["block_influence", "layer_linearity"]).assign(output_energy=float("nan")).to_csv(bare)
    assert main(["plot", str(bare), "--scores", "--out", str(figure)]) == 0  # the scores it has
    old = tmp_path / "old.csv"
    table.drop(columns=[c for c in LABELS if c in table]).to_csv(old)  # a table measured before the scores
    capsys.readouterr()
    _fails(["plot", str(old), "--scores", "--out", str(figure)], capsys, "holds no scores")
