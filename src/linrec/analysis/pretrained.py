"""A real pretrained model beside the zoo: its depth profile against its controls, its corpora and its swaps.

A profile's ``pretrained`` models (:mod:`linrec.models.packaged`; the offline profile's SmolLM2-135M)
are measured like any other, on the same rows; these functions put together what the chapters show
of them:

* :func:`control_profiles` and :func:`control_claims` (chapters 1 and 3): R²_lin per block of the
  trained weights against the same architecture with its weights shuffled within each matrix and
  freshly initialised (:mod:`linrec.models.controls`), over seeds. If linearity is learned, the trained
  profile stands above every control; if the architecture set it, the controls would share it.
* :func:`row_convergence` and :func:`convergence_claim` (chapter 2): whether the profile's rows are enough for
  the model's width, from the folds it already has: each fit on fewer of them gives R²_lin at fewer
  training rows, at no extra forward pass.
* :func:`swap_blocks` (chapter 5): the blocks whose swap is scored, by a rule fixed before any swap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from linrec.core.fit import kfold
from linrec.core.moments import Moments
from linrec.errors import LinrecError
from linrec.experiment.measurement import measurement
from linrec.experiment.profiles import Profile
from linrec.report.claims import Claim

WEIGHTS = {"final": "trained", "permuted": "permuted within each matrix", "init": "random init"}
"""What each kind of checkpoint is called in tables and figures."""


def control_profiles(
    profile: Profile, model: str, seeds: Sequence[int] | None = None, progress: bool = True
) -> pd.DataFrame:
    """The k-fold table of ``model``'s trained weights and of each control at each of ``seeds`` (default: the
    profile's), on the profile's main corpus, with ``weights`` (:data:`WEIGHTS`) and ``seed`` (None: trained)."""
    seeds = list(profile.seeds if seeds is None else seeds)
    if not seeds:
        raise LinrecError("give at least one seed for the controls")
    tables = [measurement(profile, model, keep="table", progress=progress).table().assign(weights=WEIGHTS["final"])]
    for control in ("permuted", "init"):
        for seed in seeds:
            m = measurement(profile, model, checkpoint=f"{control}@{seed}", keep="table", progress=progress)
            tables.append(m.table().assign(weights=WEIGHTS[control], seed=seed))
    return pd.concat(tables, ignore_index=True).astype({"seed": "Int64"})


def control_claims(table: pd.DataFrame) -> list[Claim]:
    """The learned-versus-architectural test on one model's :func:`control_profiles`.

    The claim holds when in every block the trained R²_lin exceeds the highest R²_lin of any control at any
    seed: a control that reaches the trained value in some block means the architecture (or the weights'
    scale, which the permuted control keeps) can produce that block's linearity without learning.
    """
    trained = table[table["weights"] == WEIGHTS["final"]].set_index("block")["r2_lin"]
    controls = table[table["weights"] != WEIGHTS["final"]]
    if trained.empty or controls.empty:
        raise LinrecError("the table needs the trained weights and at least one control (control_profiles)")
    best = controls.groupby("block")["r2_lin"].max().reindex(trained.index)
    margin = trained - best
    above = int((margin > 0).sum())
    tightest = margin.index[int(margin.argmin())]
    medians = table.groupby("weights", sort=False)["r2_lin"].median()
    seeds = controls["seed"].nunique()
    summary = ", ".join(f"{name} {value:.2f}" for name, value in medians.items())
    return [
        Claim.check(
            "learned, not architectural: trained R²_lin above every control in every block",
            "not tested in the paper (it compares two trained models)",
            f"{above} of {len(trained)} blocks; smallest margin {margin.min():+.2f} (block {tightest}); "
            f"highest control R²_lin {best.max():.2f} over {seeds} seed(s)",
            above == len(trained),
            value=float(margin.min()),
        ),
        Claim.measure("median R²_lin over blocks, by weights", summary),
    ]


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
