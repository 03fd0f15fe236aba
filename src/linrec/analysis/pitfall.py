"""Chapter 6 (the pitfall): trained linear baselines on the best- and worst-conditioned blocks of a profile's models.

A trained baseline costs seconds per block, so rather than every block the chapter runs the
extremes of each model: :func:`representative_blocks` picks, per model, the block with the
smallest and the largest input condition number (``input_condition`` of the recoverability
table). :func:`pitfall_runs` trains SGD and Adam on raw, standardised and whitened inputs, each at
every learning rate of the tuning grid (:func:`linrec.interventions.baseline.baseline_runs`), and
returns the runs' summary, with each block's condition number, and their learning curves; verdicts
use the tuned runs (best validation R²) only. :func:`reach_table` turns the tuned runs into the
per-block answer to "how long until within the tolerance of the ceiling?", :func:`closed_form_time`
times the closed-form fit for comparison, and :func:`pitfall_claims` checks the claims.

:func:`planted_rows` and :func:`target_control` are the other way to fall short: at condition number 1
a target far from zero or at a large scale defeats Adam at its usual rate, whatever the inputs; the
standardised targets and the tuning remove it, which is why the verdicts do not depend on it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace

import pandas as pd
import torch

from linrec.core.fit import DEFAULT_RCOND, fit_affine, half_precision_note
from linrec.core.moments import Moments
from linrec.core.sample import Rows
from linrec.errors import LinrecError, LinrecWarning
from linrec.experiment.measurement import Measurement
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.interventions.baseline import (
    INPUTS,
    OPTIMIZERS,
    VALIDATION,
    BaselineConfig,
    baseline_runs,
    curves,
    summary,
    train_linear,
    tuned_runs,
)
from linrec.report import paper
from linrec.report.claims import Claim

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
        low, high = group.iloc[group[column].argmin()], group.iloc[group[column].argmax()]
        picks = [(ROLES[1], high)] if low.block == high.block else [(ROLES[0], low), (ROLES[1], high)]
        rows += [{"model": model, "block": int(r.block), "role": role, column: float(r[column])} for role, r in picks]
    return pd.DataFrame(rows)


def pitfall_runs(
    measurements: Mapping[str, Measurement],
    chosen: pd.DataFrame,
    config: BaselineConfig,
    optimizers: Sequence[str] = OPTIMIZERS,
    inputs: Sequence[str] = INPUTS,
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
    cache: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Baselines on the ``chosen`` blocks (:func:`representative_blocks`) of each model, at every rate of the grid.

    Returns (summary, curves): :func:`linrec.interventions.baseline.summary` and
    :func:`linrec.interventions.baseline.curves` with the columns of ``chosen`` (model, role, condition number)
    joined on; the ``tuned`` column marks the run each (block, optimizer, inputs) is judged by. ``cache``: keep
    both tables in the cache, keyed by the measurements' provenance and every setting
    (:func:`linrec.experiment.results.cached_frames`; for measurements from the cache, whose provenance
    identifies their rows).
    """
    unknown = sorted(set(chosen.model) - set(measurements))
    if unknown:
        raise LinrecError(f"no measurement for models {unknown}; measured: {', '.join(measurements)}")
    for model in dict.fromkeys(chosen.model):
        note = half_precision_note(measurements[model].info.dtype)
        if note is not None:
            warnings.warn(f"{model}: {note}", LinrecWarning, stacklevel=2)
    if cache:
        content = {
            "measurements": [measurement_identity(measurements[m]) for m in dict.fromkeys(chosen.model)],
            "chosen": chosen.to_dict("list"),
            "config": asdict(config),
            "optimizers": list(optimizers),
            "inputs": list(inputs),
            "rcond": rcond,
        }

        def compute() -> dict[str, pd.DataFrame]:
            runs = _all_runs(measurements, chosen, config, optimizers, inputs, rcond, progress)
            return dict(zip(("summary", "curves"), runs, strict=True))

        frames = cached_frames("pitfall", content, compute)
        return frames["summary"], frames["curves"]
    return _all_runs(measurements, chosen, config, optimizers, inputs, rcond, progress)


def _all_runs(
    measurements: Mapping[str, Measurement],
    chosen: pd.DataFrame,
    config: BaselineConfig,
    optimizers: Sequence[str],
    inputs: Sequence[str],
    rcond: float,
    progress: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    summaries, learning = [], []
    for model, group in chosen.groupby("model", sort=False):
        m = measurements[str(model)]
        runs = baseline_runs(m.samples, group.block.tolist(), optimizers, inputs, 0, config, rcond, progress)
        info = group.drop(columns="model").assign(model=model)
        summaries.append(summary(runs).merge(info, on="block"))
        learning.append(curves(runs).merge(info, on="block"))
    return pd.concat(summaries, ignore_index=True), pd.concat(learning, ignore_index=True)


def tuning_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per optimiser and inputs: the tuned learning rates (range over blocks) and how many of them sit at an end of
    the grid (where a wider grid might have found better): ``optimizer, inputs, tuned lr, at grid edge``."""
    rows = []
    for (optimizer, inputs), group in runs.groupby(["optimizer", "inputs"], sort=False):
        per_run = group.groupby(["model", "block"], sort=False)
        edge = pd.Series([g.lr[g.tuned].iloc[0] in (g.lr.min(), g.lr.max()) for _, g in per_run])
        lrs = group.lr[group.tuned]
        rows.append(
            {
                "optimizer": optimizer,
                "inputs": inputs,
                "tuned lr": f"{lrs.min():.3g}" if lrs.min() == lrs.max() else f"{lrs.min():.3g} to {lrs.max():.3g}",
                "at grid edge": f"{int(edge.sum())} of {len(edge)}",
            }
        )
    return pd.DataFrame(rows)


def tuned_only(runs: pd.DataFrame) -> pd.DataFrame:
    """The tuned runs of a table that has every rate of the grid (all of one that has no ``tuned`` column)."""
    return runs[runs.tuned] if "tuned" in runs.columns else runs


def reach_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per block, one column per tuned run ("adam, raw", "sgd, whitened", ...): "N steps, S s" when it came
    within the tolerance of the ceiling, else its status ("not within budget" or "diverged") and final gap."""

    def cell(r: pd.Series) -> str:
        if r.status != "reached":
            return f"{r.status} (gap {r.gap_final:.3g})"
        return f"{int(r.steps_to_ceiling)} steps, {r.seconds_to_ceiling:.2f} s"

    tuned = tuned_only(runs)
    table = tuned.assign(run=tuned.optimizer + ", " + tuned.inputs, cell=tuned.apply(cell, axis=1))
    index = [c for c in ("model", "block", "role", "input_condition") if c in table.columns]
    wide = table.pivot_table(index=index, columns="run", values="cell", aggfunc="first", sort=False)
    wide.columns.name = None
    return wide.reset_index()


def closed_form_time(
    measurements: Mapping[str, Measurement],
    chosen: pd.DataFrame,
    test_fold: int = 0,
    rcond: float = DEFAULT_RCOND,
    seed: int = 0,
) -> pd.DataFrame:
    """Wall time of the closed-form fit itself (the float64 moments of the fitting rows the baselines train on, and
    the solve), per chosen block: ``model, block, closed_form_s`` — the cost to set against the trained runs'."""
    rows = []
    for r in chosen.to_dict("records"):
        fit, _ = measurements[r["model"]].samples[r["block"]].split(test_fold)[0].holdout(VALIDATION, seed)
        start = time.perf_counter()
        fit_affine(Moments.from_rows(fit.x, fit.y), rcond)
        rows.append({"model": r["model"], "block": r["block"], "closed_form_s": time.perf_counter() - start})
    return pd.DataFrame(rows)


def planted_rows(
    decades: float = 0.0, offset: float = 0.0, scale: float = 1.0, n: int = 4000, d: int = 16, seed: int = 0
) -> Rows:
    """Rows with a known answer: x with condition number 10^(2·decades) along rotated directions, y an exact
    linear map of the latent z (unit output variance per dimension, before ``scale``) plus 3 % noise, times
    ``scale`` plus ``offset``; five folds of 40-row "sequences"."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, d, generator=g)
    rotation, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    x = (z * torch.logspace(0, -decades, d)) @ rotation.T
    y = z @ torch.randn(d, d, generator=g) / d**0.5 + 0.03 * torch.randn(n, d, generator=g)
    return Rows(x, y * scale + offset, torch.arange(n) // 40 % 5)


def target_control(
    config: BaselineConfig, offset: float = 30.0, scale: float = 30.0, seed: int = 0, optimizer: str = "adam"
) -> pd.DataFrame:
    """``optimizer`` at condition number 1 on a centred target, one shifted by ``offset`` and one multiplied by
    ``scale``: at the base rate on raw targets (the usual practice), and standardised and tuned (as the chapter's
    runs are). Columns: ``target, training, lr, ceiling, r2_final, gap_final, status``."""
    rows = []
    for target, planted in (
        ("centred", planted_rows(seed=seed)),
        (f"shifted by {offset:g}", planted_rows(offset=offset, seed=seed)),
        (f"scaled by {scale:g}", planted_rows(scale=scale, seed=seed)),
    ):
        usual = train_linear(planted, 0, optimizer, "raw", replace(config, standardise_targets=False))
        tuned = next(r for r in tuned_runs(planted, 0, optimizer, "raw", config) if r.tuned)
        for training, run in (("base rate, raw target", usual), ("tuned, standardised target", tuned)):
            final = float(run.log.r2.iloc[-1])
            rows.append(
                {
                    "target": target,
                    "training": training,
                    "lr": run.lr,
                    "ceiling": run.ceiling,
                    "r2_final": final,
                    "gap_final": run.ceiling - final,
                    "status": run.status,
                }
            )
    return pd.DataFrame(rows)


def pitfall_claims(runs: pd.DataFrame, tolerance: float = 0.01, condition: pd.Series | None = None) -> list[Claim]:
    """The pitfall against this run, on tuned runs only, with the numbers behind it.

    * under-convergence: on the worst-conditioned blocks, the median final gap of the tuned runs on raw
      inputs (all optimisers) exceeds ``tolerance`` and exceeds that on the best-conditioned blocks;
    * whitening, per optimiser: on the worst-conditioned blocks, the tuned whitened runs' median final gap is
      within ``tolerance`` and smaller than the tuned raw runs';
    * headline numbers: the whitened runs' median gap on the worst-conditioned blocks (all optimisers), and,
      with ``condition`` (the blocks' input condition numbers), their range.
    """

    def median_gap(frame: pd.DataFrame) -> float:
        return float(frame.gap_final.median()) if len(frame) else float("nan")

    def reached(frame: pd.DataFrame) -> str:
        return f"{(frame.status == 'reached').mean():.0%}" if len(frame) else "n/a"

    tuned = tuned_only(runs)
    worst, best = tuned[tuned.role == ROLES[1]], tuned[tuned.role == ROLES[0]]
    raw_worst, raw_best = worst[worst.inputs == "raw"], best[best.inputs == "raw"]
    gap_worst, gap_best = median_gap(raw_worst), median_gap(raw_best)
    claims = [
        Claim.check(
            "trained linear baselines",
            paper.TRAINED_BASELINES,
            f"tuned runs on raw inputs, median final gap {gap_worst:.3g} on worst-conditioned blocks vs "
            f"{gap_best:.3g} on best-conditioned; within {tolerance:g}: {reached(raw_worst)} vs {reached(raw_best)}",
            gap_worst > tolerance and not gap_worst <= gap_best,
            value=gap_worst,
            unit="R²",
        )
    ]
    for optimizer, group in worst.groupby("optimizer", sort=False):
        raw, white = group[group.inputs == "raw"], group[group.inputs == "whitened"]
        if raw.empty or white.empty:
            continue
        claims.append(
            Claim.check(
                f"whitening closes the gap ({optimizer})",
                "not reported (the paper recommends the closed form)",
                f"worst-conditioned blocks, tuned, median final gap raw {median_gap(raw):.3g} → whitened "
                f"{median_gap(white):.3g}; within {tolerance:g}: {reached(raw)} → {reached(white)} of runs",
                median_gap(white) <= tolerance and median_gap(white) < median_gap(raw),
                value=median_gap(white),
                unit="R²",
            )
        )
    white = worst[worst.inputs == "whitened"]
    claims.append(
        Claim.measure(
            "whitened baselines, median gap on worst-conditioned blocks",
            median_gap(white),
            unit="R²",
            note=f"{reached(white)} of runs within {tolerance:g}",
        )
    )
    if condition is not None:
        claims.append(
            Claim.measure(
                "input condition number, range over blocks",
                f"{condition.min():.3g} to {condition.max():.3g}",
                note="λ_max / λ_min of the input covariance over its non-null directions",
            )
        )
    return claims
