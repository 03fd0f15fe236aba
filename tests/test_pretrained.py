"""The real-model analyses (linrec.analysis.pretrained): row convergence, the swap subset, the profile figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest
import torch

from linrec.analysis.pretrained import convergence_claim, row_convergence
from linrec.book.ledger import side_by_side
from linrec.core.fit import kfold
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.plots.pretrained import profile_figure
from linrec.report.claims import Claim, Verdict


def folds_of(x: torch.Tensor, y: torch.Tensor, k: int) -> list[Moments]:
    return [Moments.from_rows(xs, ys) for xs, ys in zip(x.chunk(k), y.chunk(k), strict=True)]


def test_row_convergence_is_kfold_on_the_first_folds_and_rises_with_rows():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(500, 60, dtype=torch.float64, generator=gen)
    noise = torch.randn(500, 8, dtype=torch.float64, generator=gen)
    y = 0.3 * x @ torch.randn(60, 8, dtype=torch.float64, generator=gen) + 2 * noise
    folds = folds_of(x, y, 5)
    table = row_convergence({3: folds}, rcond=1e-12)
    assert list(table.folds) == [2, 3, 4, 5] and (table.block == 3).all()
    assert table.r2_lin.iloc[-1] == kfold(3, folds, 1e-12).r2_lin  # the same fits, bit for bit
    assert table.r2_lin.iloc[1] == kfold(3, folds[:3], 1e-12).r2_lin
    assert list(table.train_rows) == [100, 200, 300, 400]
    assert table.r2_lin.is_monotonic_increasing  # 60 inputs: 100 training rows overfit, 400 much less
    claim = convergence_claim(table)
    assert claim.verdict is None and "300 to 400 training rows" in claim.measured
    flat = table.assign(r2_lin=0.5)
    assert "still rising" in convergence_claim(table).note and convergence_claim(flat).note == ""
    with pytest.raises(LinrecError, match="at least two row counts"):
        convergence_claim(table[table.folds == 2])


def test_the_profile_figure_labels_its_axes():
    trained = pd.DataFrame({"block": [0, 1, 2], "r2_lin": [0.9, 0.5, 0.7], "r2_lin_std": 0.01,
                            "r2_feature_median": [0.2, 0.1, 0.3]})  # fmt: skip
    ax = profile_figure(trained, "t").axes[0]
    assert ax.get_xlabel() == "FFN block (depth)" and "fraction of variance" in ax.get_ylabel()
    assert len(ax.get_legend().get_texts()) == 2
    with pytest.raises(LinrecError, match="r2_feature_median"):
        profile_figure(trained.drop(columns="r2_feature_median"), "t")


def test_the_profile_figure_draws_one_panel_per_model_in_the_tables_order():
    one = pd.DataFrame({"block": [1, 0], "r2_lin": [0.5, 0.9], "r2_lin_std": 0.01, "r2_feature_median": [0.1, 0.2]})
    both = pd.concat([one.assign(model="b"), one.assign(model="a", r2_lin=[0.3, 0.4])])
    axes = profile_figure(both).axes
    assert [ax.get_title() for ax in axes] == ["b", "a"]
    assert list(axes[1].lines[0].get_ydata()) == [0.4, 0.3]  # block order, this model's rows only


def test_side_by_side_pairs_a_models_claims_with_the_plain_ones():
    entries = pd.DataFrame([
        {"chapter": "02", "quantity": "near-linear blocks", "measured": 0.98, "reproduced": "no",
         "paper (reported)": "> 0.99", "unit": "", "note": ""},
        {"chapter": "02", "quantity": "near-linear blocks (smol)", "measured": 0.975, "reproduced": "no",
         "paper (reported)": "> 0.99", "unit": "", "note": ""},
        {"chapter": "03", "quantity": "controls (smol)", "measured": 0.2, "reproduced": "yes",
         "paper (reported)": "not tested", "unit": "", "note": ""},
        {"chapter": "03", "quantity": "controls (other)", "measured": 0.1, "reproduced": "yes",
         "paper (reported)": "not tested", "unit": "", "note": ""},
    ])  # fmt: skip
    table = side_by_side(entries, "smol")
    assert list(table.quantity) == ["near-linear blocks", "controls"]
    assert list(table["measured"]) == [0.98, ""] and list(table["measured (smol)"]) == [0.975, 0.2]
    assert list(table["reproduced (smol)"]) == ["no", "yes"] and table["paper (reported)"].iloc[0] == "> 0.99"


def test_claim_of_names_its_subject():
    claim = Claim.check("x", "p", "m", True, rule="r").of("model a")
    assert claim.claim == "x (model a)" and claim.verdict is Verdict.YES
