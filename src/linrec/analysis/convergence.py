"""Whether a model's rows suffice for its width (chapter 2).

:func:`row_convergence`, :func:`measured_convergence` and :func:`convergence_claim`: whether a model's rows are
enough for its width, from the folds it already has: each fit on fewer of them gives R²_lin at fewer training
rows, at no extra forward pass.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from linrec.core.fit import held_out_r2
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.report.claims import Claim


def row_convergence(moments: Mapping[int, list[Moments]], rcond: float) -> pd.DataFrame:
    """Per block, k-fold R²_lin on the first 2, 3, ..., k of its folds: held-out R²_lin at growing training rows.

    Columns ``block, folds, train_rows, r2_lin``; the last row of each block is the full k-fold number. Fold counts
    whose smallest training split has no more rows than the width (an affine fit needs one more) are left out.
    """
    rows = []
    for block in sorted(moments):  # one block read at a time (sorting items() would read every block's first)
        folds = moments[block]
        sizes = [f.n for f in folds]
        for used in range(2, len(folds) + 1):
            # Only the held-out fits, as kfold makes them (not its other columns: a third of the solves).
            r2 = held_out_r2(folds[:used], [[g for g in range(used) if g != f] for f in range(used)], rcond)
            if r2 is None:  # a training split with no more rows than the width
                continue
            train_rows = sum(sizes[:used]) - round(np.mean(sizes[:used]))
            rows.append({"block": block, "folds": used, "train_rows": train_rows, "r2_lin": float(np.mean(r2))})
    if not rows:
        raise LinrecError("no blocks given")
    return pd.DataFrame(rows)


def measured_convergence(m: ProfileMeasurement) -> pd.DataFrame:
    """:func:`row_convergence` of a cached measurement with its ``model`` and input width ``d_in``, computed once and
    cached (a few hundred solves at a real model's width)."""

    def compute() -> dict[str, pd.DataFrame]:
        return {"convergence": row_convergence(m.moments, m.rcond)}

    table = cached_frames("convergence", {"measurement": measurement_identity(m)}, compute)["convergence"]
    return table.assign(model=m.info.model, d_in=int(m.table().d_in.iloc[0]))


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
