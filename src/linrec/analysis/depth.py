"""Comparing depth profiles of R²_lin: across models, seeds, checkpoints, corpora and input sources.

A *depth profile* is R²_lin of every FFN block of one model, at one checkpoint, on one corpus: the
rows of :meth:`linrec.experiment.measurement.Measurement.table` for that measurement. The chapters on
heterogeneity, activation independence, corpus robustness and training dynamics all ask how such
profiles differ, so the comparisons live here, once:

* :func:`depth_table` stacks measurements into one tidy table (with each checkpoint's optimiser
  step, from :func:`training_checkpoints`); :func:`depth_summary` gives each profile's range, its
  largest jump between adjacent blocks and whether it is monotone, judged against the k-fold
  spread; :func:`heterogeneity_claims` checks the paper's claim part by part.
* :func:`profile_distance` is the root-mean-square difference of two profiles over their blocks;
  :func:`distance_table` labels every pair of profiles by what separates them (a seed, the family,
  or training); :func:`drift_table` and :func:`training_summary` follow one model across
  checkpoints, :func:`corpus_summary` across corpora.
* :func:`crossfeed_grid` runs every block's FFN on every block's captured inputs (all models of
  one width) and :func:`grid_shares` asks whether the cross-fed R² follows the weights or the inputs:
  a two-way decomposition of the grid's variance and two correlations with the own-input values.
* :func:`conditioning_table` (input scale, effective rank and outlier ratio per block, beside the
  conditioning the closed-form fit reports) with :func:`predictor_table`, and
  :func:`normalisation_table` (R²_lin on standardised and whitened inputs,
  :func:`linrec.interventions.crossfeed.normalised_table`) with :func:`normalisation_summary`, characterise the
  inputs.
* :func:`swap_table` is the zero-shot swap: each block's FFN replaced by its closed-form map, ΔPPL
  on the eval split of a corpus (:func:`linrec.interventions.perplexity.swap_deltas`).
* :func:`activation_verdict` turns the activation chapter's measurements into one row per test whose
  every number, and the direction it points, comes from the data under a fixed rule.
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from linrec.interventions.crossfeed import crossfeed, normalised_table
from linrec.core.normalise import NORMALISATIONS
from linrec.errors import LinrecError
from linrec.report.claims import Claim, claims_table
from linrec.experiment.measurement import Measurement
from linrec.core.moments import merge_folds
from linrec.interventions.perplexity import swap_deltas
from linrec.stats import Correlation, correlation
from linrec.experiment.profiles import Profile, get_profile
from linrec.experiment.resolve import profile_batches, profile_corpus
from linrec.core.fit import DEFAULT_RCOND
from linrec.stats import participation_ratio
from linrec.core.sample import Rows
from linrec.interventions.surgery import fit_replacements, ffn_site
from linrec.models.zoo import zoo_record

PROFILE_KEYS = ("model", "checkpoint", "corpus")
"""The columns that name one depth profile in a stacked table."""

NORMALISED = {"standardise": "standardised", "whiten": "whitened"}
"""How each normalisation kind reads in a sentence or a legend."""


# ---------------------------------------------------------------------------------------------
# Checkpoints and stacked tables.


def checkpoint_step(name: str) -> int | None:
    """The optimiser step of a checkpoint named ``step<N>`` (None for any other name)."""
    match = re.fullmatch(r"step(\d+)", name)
    return int(match.group(1)) if match else None


def training_checkpoints(profile: str | Profile, model: str) -> list[tuple[str, int | None]]:
    """(name to measure with, optimiser step) of each checkpoint of ``model``, first to last.

    Zoo checkpoints are ``step<N>``; the first is named ``"init"`` and the last ``"final"`` (the
    same weights), so a chapter measuring along training shares its cached measurements with the
    chapters that measure ``init`` and ``final``. Hub checkpoints keep their revision names, except
    the first, ``"init"`` (as :func:`linrec.experiment.resolve.load_profile_model` resolves it).
    """
    profile = get_profile(profile)
    names = profile.checkpoints(model)
    if len(names) == 1:
        return [(names[0], checkpoint_step(names[0]))]
    out = []
    for i, name in enumerate(names):
        alias = "init" if i == 0 else ("final" if i == len(names) - 1 and profile.zoo is not None else name)
        out.append((alias, checkpoint_step(name)))
    return out


def depth_table(measurements: Iterable[Measurement], profile: str | Profile | None = None) -> pd.DataFrame:
    """Every measurement's k-fold table, stacked; with ``profile``, a ``step`` column (None where unknown)."""
    tables = [m.table() for m in measurements]
    if not tables:
        raise LinrecError("no measurements to tabulate; measure at least one (model, checkpoint, corpus)")
    table = pd.concat(tables, ignore_index=True)
    if profile is not None:
        steps = {(m, name): step for m in table["model"].unique()
                 for name, step in training_checkpoints(profile, m)}
        table.insert(3, "step", [steps.get((m, c), checkpoint_step(c))
                                 for m, c in zip(table["model"], table["checkpoint"])])
        table["step"] = table["step"].astype("Int64")
    return table


def _profiles(table: pd.DataFrame, by: Sequence[str]) -> Iterable[tuple[tuple, pd.DataFrame]]:
    missing = [c for c in (*by, "block", "r2_lin") if c not in table.columns]
    if missing:
        raise LinrecError(f"the table has no column {missing}; columns: {', '.join(table.columns)}")
    for key, group in table.groupby(list(by), sort=False):
        if group["block"].duplicated().any():
            raise LinrecError(f"profile {dict(zip(by, key))} has a block more than once; group by more columns "
                              f"(e.g. {', '.join(c for c in PROFILE_KEYS if c not in by)})")
        yield key, group.sort_values("block")


# ---------------------------------------------------------------------------------------------
# One profile: range, jumps, monotonicity.


def depth_summary(table: pd.DataFrame, by: Sequence[str] = ("model",), sigmas: float = 2.0) -> pd.DataFrame:
    """Per profile: the range of R²_lin over blocks, the largest jump between adjacent blocks, and shape.

    A step between adjacent blocks counts as a rise or a fall only when its size exceeds
    ``sigmas`` times the combined k-fold spread, √(sd_i² + sd_{i+1}²); a profile is non-monotone
    when it has at least one significant rise and one significant fall. ``jump_sigma`` is the
    largest jump in those units (inf when both blocks have zero spread).
    """
    rows = []
    for key, g in _profiles(table, by):
        r2 = g["r2_lin"].to_numpy(dtype=float)
        sd = g["r2_lin_std"].to_numpy(dtype=float) if "r2_lin_std" in g else np.zeros_like(r2)
        blocks = g["block"].to_numpy()
        step = np.diff(r2)
        noise = np.sqrt(sd[:-1] ** 2 + sd[1:] ** 2)
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row.update({"blocks": len(r2), "r2_min": r2.min(), "block_min": int(blocks[r2.argmin()]),
                    "r2_max": r2.max(), "block_max": int(blocks[r2.argmax()]), "r2_range": r2.max() - r2.min(),
                    "mean_fold_std": sd.mean()})
        if len(r2) > 1:
            j = int(np.abs(step).argmax())
            big = np.abs(step) > sigmas * noise
            row.update({"max_jump": abs(step[j]), "jump": f"{blocks[j]}→{blocks[j + 1]}",
                        "jump_sigma": abs(step[j]) / noise[j] if noise[j] > 0 else math.inf,
                        "rises": int((big & (step > 0)).sum()), "falls": int((big & (step < 0)).sum())})
        else:
            row.update({"max_jump": 0.0, "jump": "", "jump_sigma": 0.0, "rises": 0, "falls": 0})
        row["non_monotone"] = row["rises"] > 0 and row["falls"] > 0
        rows.append(row)
    return pd.DataFrame(rows)


def heterogeneity_claims(table: pd.DataFrame, high: float = 0.99, low: float = 0.3,
                         sigmas: float = 2.0) -> pd.DataFrame:
    """The paper's heterogeneity claim, part by part, against a depth table of trained models.

    One row per part: near-linear blocks (R²_lin > ``high``), strongly nonlinear blocks (< ``low``),
    both between *adjacent* blocks, and a non-monotone profile (:func:`depth_summary` with
    ``sigmas``); ``this run (measured)`` says what was found and ``reproduced`` is "yes" or "no".
    """
    summary = depth_summary(table, by=("model",), sigmas=sigmas)
    top = table.loc[table["r2_lin"].idxmax()]
    bottom = table.loc[table["r2_lin"].idxmin()]
    best = summary.loc[summary["max_jump"].idxmax()]
    adjacent = False
    for _, g in _profiles(table, ("model",)):
        r2 = g["r2_lin"].to_numpy()
        pairs = np.stack([r2[:-1], r2[1:]])
        adjacent |= bool(((pairs.max(0) > high) & (pairs.min(0) < low)).any())
    shaped = summary[summary["non_monotone"]]
    return claims_table([
        Claim.check("near-linear blocks", f"R²_lin > {high}",
                    f"highest {top['r2_lin']:.3f} ({top['model']}, block {top['block']})", top["r2_lin"] > high),
        Claim.check("strongly nonlinear blocks", f"R²_lin < {low}",
                    f"lowest {bottom['r2_lin']:.3f} ({bottom['model']}, block {bottom['block']})", bottom["r2_lin"] < low),
        Claim.check("both, between adjacent blocks", f"from > {high} to < {low}",
                    f"largest adjacent jump {best['max_jump']:.3f} ({best['model']}, blocks {best['jump']}, "
                    f"{best['jump_sigma']:.1f} k-fold std)", adjacent),
        Claim.check("non-monotone in depth", "yes", f"{len(shaped)} of {len(summary)} models (steps beyond {sigmas:g} "
                    "k-fold std both up and down)", len(shaped) > 0),
    ])


# ---------------------------------------------------------------------------------------------
# Pairs of profiles: distances and what separates them.


def _rms(a: pd.Series, b: pd.Series) -> float:
    """Root-mean-square difference of two series on the same index."""
    return float(np.sqrt(((a - b.loc[a.index]) ** 2).mean()))


def profile_distance(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """Root-mean-square difference of R²_lin between two profiles (tables with block, r2_lin) over their blocks."""
    ra, rb = a.set_index("block")["r2_lin"], b.set_index("block")["r2_lin"]
    if set(ra.index) != set(rb.index):
        raise LinrecError(f"the profiles cover different blocks ({sorted(ra.index)} and {sorted(rb.index)}); "
                          "compare models of the same depth")
    return _rms(ra, rb)


ACTIVATIONS = {"gpt2": "GELU", "gpt_neox": "GELU", "llama": "gated SiLU", "mistral": "gated SiLU",
               "qwen2": "gated SiLU"}
"""The MLP nonlinearity of each causal family (GPT-2 and GPT-NeoX: GELU; Llama-style: SwiGLU)."""


@dataclass(frozen=True)
class Identity:
    """What a profile is of: the model's family and seed, and whether it was trained."""

    family: str
    seed: int | None
    trained: bool

    @property
    def activation(self) -> str | None:
        return ACTIVATIONS.get(self.family)


def model_identity(profile: str | Profile, model: str, net: nn.Module | None = None) -> tuple[str, int | None]:
    """(family, seed) of one of the profile's models: from the zoo entry, else from ``net.config`` (seed unknown)."""
    profile = get_profile(profile)
    profile.check_model(model)
    if profile.zoo is not None:
        entry = profile.zoo.entry(model)
        return entry.family, entry.seed
    if net is None:
        raise LinrecError(f"'{model}' is a hub model: pass the loaded model (net=...) so its family can be read "
                          "from its config")
    return net.config.model_type, None


KINDS = ("seed", "family, same activation", "family, other activation", "training")
"""What can separate two profiles (:func:`pair_kind`); the first three get " (init)" when both are untrained."""


def pair_kind(a: Identity, b: Identity) -> str | None:
    """What alone separates two profiles (one of :data:`KINDS`), or None when no single factor does.

    ``"training"``: a model against its own initialisation. Between two trained (or two untrained)
    models: ``"seed"`` (same family), or the family when the seed is the same (in the zoo a seed
    also fixes the order of the training batches), split by whether the MLP activation is the same
    (GPT-2 and GPT-NeoX) or not; suffixed ``" (init)"`` when both are untrained.
    """
    same_family = a.family == b.family
    same_seed = a.seed == b.seed  # (two hub models, seed None, count as alike: nothing else is known)
    if a.trained != b.trained:
        return "training" if same_family and same_seed else None
    suffix = "" if a.trained else " (init)"
    if not same_family:
        if not same_seed:
            return None
        same = a.activation is not None and a.activation == b.activation
        return ("family, same activation" if same else "family, other activation") + suffix
    return None if same_seed or a.seed is None or b.seed is None else "seed" + suffix


def distance_table(table: pd.DataFrame, identities: Mapping[str, tuple[str, int | None]],
                   untrained: Sequence[str] = ("init",)) -> pd.DataFrame:
    """RMS distance between every pair of (model, checkpoint) profiles in ``table`` that one factor separates.

    ``identities`` maps each model to (family, seed) (:func:`model_identity`); checkpoints named in
    ``untrained`` count as untrained. Columns: ``kind`` (:func:`pair_kind`), ``a, b`` (model @
    checkpoint), ``distance``, ``mean_difference`` (mean R²_lin of a minus that of b).
    """
    if table["corpus"].nunique() != 1:
        raise LinrecError(f"compare profiles on one corpus; the table has {sorted(table['corpus'].unique())}")
    unknown = sorted(set(table["model"]) - set(identities))
    if unknown:
        raise LinrecError(f"no (family, seed) for {unknown}; give identities for every model in the table")
    profiles = list(_profiles(table, ("model", "checkpoint")))
    rows = []
    for ((ma, ca), ga), ((mb, cb), gb) in itertools.combinations(profiles, 2):
        ia = Identity(*identities[ma], trained=ca not in untrained)
        ib = Identity(*identities[mb], trained=cb not in untrained)
        kind = pair_kind(ia, ib)
        if kind is None:
            continue
        if kind == "training" and ia.trained:  # list the pair as (init, trained)
            (ma, ca, ga), (mb, cb, gb) = (mb, cb, gb), (ma, ca, ga)
        rows.append({"kind": kind, "a": f"{ma} @ {ca}", "b": f"{mb} @ {cb}", "distance": profile_distance(ga, gb),
                     "mean_difference": float(ga["r2_lin"].mean() - gb["r2_lin"].mean())})
    return pd.DataFrame(rows, columns=["kind", "a", "b", "distance", "mean_difference"])


def drift_table(table: pd.DataFrame, reference: str = "final") -> pd.DataFrame:
    """Per (model, checkpoint): RMS distance of the profile to the same model's ``reference`` checkpoint."""
    rows = []
    for model, g in table.groupby("model", sort=False):
        ref = g[g["checkpoint"] == reference]
        if ref.empty:
            raise LinrecError(f"model '{model}' has no '{reference}' checkpoint in the table; checkpoints: "
                              f"{', '.join(g['checkpoint'].unique())}")
        for checkpoint, h in g.groupby("checkpoint", sort=False):
            rows.append({"model": model, "checkpoint": checkpoint, "step": h["step"].iloc[0] if "step" in h else None,
                         "distance_to_" + reference: profile_distance(h, ref), "mean_r2": h["r2_lin"].mean()})
    return pd.DataFrame(rows)


def training_summary(table: pd.DataFrame, reference: str = "final", sigmas: float = 2.0) -> pd.DataFrame:
    """Per model: its profile at the first and last checkpoint, and when the final profile took shape.

    Columns: ``first, last`` (checkpoint names, in step order), ``mean_first, range_first,
    mean_last, range_last`` (R²_lin over blocks), ``non_monotone_last`` (:func:`depth_summary`),
    ``distance_first`` (RMS distance of the first profile to ``reference``) and ``halfway_step``:
    the first step whose profile is within half that distance of the reference.
    """
    missing = [c for c in ("model", "checkpoint", "step", "block", "r2_lin") if c not in table.columns]
    if missing:
        raise LinrecError(f"the table has no column {missing}; build it with depth_table(..., profile=...)")
    drift = drift_table(table, reference)
    shape = depth_summary(table, by=("model", "checkpoint"), sigmas=sigmas)
    rows = []
    for model, d in drift.groupby("model", sort=False):
        d = d.sort_values("step")
        first, last = d.iloc[0], d.iloc[-1]
        s_first = shape[(shape["model"] == model) & (shape["checkpoint"] == first["checkpoint"])].iloc[0]
        s_last = shape[(shape["model"] == model) & (shape["checkpoint"] == last["checkpoint"])].iloc[0]
        start = first["distance_to_" + reference]
        halfway = d.loc[d["distance_to_" + reference] <= start / 2, "step"]
        rows.append({"model": model, "first": first["checkpoint"], "last": last["checkpoint"],
                     "mean_first": first["mean_r2"], "range_first": s_first["r2_range"], "mean_last": last["mean_r2"],
                     "range_last": s_last["r2_range"], "non_monotone_last": bool(s_last["non_monotone"]),
                     "distance_first": start, "halfway_step": halfway.iloc[0] if len(halfway) else None})
    return pd.DataFrame(rows)


def corpus_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: how far its profiles on different corpora are apart, against how much depth changes R²_lin.

    Columns: ``corpora``; ``depth_range`` (range of R²_lin over blocks, averaged over corpora);
    ``corpus_spread_mean`` / ``corpus_spread_max`` (per block, max − min of R²_lin over corpora,
    averaged / maximised over blocks); ``spread_to_range`` (their mean spread over the depth range:
    small means the profiles overlay); ``distance_mean`` (mean RMS distance over corpus pairs);
    ``spearman_min`` (the lowest rank correlation across blocks between two corpora's profiles).
    """
    rows = []
    for (model, checkpoint), g in table.groupby(["model", "checkpoint"], sort=False):
        wide = g.pivot(index="block", columns="corpus", values="r2_lin").sort_index()
        if wide.shape[1] < 2:
            raise LinrecError(f"model '{model}' is measured on one corpus only; corpus robustness needs two or more")
        if wide.isna().any().any():
            raise LinrecError(f"model '{model}': not every corpus covers every block")
        spread = wide.max(axis=1) - wide.min(axis=1)
        depth_range = float((wide.max() - wide.min()).mean())
        pairs = list(itertools.combinations(wide.columns, 2))
        rows.append({
            "model": model, "checkpoint": checkpoint, "corpora": wide.shape[1], "depth_range": depth_range,
            "corpus_spread_mean": float(spread.mean()), "corpus_spread_max": float(spread.max()),
            "spread_to_range": float(spread.mean() / depth_range) if depth_range > 0 else math.inf,
            "distance_mean": float(np.mean([_rms(wide[a], wide[b]) for a, b in pairs])),
            "spearman_min": float(pd.Series([wide[a].corr(wide[b], method="spearman") for a, b in pairs]).min()),
        })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Inputs: conditioning and normalisation.


def conditioning_table(measurement: Measurement) -> pd.DataFrame:
    """Per block: the k-fold table plus the inputs' scale and shape, from the captured moments.

    Added columns: ``input_rms`` (√(tr Σ / d), Σ the input covariance), ``effective_rank_in``
    (participation ratio of Σ's eigenvalues: d for isotropic inputs, 1 for one dominant direction),
    ``outlier_ratio`` (largest per-dimension variance over the median one: outlier dimensions) and
    ``log10_condition`` (of ``input_condition``, the covariance's over its non-null spectrum).
    """
    table = measurement.table()
    extra = []
    for b in measurement.blocks:
        total = merge_folds(measurement.moments[b])
        cov = total.cxx / total.n
        var = cov.diagonal().clamp(min=0)
        median = float(var.median())
        extra.append({"block": b, "input_rms": float(var.mean().sqrt()),
                      "effective_rank_in": participation_ratio(torch.linalg.eigvalsh(cov)),
                      "outlier_ratio": float(var.max()) / median if median > 0 else math.inf})
    table = table.merge(pd.DataFrame(extra), on="block")
    table["log10_condition"] = np.log10(table["input_condition"].astype(float))
    return table


def predictor_table(table: pd.DataFrame, columns: Sequence[str] = ("log10_condition", "effective_rank_in",
                                                                     "outlier_ratio", "input_rms"),
                    method: str = "spearman", level: float = 0.95) -> pd.DataFrame:
    """Correlation of R²_lin with each input statistic in ``columns`` across the table's blocks, with its CI."""
    rows = {}
    for column in columns:
        c = correlation(table["r2_lin"], table[column], method, level)
        rows[column] = {f"{method} r with R²_lin": c.r, f"{level:.0%} CI": f"[{c.low:+.2f}, {c.high:+.2f}]", "blocks": c.n}
    return pd.DataFrame(rows).T


def normalisation_table(net: nn.Module, measurement: Measurement, kinds: Sequence[str] = NORMALISATIONS,
                        rcond: float = DEFAULT_RCOND) -> pd.DataFrame:
    """R²_lin of each block on its own sampled inputs and on them standardised / whitened, one row per (kind, block).

    ``net`` is the measured model (its FFNs are run on the transformed rows). Columns as in
    :func:`linrec.interventions.crossfeed.normalised_table`, plus ``model``, ``checkpoint`` and ``change``
    (normalised minus own).
    """
    folds = measurement.info.folds
    table = pd.concat([normalised_table(net, measurement.samples, kind, folds, rcond=rcond) for kind in kinds], ignore_index=True)
    table.insert(0, "checkpoint", measurement.info.checkpoint)
    table.insert(0, "model", measurement.info.model)
    table["change"] = table["r2_lin_norm"] - table["r2_lin"]
    return table


def normalisation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, normalisation): mean change of R²_lin, mean and largest absolute change over blocks."""
    return table.groupby(["model", "normalisation"], sort=False)["change"].agg(
        mean_change="mean", mean_abs_change=lambda c: c.abs().mean(), largest_abs_change=lambda c: c.abs().max())


# ---------------------------------------------------------------------------------------------
# Cross-feeding: does R² follow the weights or the inputs?


def crossfeed_grid(samples: Mapping[str, Mapping[int, Rows]], models: Mapping[str, nn.Module], folds: int,
                   blocks: Sequence[int] | None = None, rcond: float = DEFAULT_RCOND,
                   progress: bool = False) -> pd.DataFrame:
    """k-fold R²_lin of every block's FFN on every block's captured inputs (every model of ``samples``).

    ``samples[m]`` are model m's sampled rows per block (``Measurement.samples``) and ``models[m]``
    the model itself; all must share one width. ``blocks``: which blocks of each model take part
    (default: all sampled). A cell with the same model and block is the block on its own inputs.
    Columns: ``input_model, input_block, weight_model, weight_block, r2_lin, r2_lin_std``.
    """
    missing = sorted(set(samples) - set(models))
    if missing:
        raise LinrecError(f"no model given for {missing}; pass every model whose inputs are in the grid")
    for m in samples:
        absent = sorted(set(blocks or ()) - set(samples[m]))
        if absent:
            raise LinrecError(f"model '{m}' has no sampled rows for blocks {absent}; it has {sorted(samples[m])}")
    inputs = [(m, b) for m in samples for b in sorted(samples[m]) if blocks is None or b in blocks]
    cells = list(itertools.product(inputs, inputs))
    rows = []
    for (ma, i), (mb, j) in tqdm(cells, desc="cross-feeding", disable=not progress):
        report = crossfeed(samples[ma][i], ffn_site(models[mb], j)[2], folds, j, rcond)
        rows.append({"input_model": ma, "input_block": i, "weight_model": mb, "weight_block": j,
                     "r2_lin": report.r2_lin, "r2_lin_std": report.r2_lin_std})
    return pd.DataFrame(rows)


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
    same_activation: bool | None = None  # every model of the grid has one MLP activation (None: not known)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({
            "value": [self.weights, self.inputs, self.interaction, self.follows_weights.r, self.follows_inputs.r,
                      self.own_gap],
            "95% CI": ["", "", "", f"[{self.follows_weights.low:+.2f}, {self.follows_weights.high:+.2f}]",
                       f"[{self.follows_inputs.low:+.2f}, {self.follows_inputs.high:+.2f}]", ""],
        }, index=["variance share: weights (which FFN)", "variance share: inputs (whose activations)",
                  "variance share: interaction", "r(cross-fed, FFN's own R²)", "r(cross-fed, input block's own R²)",
                  "own inputs minus other models' inputs (mean ΔR² per FFN)"])


def grid_shares(grid: pd.DataFrame, models: Sequence[str] | None = None,
                identities: Mapping[str, tuple[str, int | None]] | None = None, level: float = 0.95) -> GridShares:
    """Two-way decomposition of a complete :func:`crossfeed_grid` (restricted to ``models``) and two correlations.

    ``identities`` (model -> (family, seed), :func:`model_identity`) records whether the grid's
    models share one MLP activation: only then can "follows the weights" mean "follows what
    training put there" rather than "follows the architecture".

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
    wide = grid.pivot_table(index=["input_model", "input_block"], columns=["weight_model", "weight_block"],
                            values="r2_lin", aggfunc="first")
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
    same = None
    if identities is not None:
        same = len({ACTIVATIONS.get(identities[m][0]) for m in set(grid["input_model"])}) == 1
    return GridShares(weights, inputs, 1 - weights - inputs,
                      correlation(cross["r2_lin"], weight_own, "pearson", level),
                      correlation(cross["r2_lin"], input_own, "pearson", level), len(grid), own_gap, same)


# ---------------------------------------------------------------------------------------------
# Zero-shot swap and training records.


def swap_table(profile: str | Profile, measurement: Measurement, net: nn.Module, tokenizer,
               corpus: str | None = None, max_tokens: int | None = None, progress: bool = False) -> pd.DataFrame:
    """ΔPPL of each block's FFN swapped alone for its closed-form affine map (fitted on all captured rows).

    Perplexity is scored on the eval split of ``corpus`` (default: the profile's ``eval_corpus``),
    ``max_tokens`` of it (default: the profile's ``eval_tokens``): text the fit never saw.
    ``net`` must be the measured model at the measured checkpoint. Columns: those of
    :func:`linrec.interventions.perplexity.swap_deltas` plus ``model, checkpoint, corpus`` (the fitted rows'),
    ``relative`` (ΔPPL / PPL, comparable across corpora), ``eval_corpus`` and ``eval_tokens``.
    """
    profile = get_profile(profile)
    text = profile_corpus(profile, corpus or profile.eval_corpus)
    batches = profile_batches(profile, tokenizer, text, split="eval", max_rows=max_tokens, model=net)
    table = swap_deltas(net, batches, fit_replacements(measurement.moments, "affine"), progress=progress)
    for i, column in enumerate(PROFILE_KEYS):
        table.insert(i, column, getattr(measurement.info, column))
    table["relative"] = table["delta_ppl"] / table["base_ppl"]
    table["eval_corpus"] = text.name
    table["eval_tokens"] = batches.n_rows
    return table


def training_losses(profile: str | Profile, model: str) -> pd.DataFrame:
    """Held-out loss (nats/token) per corpus at each saved checkpoint of a zoo model (empty for hub models).

    Columns: ``model, step, corpus, loss``; from the training record the zoo keeps (``zoo.json``).
    """
    profile = get_profile(profile)
    profile.check_model(model)
    if profile.zoo is None:
        return pd.DataFrame(columns=["model", "step", "corpus", "loss"])
    record = zoo_record(profile.zoo, model, progress=False)
    return pd.DataFrame([{"model": model, "step": c["step"], "corpus": corpus, "loss": loss}
                         for c in record["checkpoints"] for corpus, loss in c["eval_loss"].items()])


# ---------------------------------------------------------------------------------------------
# The activation chapter's verdict, computed.


SUPPORTS = ("learned", "architecture", "inputs", "weights", "inconclusive")
"""Which way a test of :func:`activation_verdict` points ("weights": R² follows the FFN that runs, in a
cross-feeding grid whose models differ in activation, so architecture and training are not separated)."""


def _kind_mean(distances: pd.DataFrame, kind: str) -> tuple[float, int]:
    d = distances.loc[distances["kind"] == kind, "distance"]
    return (float(d.mean()) if len(d) else math.nan), len(d)


def _lean(a: float, b: float, if_a: str, if_b: str) -> str:
    """``if_a`` when a is at least twice b, ``if_b`` when b is at least twice a, else inconclusive."""
    return if_a if a >= 2 * b else (if_b if b >= 2 * a else "inconclusive")


def activation_verdict(profiles: pd.DataFrame, distances: pd.DataFrame,
                       shares: Mapping[str, GridShares] | None = None, normalised: pd.DataFrame | None = None,
                       untrained: Sequence[str] = ("init",), sigmas: float = 2.0) -> pd.DataFrame:
    """The evidence on "learned, not architectural", one row per test: the comparison, its numbers, and which
    way it points (``supports``, one of :data:`SUPPORTS`).

    ``profiles``: the depth table of the compared models on one corpus, trained and, where
    available, untrained (checkpoints in ``untrained``); ``distances``: its :func:`distance_table`;
    ``shares``: :func:`grid_shares` of cross-feeding grids by label; ``normalised``:
    :func:`normalisation_table` rows. Tests without data are left out. A comparison points one way
    only when one quantity is at least twice the other (init against trained: in most models;
    cross-feeding: and the larger main effect is at least the interaction), except seed against
    family: "architecture"
    when families are at least twice as far apart as seeds, "learned" when no farther apart than
    seeds (for untrained profiles "architecture" then means: the starting point is the
    architecture's). Steps between blocks count when larger than ``sigmas`` k-fold spreads
    (:func:`depth_summary`).
    """
    rows = []
    summary = depth_summary(profiles, by=("model", "checkpoint"), sigmas=sigmas)
    trained = summary[~summary["checkpoint"].isin(untrained)]
    init = summary[summary["checkpoint"].isin(untrained)]
    both = sorted(set(init["model"]) & set(trained["model"]))
    if both:
        r_init, r_trained = (t.set_index("model").loc[both, "r2_range"] for t in (init, trained))
        steps = trained.set_index("model").loc[both, ["rises", "falls"]].sum(axis=1)
        grew = [m for m in both if r_trained[m] >= 2 * r_init[m] and steps[m] > 0]
        shrank = [m for m in both if r_init[m] >= 2 * r_trained[m]]
        d_train, n_train = _kind_mean(distances, "training")
        rows.append({"test": "block-to-block differences: trained vs random init",
                     "finding": "range of R²_lin over blocks, init → trained: "
                                + "; ".join(f"{m} {r_init[m]:.3f} → {r_trained[m]:.3f}" for m in both)
                                + f". {len(grew)} of {len(both)} models gained at least twice their initial range, with "
                                  f"significant steps; training moved each profile {d_train:.3f} (RMS, mean of "
                                  f"{n_train}) from its initialisation",
                     "supports": "learned" if 2 * len(grew) > len(both) else
                     ("architecture" if 2 * len(shrank) > len(both) else "inconclusive")})
    for suffix, state in (("", "trained"), (" (init)", "untrained")):
        d_seed, n_seed = _kind_mean(distances, "seed" + suffix)
        for kind in ("family, same activation", "family, other activation"):
            d_family, n_family = _kind_mean(distances, kind + suffix)
            if not (n_seed and n_family):
                continue
            rows.append({"test": f"{state}: seed vs {kind}",
                         "finding": f"RMS distance between {state} profiles {d_seed:.3f} for two seeds (n = {n_seed}) "
                                    f"and {d_family:.3f} between families (n = {n_family}); ratio "
                                    f"{d_family / d_seed if d_seed > 0 else math.inf:.1f}",
                         "supports": "architecture" if d_family >= 2 * d_seed else
                         ("learned" if d_family <= d_seed else "inconclusive")})
    for label, share in (shares or {}).items():
        rows.append({"test": f"cross-feeding ({label})",
                     "finding": f"the FFN's weights explain {share.weights:.0%} of the grid's variance, the inputs' source "
                                f"{share.inputs:.0%} (interaction {share.interaction:.0%}); across models, cross-fed R² "
                                f"correlates r = {share.follows_weights.r:+.2f} with the FFN's own R² and "
                                f"r = {share.follows_inputs.r:+.2f} with the input block's; on its own inputs an FFN "
                                f"scores {share.own_gap:+.3f} against other models' inputs ({share.cells} cells)",
                     "supports": _lean(share.weights, share.inputs,
                                       "learned" if share.same_activation else "weights", "inputs")
                     if max(share.weights, share.inputs) >= share.interaction else "inconclusive"})
    if normalised is not None and len(normalised) and len(trained):
        spread = float(trained["r2_range"].mean())
        for kind, g in normalised.groupby("normalisation", sort=False):
            change = float(g["change"].abs().mean())
            rows.append({"test": f"inputs {NORMALISED.get(kind, kind)}",
                         "finding": f"mean |ΔR²_lin| {change:.3f} when each block's inputs are {NORMALISED.get(kind, kind)}, "
                                    f"against a mean range of {spread:.3f} across trained blocks",
                         "supports": _lean(spread, change, "learned", "inputs")})
    return pd.DataFrame(rows, columns=["test", "finding", "supports"])
