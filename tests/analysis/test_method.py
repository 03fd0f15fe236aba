"""linrec.analysis.method: chapter 1's setup beside the paper's, one column per setup and one row per item."""

from __future__ import annotations

import types

import pandas as pd

from linrec.analysis import method
from linrec.experiment.profiles import get_profile
from linrec.report import paper


def test_the_setup_table_sets_the_papers_reported_setup_beside_each_measured_one(monkeypatch):
    profile = get_profile("offline")
    monkeypatch.setattr(method, "profile_corpus", lambda p: types.SimpleNamespace(name="planted-text"))
    table = pd.DataFrame({"block": range(6), "d_in": [64] * 6})
    trained = types.SimpleNamespace(table=lambda: table, info=types.SimpleNamespace(rows=4096, seq_len=128))
    packaged = profile.packaged[0]
    tables = {
        (packaged, "final"): pd.DataFrame({"d_in": [576] * 30, "n_train": [3276.8] * 30, "n_test": [819.2] * 30}),
        (packaged, "init"): pd.DataFrame({"d_in": [1] * 2, "n_train": [1] * 2, "n_test": [1] * 2}),  # not final
        ("zoo-gpt2", "final"): pd.DataFrame({"d_in": [1], "n_train": [1], "n_test": [1]}),  # not packaged
    }
    out = method.setup_table(profile, trained, tables, layers=2, width=32, rows=2048, seq_len=16, folds=4)
    assert list(out.index) == list(paper.SETUP) and list(out["paper (reported)"]) == list(paper.SETUP.values())
    assert list(out.columns) == [
        "paper (reported)",
        "random-init GPT-2 (above)",
        f"trained ({profile.name} profile)",
        f"{packaged} ({profile.name} profile)",
    ]
    assert list(out["random-init GPT-2 (above)"])[1:5] == ["32", "2", "2,048", "16"]
    assert list(out[f"trained ({profile.name} profile)"])[1:6] == ["64", "6", "4,096", "128", "planted-text"]
    assert list(out[f"{packaged} ({profile.name} profile)"])[1:4] == ["576", "30", "4,096"]  # n_train + n_test
