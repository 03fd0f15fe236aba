"""A real pretrained model beside the zoo: whether its rows suffice for its width, which blocks costly analyses cover.

A profile's ``pretrained`` models (:mod:`linrec.models.packaged`; the offline profile's SmolLM2-135M)
are measured like any other, on the same rows; these functions put together what the chapters show
of them:

* :func:`row_convergence` and :func:`convergence_claim` (chapter 2): whether the profile's rows are enough for
  the model's width, from the folds it already has: each fit on fewer of them gives R²_lin at fewer
  training rows, at no extra forward pass.
* :func:`swap_blocks` (chapters 4 and 5): the blocks a costly analysis (probes, swaps) covers, by a rule fixed
  before any result.

Its trained weights against their controls are :mod:`linrec.analysis.learned`'s, as for any model.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from linrec.core.fit import kfold
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.report.claims import Claim


def row_convergence(moments: Mapping[int, list[Moments]], rcond: float) -> pd.DataFrame:
    """Per block, k-fold R²_lin on the first 2, 3, ..., k of its folds: held-out R²_lin at growing training rows.

    Columns ``block, folds, train_rows, r2_lin``; the last row of each block is the full k-fold number.
    """
    rows = []
    for block, folds in sorted(moments.items()):
        for used in range(2, len(folds) + 1):
            report = kfold(block, folds[:used], rcond)
            rows.append({"block": block, "folds": used, "train_rows": report.n_train, "r2_lin": report.r2_lin})
    if not rows:
        raise LinrecError("no blocks given")
    return pd.DataFrame(rows)


def convergence_claim(convergence: pd.DataFrame) -> Claim:
    """How much R²_lin still gains over the last step of :func:`row_convergence` (median and largest over blocks):
    near zero when the rows suffice for the width, clearly positive when more rows would still raise it."""
    steps = sorted(convergence["folds"].unique())
    if len(steps) < 2:
        raise LinrecError("the convergence table needs at least two row counts (three folds or more)")
    wide = convergence.pivot(index="block", columns="folds", values="r2_lin")
    gain = wide[steps[-1]] - wide[steps[-2]]
    rows = convergence.groupby("folds")["train_rows"].mean()
    return Claim.measure(
        "R²_lin gained over the last step of training rows",
        f"median {gain.median():+.3f}, largest {gain.max():+.3f} (block {gain.index[int(gain.argmax())]}) from "
        f"{rows[steps[-2]]:,.0f} to {rows[steps[-1]]:,.0f} training rows",
        note="still rising: more rows would raise R²_lin" if gain.median() > 0.005 else "",
    )


def swap_blocks(n_blocks: int, every: int) -> list[int]:
    """Every ``every``-th block from the first, and the last: the swap subset, chosen by depth alone so that no
    result can steer it."""
    if every < 1 or n_blocks < 1:
        raise LinrecError(f"every and n_blocks must be positive; got every={every}, n_blocks={n_blocks}")
    return sorted({*range(0, n_blocks, every), n_blocks - 1})
