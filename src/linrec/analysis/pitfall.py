"""Chapter 6 (the pitfall): trained linear baselines on the best- and worst-conditioned blocks of a profile's models.

A trained baseline costs seconds per block, so rather than every block the chapter runs the
extremes of each model: :func:`representative_blocks` picks, per model, the block with the
smallest and the largest input condition number (``input_condition`` of the recoverability
table). :func:`pitfall_runs` trains SGD and Adam, on raw and on whitened inputs
(:func:`linrec.interventions.baseline.baseline_runs`), and returns the runs' summary, with each block's
condition number, and their learning curves. :func:`reach_table` turns the summary into the
per-block answer to "how long until within the tolerance of the ceiling?", :func:`closed_form_time`
times the closed-form fit for comparison, and :func:`pitfall_claims` checks the claims.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import pandas as pd

from linrec.core.fit import DEFAULT_RCOND, fit_affine
from linrec.core.sample import train_moments
from linrec.errors import LinrecError
from linrec.experiment.measurement import Measurement
from linrec.interventions.baseline import OPTIMIZERS, BaselineConfig, baseline_runs, curves, summary
from linrec.report import paper
from linrec.report.claims import Claim, claims_table

ROLES = ("best-conditioned", "worst-conditioned")


def representative_blocks(table: pd.DataFrame, column: str = "input_condition") -> pd.DataFrame:
    """Per model, the block with the smallest and the largest ``column``: ``model, block, role, <column>``.

    A model with a single block gives one row, role ``worst-conditioned``.
    """
    missing = {"model", "block", column} - set(table.columns)
    if missing:
        raise LinrecError(
            f"the table lacks columns {sorted(missing)}; pass Measurement.table() rows (model, block, {column})"
        )
    rows = []
    for model, group in table.groupby("model", sort=False):
        low, high = group.loc[group[column].idxmin()], group.loc[group[column].idxmax()]
        picks = [(ROLES[1], high)] if low.block == high.block else [(ROLES[0], low), (ROLES[1], high)]
        rows += [{"model": model, "block": int(r.block), "role": role, column: float(r[column])} for role, r in picks]
    return pd.DataFrame(rows)


def pitfall_runs(
    measurements: Mapping[str, Measurement],
    chosen: pd.DataFrame,
    config: BaselineConfig,
    optimizers: Sequence[str] = OPTIMIZERS,
    whiten: Sequence[bool] = (False, True),
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Baselines on the ``chosen`` blocks (:func:`representative_blocks`) of each model.

    Returns (summary, curves): :func:`linrec.interventions.baseline.summary` and
    :func:`linrec.interventions.baseline.curves` with the columns of ``chosen`` (model, role, condition number)
    joined on.
    """
    unknown = sorted(set(chosen.model) - set(measurements))
    if unknown:
        raise LinrecError(f"no measurement for models {unknown}; measured: {', '.join(measurements)}")
    summaries, learning = [], []
    for model, group in chosen.groupby("model", sort=False):
        m = measurements[model]
        runs = baseline_runs(m.samples, m.moments, group.block.tolist(), optimizers, whiten, 0, config, rcond, progress)
        info = group.drop(columns="model").assign(model=model)
        summaries.append(summary(runs).merge(info, on="block"))
        learning.append(curves(runs).merge(info, on="block"))
    return pd.concat(summaries, ignore_index=True), pd.concat(learning, ignore_index=True)


def reach_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block, one column per run ("adam, raw", "sgd, whitened", ...): "N steps, S s" when it came within
    the tolerance of the ceiling, else its status ("not within budget" or "diverged") and final gap to the ceiling."""

    def cell(r: pd.Series) -> str:
        if r.status != "reached":
            return f"{r.status} (gap {r.gap_final:.3g})"
        return f"{int(r.steps_to_ceiling)} steps, {r.seconds_to_ceiling:.2f} s"

    inputs = runs.whitened.map({False: "raw", True: "whitened"})
    table = runs.assign(run=runs.optimizer + ", " + inputs, cell=runs.apply(cell, axis=1))
    index = [c for c in ("model", "block", "role", "input_condition") if c in table.columns]
    wide = table.pivot_table(index=index, columns="run", values="cell", aggfunc="first", sort=False)
    wide.columns.name = None
    return wide.reset_index()


def closed_form_time(
    measurements: Mapping[str, Measurement], chosen: pd.DataFrame, test_fold: int = 0, rcond: float = DEFAULT_RCOND
) -> pd.DataFrame:
    """Wall time of the closed-form fit itself (merging the training folds' moments and solving),
    per chosen block: ``model, block, closed_form_s`` — the cost to set against the trained runs'."""
    rows = []
    for r in chosen.itertuples():
        folds = measurements[r.model].moments[r.block]
        start = time.perf_counter()
        fit_affine(train_moments(measurements[r.model].samples[r.block], folds, test_fold), rcond)
        rows.append({"model": r.model, "block": r.block, "closed_form_s": time.perf_counter() - start})
    return pd.DataFrame(rows)


def pitfall_claims(runs: pd.DataFrame, tolerance: float = 0.01) -> pd.DataFrame:
    """The pitfall against this run: ``claim, paper (reported), this run (measured), reproduced``.

    * under-convergence: on the worst-conditioned blocks, the median final gap of the runs on raw
      inputs (all optimisers) exceeds ``tolerance`` and exceeds that on the best-conditioned blocks;
    * whitening, per optimiser: on the worst-conditioned blocks, the whitened runs' median final gap
      is smaller than the raw runs'.
    """

    def median_gap(frame: pd.DataFrame) -> float:
        return float(frame.gap_final.median()) if len(frame) else float("nan")

    def reached(frame: pd.DataFrame) -> str:
        return f"{(frame.status == 'reached').mean():.0%}" if len(frame) else "n/a"

    worst, best = runs[runs.role == ROLES[1]], runs[runs.role == ROLES[0]]
    raw_worst, raw_best = worst[~worst.whitened], best[~best.whitened]
    gap_worst, gap_best = median_gap(raw_worst), median_gap(raw_best)
    claims = [
        Claim.check(
            "trained linear baselines",
            paper.TRAINED_BASELINES,
            f"raw inputs, median final gap {gap_worst:.3g} on worst-conditioned blocks vs {gap_best:.3g} on "
            f"best-conditioned; within {tolerance:g}: {reached(raw_worst)} vs {reached(raw_best)} of runs",
            gap_worst > tolerance and not gap_worst <= gap_best,
        )
    ]
    for optimizer, group in worst.groupby("optimizer", sort=False):
        raw, white = group[~group.whitened], group[group.whitened]
        if raw.empty or white.empty:
            continue
        claims.append(
            Claim.check(
                f"whitening narrows the gap ({optimizer})",
                "not reported (the paper recommends the closed form)",
                f"worst-conditioned blocks, median final gap raw {median_gap(raw):.3g} → whitened "
                f"{median_gap(white):.3g}; within {tolerance:g}: {reached(raw)} → {reached(white)} of runs",
                median_gap(white) < median_gap(raw),
            )
        )
    return claims_table(claims)
