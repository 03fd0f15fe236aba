"""linrec.analysis.convergence: Whether a model's rows suffice for its width (chapter 2)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from linrec.analysis.convergence import convergence_claim, row_convergence
from linrec.core.fit import kfold
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.notebook.ledger import side_by_side
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
