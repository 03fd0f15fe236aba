"""Chapter 6 (the pitfall): trained linear baselines on the best- and worst-conditioned blocks of a profile's models.

A trained baseline costs seconds per block, so rather than every block the chapter runs the
extremes of each model: :func:`representative_blocks` picks, per model, the block with the
smallest and the largest input condition number (``input_condition`` of the recoverability
table). :func:`pitfall_runs` trains SGD and Adam on raw, centred (:func:`centred_rows`), standardised and
whitened inputs, each at every learning rate of the tuning grid
(:func:`linrec.interventions.baseline.baseline_runs`), and returns the runs' summary, with each block's condition
number, and their learning curves; verdicts use the tuned runs (best validation R²) only. :func:`reach_table`
turns the tuned runs into the per-block answer to "how long until within the tolerance of the ceiling?",
:func:`closed_form_time` times the closed-form fit for comparison, and :func:`pitfall_claims` checks the claims,
per optimiser: the attribution to conditioning is read on centred inputs, where an input offset or scale cannot
make a run fall short.

The planted controls are in :mod:`linrec.analysis.pitfall_controls`, the claims in
:mod:`linrec.analysis.pitfall_claims`. :func:`~linrec.analysis.pitfall_controls.planted_rows` and
:func:`~linrec.analysis.pitfall_controls.target_control` are the other ways to fall short: at condition number about 1,
inputs far from zero or at a small scale defeat raw runs, and a target far from zero or at a large scale defeats
Adam at its usual rate; centring the inputs, standardising the targets and tuning the rate remove them, which is
why the verdicts do not depend on them.
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
from linrec.core.sample import Rows, sample_rows
from linrec.errors import LinrecError, LinrecWarning
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import baseline_config
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.interventions.baseline import (
    OPTIMIZERS,
    VALIDATION,
    BaselineConfig,
    baseline_runs,
    curves,
    summary,
)

ROLES = ("best-conditioned", "worst-conditioned")
CENTRED = "centred"
"""The input arm this chapter adds to :data:`linrec.interventions.baseline.INPUTS`: see :func:`centred_rows`."""
ARMS = ("raw", CENTRED, "standardised", "whitened")
"""Every input arm :func:`pitfall_runs` trains."""


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
    measurements: Mapping[str, ProfileMeasurement],
    chosen: pd.DataFrame,
    config: BaselineConfig,
    optimizers: Sequence[str] = OPTIMIZERS,
    inputs: Sequence[str] = ARMS,
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
    cache: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Baselines on the ``chosen`` blocks (:func:`representative_blocks`) of each model, at every rate of the grid.

    ``inputs``: arms of :data:`ARMS` (``centred`` is :func:`centred_rows` trained as raw rows; the others are
    :data:`linrec.interventions.baseline.INPUTS`).

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
    measurements: Mapping[str, ProfileMeasurement],
    chosen: pd.DataFrame,
    config: BaselineConfig,
    optimizers: Sequence[str],
    inputs: Sequence[str],
    rcond: float,
    progress: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    summaries, learning = [], []
    arms = [i for i in inputs if i != CENTRED]
    for model, group in chosen.groupby("model", sort=False):
        m, blocks = measurements[str(model)], group.block.tolist()
        runs = baseline_runs(m.samples, blocks, optimizers, arms, 0, config, rcond, progress) if arms else []
        if CENTRED in inputs:
            centred = {b: centred_rows(r, 0, config) for b, r in sample_rows(m.samples, blocks).items()}
            runs += [
                replace(run, inputs=CENTRED)
                for run in baseline_runs(centred, blocks, optimizers, ["raw"], 0, config, rcond, progress)
            ]
        info = group.drop(columns="model").assign(model=model)
        summaries.append(summary(runs).merge(info, on="block"))
        learning.append(curves(runs).merge(info, on="block"))
    return pd.concat(summaries, ignore_index=True), pd.concat(learning, ignore_index=True)


def centred_rows(rows: Rows, test_fold: int, config: BaselineConfig) -> Rows:
    """``rows`` with the inputs centred on the fitting rows' mean and divided by one scale, their RMS about it.

    The fitting rows are those every baseline trains on (the other folds less the validation share). Subtracting a
    mean and dividing by one number leave the covariance's condition number as it is, so on these inputs an input
    offset or an overall input scale cannot make a run fall short, and what still can is the conditioning. The
    closed form is the same map in these coordinates.
    """
    fit = rows.split(test_fold)[0].holdout(VALIDATION, config.seed)[0]
    x = fit.x.to(torch.float64)
    mean = x.mean(0)
    scale = float((x - mean).pow(2).mean().sqrt())
    if scale == 0:
        raise LinrecError("the fitting rows' inputs are constant; there is nothing to centre or scale")
    return Rows(((rows.x.to(torch.float64) - mean) / scale).float(), rows.y, rows.fold)


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
    measurements: Mapping[str, ProfileMeasurement],
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


def chapter_config(profile: Profile, seed: int, steps: int | None, tolerance: float) -> BaselineConfig:
    """Chapter 6's trained baselines: the profile's (:func:`linrec.experiment.resolve.baseline_config`, ``steps``
    overriding its budget when given) with the chapter's ``tolerance``."""
    return replace(baseline_config(profile.probe, seed=seed, steps=steps, device=profile.device), tolerance=tolerance)


def run_settings(config: BaselineConfig, rows_per_block: int) -> pd.DataFrame:
    """The settings every trained baseline of a run shares, one row each (``rows_per_block``: rows sampled per
    block)."""
    return pd.Series({
        "steps per run": config.steps, "minibatch rows": config.batch_size, "Adam base learning rate": config.lr_adam,
        "SGD momentum": config.momentum, "learning-rate grid (× base)": ", ".join(f"{f:g}" for f in config.lr_factors),
        "validation share of training rows": VALIDATION,
        "targets": "standardised" if config.standardise_targets else "raw", "schedule": config.schedule,
        "held-out R² logged every": config.log_every, "tolerance (R²)": config.tolerance,
        "sampled rows per block": rows_per_block,
    }, name="setting").to_frame()  # fmt: skip
