"""Chapter 3: is the depth profile learned or set by the architecture (activation, inputs, weights)?

The chapter compares the depth profiles of :mod:`linrec.analysis.depth` between models that differ
in one respect (:mod:`linrec.analysis.identity` names that respect and measures how far apart the
profiles are), and characterises the inputs each block sees:

* :func:`conditioning_table` (input scale, effective rank, outlier ratio and conditioning per block, from the
  k-fold table) with :func:`predictor_table`, and
  :func:`normalisation_table` (R²_lin on standardised and whitened inputs,
  :func:`linrec.interventions.crossfeed.normalised_table`) with :func:`normalisation_summary`,
  characterise the inputs.
* :func:`grid_shares` asks whether the R² of a cross-feeding grid
  (:func:`linrec.interventions.crossfeed.crossfeed_grid`) follows the weights or the inputs: a
  two-way decomposition of the grid's variance and two correlations with the own-input values.
* :func:`activation_claims` reports the distances and shares as numbers: they tell weights from inputs, not
  learning from architecture, which :mod:`linrec.analysis.learned` tests directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from torch import nn

from linrec.core.normalise import NORMALISATIONS
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import load_profile_model
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.interventions.crossfeed import normalised_table
from linrec.report import paper
from linrec.report.claims import Claim
from linrec.stats import Correlation, correlation, stratified_correlation

NORMALISED = {"standardise": "standardised", "whiten": "whitened"}
"""How each normalisation kind reads in a sentence or a legend."""


# ---------------------------------------------------------------------------------------------
# Inputs: conditioning and normalisation.


def conditioning_table(measurement: ProfileMeasurement) -> pd.DataFrame:
    """Per block: the k-fold table, whose input statistics (``input_rms``, ``effective_rank_in``, ``outlier_ratio``,
    :data:`linrec.core.fit.COLUMNS`) describe the inputs' scale and shape, plus ``log10_condition`` (of
    ``input_condition``, the covariance's over its non-null spectrum). A measurement that kept only its table
    suffices."""
    table = measurement.table()
    table["log10_condition"] = np.log10(table["input_condition"].astype(float))
    return table


def predictor_table(
    table: pd.DataFrame,
    columns: Sequence[str] = ("log10_condition", "effective_rank_in", "outlier_ratio", "input_rms"),
    method: str = "spearman",
    level: float = 0.95,
) -> pd.DataFrame:
    """Correlation of R²_lin with each input statistic in ``columns`` across blocks, within each model.

    One row per statistic: the within-model correlations combined (:func:`linrec.stats.stratified_correlation`)
    with their interval, each model's own r, and the correlation pooled over all models' blocks for comparison
    only: pooled, a family with both higher values of a statistic and lower R²_lin makes a correlation that no
    single model shows (Simpson's paradox).
    """
    if table.groupby("model").size().max() < 4:
        raise LinrecError("a correlation within models needs a model with at least 4 blocks")
    rows = {}
    for column in columns:
        within = stratified_correlation(table["r2_lin"], table[column], table["model"], method, level)
        c = within.combined
        rows[column] = {
            f"{method} r within models": c.r,
            f"{level:.0%} CI": f"[{c.low:+.2f}, {c.high:+.2f}]",
            "per model": ", ".join(f"{m} {g.r:+.2f}" for m, g in within.groups.items()),
            "pooled r (not used)": correlation(table["r2_lin"], table[column], method, level).r,
            "blocks": c.n,
        }
    return pd.DataFrame(rows).T


def normalisation_table(
    net: nn.Module, measurement: ProfileMeasurement, kinds: Sequence[str] = NORMALISATIONS, rcond: float | None = None
) -> pd.DataFrame:
    """R²_lin of each block on its own sampled inputs and on them standardised / whitened, one row per (kind, block).

    ``net`` is the measured model (its FFNs are run on the transformed rows). Columns as in
    :func:`linrec.interventions.crossfeed.normalised_table`, plus ``model``, ``checkpoint`` and ``change``
    (normalised minus own). ``rcond`` None: the capture dtype's cutoff (:attr:`~linrec.core.measure.Measurement.rcond`).
    """
    folds, rcond = measurement.info.folds, measurement.rcond if rcond is None else rcond
    table = pd.concat(
        [normalised_table(net, measurement.samples, kind, folds, rcond=rcond) for kind in kinds], ignore_index=True
    )
    table.insert(0, "checkpoint", measurement.info.checkpoint)
    table.insert(0, "model", measurement.info.model)
    table["change"] = table["r2_lin_norm"] - table["r2_lin"]
    return table


def measured_normalisation(
    profile: Profile, measurement: ProfileMeasurement, kinds: Sequence[str] = NORMALISATIONS, progress: bool = True
) -> pd.DataFrame:
    """:func:`normalisation_table` of one of the profile's cached measurements, computed once and cached (a real
    model's blocks cost minutes); the model is loaded only when the table is computed."""

    def compute() -> dict[str, pd.DataFrame]:
        net = load_profile_model(profile, measurement.info.model, measurement.info.checkpoint, progress=progress)[0]
        return {"normalised": normalisation_table(net, measurement, kinds)}

    content = {"measurement": measurement_identity(measurement), "kinds": list(kinds)}
    return cached_frames("normalisation", content, compute)["normalised"]


def normalisation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, normalisation): mean change of R²_lin, mean and largest absolute change over blocks."""
    return table.groupby(["model", "normalisation"], sort=False).agg(
        mean_change=("change", "mean"),
        mean_abs_change=("change", lambda c: c.abs().mean()),
        largest_abs_change=("change", lambda c: c.abs().max()),
    )


# ---------------------------------------------------------------------------------------------
# Cross-feeding: does R² follow the weights or the inputs?


@dataclass
class GridShares:
    """Whether cross-fed R²_lin follows the weights or the inputs (see :func:`grid_shares`)."""

    weights: float  # share of the grid's variance explained by which FFN runs (column means)
    inputs: float  # share explained by whose inputs it runs on (row means)
    interaction: float  # the rest: weights and inputs that matter only together
    follows_weights: Correlation  # cross-model cells: R² against the FFN's own-input R²
    follows_inputs: Correlation  # cross-model cells: R² against the input block's own R²
    cells: int
    own_gap: float  # mean over FFNs of R² on their own inputs minus R² on other models' inputs

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "value": [
                    self.weights,
                    self.inputs,
                    self.interaction,
                    self.follows_weights.r,
                    self.follows_inputs.r,
                    self.own_gap,
                ],
                "95% CI": [
                    "",
                    "",
                    "",
                    f"[{self.follows_weights.low:+.2f}, {self.follows_weights.high:+.2f}]",
                    f"[{self.follows_inputs.low:+.2f}, {self.follows_inputs.high:+.2f}]",
                    "",
                ],
            },
            index=[
                "variance share: weights (which FFN)",
                "variance share: inputs (whose activations)",
                "variance share: interaction",
                "r(cross-fed, FFN's own R²)",
                "r(cross-fed, input block's own R²)",
                "own inputs minus other models' inputs (mean ΔR² per FFN)",
            ],
        )


def grid_shares(
    grid: pd.DataFrame,
    models: Sequence[str] | None = None,
    level: float = 0.95,
) -> GridShares:
    """Two-way decomposition of a complete cross-feeding grid (restricted to ``models``) and two correlations.

    ``grid``: :func:`linrec.interventions.crossfeed.crossfeed_grid`.

    With G the grid (rows: input blocks, columns: FFN blocks), SS_total = Σ(G − Ḡ)² splits exactly
    into n_cols·Σ(row mean − Ḡ)² (inputs), n_rows·Σ(column mean − Ḡ)² (weights) and an
    interaction. The correlations use the cells where inputs and FFN come from different models,
    against the own-input R² (the diagonal cell) of the FFN's block and of the input block;
    ``own_gap`` is, averaged over FFNs, the diagonal cell minus the FFN's mean on other models' inputs
    (negative: a block is less linear on its own inputs than on foreign ones).
    """
    if models is not None:
        unknown = sorted(set(models) - set(grid["input_model"]))
        if unknown:
            raise LinrecError(f"the grid has no model {unknown}; it has {sorted(grid['input_model'].unique())}")
        grid = grid[grid["input_model"].isin(models) & grid["weight_model"].isin(models)]
    wide = grid.pivot_table(
        index=["input_model", "input_block"], columns=["weight_model", "weight_block"], values="r2_lin", aggfunc="first"
    )
    if wide.isna().any().any() or list(wide.index) != list(wide.columns):
        raise LinrecError("the grid is not complete: every block's FFN must be run on every block's inputs")
    g = wide.to_numpy(dtype=float)
    centred = g - g.mean()
    total = float((centred**2).sum())
    if total == 0:
        raise LinrecError("every cell of the grid has the same R²; nothing to attribute")
    inputs = g.shape[1] * float(((g.mean(1) - g.mean()) ** 2).sum()) / total
    weights = g.shape[0] * float(((g.mean(0) - g.mean()) ** 2).sum()) / total
    own = {key: g[k, k] for k, key in enumerate(wide.index)}
    cross = grid[grid["input_model"] != grid["weight_model"]]
    if len(cross) < 4:
        raise LinrecError("the grid needs inputs from at least two models to correlate cross-model cells")
    foreign = cross.groupby(["weight_model", "weight_block"])["r2_lin"].mean()
    own_gap = float(np.mean([own[key] - r for key, r in foreign.items()]))
    weight_own = [own[(m, b)] for m, b in zip(cross["weight_model"], cross["weight_block"])]
    input_own = [own[(m, b)] for m, b in zip(cross["input_model"], cross["input_block"])]
    return GridShares(
        weights,
        inputs,
        1 - weights - inputs,
        correlation(cross["r2_lin"], weight_own, "pearson", level),
        correlation(cross["r2_lin"], input_own, "pearson", level),
        len(grid),
        own_gap,
    )


def activation_claims(distances: pd.DataFrame, shares: Mapping[str, GridShares] | None = None) -> list[Claim]:
    """Chapter 3's descriptive numbers, none of them a test of "learned": the profile distance between families of
    one activation (the paper's GPT-2 against Pythia) and between two training seeds, and each cross-feeding
    grid's variance share of the weights. These separate weights from inputs, not learning from architecture (a
    weight pattern every model shares by design passes them all); :func:`linrec.analysis.learned.learned_claims`
    asks that question."""
    claims = []
    same_activation = distances[distances["kind"] == "family, same activation"]
    seeds = distances[distances["kind"] == "seed"]
    if len(same_activation):
        claims.append(
            Claim.measure(
                "profile distance between two families of one activation",
                same_activation["distance"].mean(),
                paper=paper.GPT2_VS_PYTHIA,
                unit="RMS ΔR²_lin",
                note="; ".join(f"{r.a} vs {r.b}: {r.distance:.3f}" for r in same_activation.itertuples())
                + (f"; two seeds of one architecture: {seeds['distance'].mean():.3f}" if len(seeds) else ""),
            )
        )
    if len(seeds):
        claims.append(
            Claim.measure(
                "profile distance between two training seeds",
                seeds["distance"].mean(),
                unit="RMS ΔR²_lin",
                note="; ".join(f"{r.a} vs {r.b}" for r in seeds.itertuples()),
            )
        )
    for label, s in (shares or {}).items():
        claims.append(
            Claim.measure(
                f"cross-feeding: variance share of the weights ({label})",
                s.weights,
                note=f"inputs {s.inputs:.2f}, interaction {s.interaction:.2f}; r with the FFN's own R² "
                f"{s.follows_weights.r:+.2f}, with the input block's {s.follows_inputs.r:+.2f}; own inputs "
                f"minus other models' inputs {s.own_gap:+.3f}",
            )
        )
    return claims
