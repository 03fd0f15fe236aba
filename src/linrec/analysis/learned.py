"""Learned or architectural: a model's trained depth profile against the same architecture with scale-matched
random weights.

Chapter 3's question, asked directly. If a block's linearity were set by the architecture (with the scale
training gives the weights), a model whose every weight matrix keeps its trained values but loses their
arrangement would score the same R²_lin; if the arrangement was learned, it would not. The control is
:mod:`linrec.models.controls`' ``permuted``: the entries of each matrix shuffled, each matrix keeping its
exact distribution of values. It is drawn with several seeds, and their spread is the yardstick:

* :func:`control_tables` measures a model's trained weights and its controls over seeds, on the profile's
  main corpus;
* :func:`control_bands` gives, per block, the controls' mean, seed spread and the prediction interval in
  which the trained value would fall if it were one more draw of the control;
* :func:`learned_claims` states the rule and applies it.

A random initialisation (``init``, packaged models only) is shown beside it as a description: its weights
have the initialiser's scale, not the trained one, so it does not enter the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from linrec.errors import LinrecError
from linrec.experiment.measurement import measurement
from linrec.experiment.profiles import Profile
from linrec.report.claims import Claim
from linrec.report.paper import Reported
from linrec.stats import t_quantile

WEIGHTS = {"final": "trained", "permuted": "permuted within each matrix", "init": "random init"}
"""What each kind of weights is called in tables and figures."""

MATCHED = WEIGHTS["permuted"]
"""The scale-matched control the verdict compares against."""

LEVEL = 0.95
"""Coverage of the per-block prediction interval: a control seed falls outside it 5 % of the time."""

MIN_SEEDS = 3
"""Fewest control seeds with which a seed spread is estimated at all (two give one difference)."""


def control_tables(
    profile: Profile,
    model: str,
    seeds: Sequence[int] | None = None,
    controls: Sequence[str] = ("permuted",),
    progress: bool = True,
) -> pd.DataFrame:
    """The k-fold table of ``model``'s trained weights and of each of ``controls`` at each of ``seeds`` (default:
    the profile's), on the profile's main corpus, with ``weights`` (:data:`WEIGHTS`) and ``seed`` (None: trained).

    ``init`` is a control of packaged models only (a zoo model's ``init`` is its own first checkpoint)."""
    seeds = list(profile.seeds if seeds is None else seeds)
    if not seeds:
        raise LinrecError("give at least one seed for the controls")
    unknown = sorted(set(controls) - (set(WEIGHTS) - {"final"}))
    if unknown:
        raise LinrecError(f"unknown control(s) {unknown}; choose from permuted, init")
    tables = [measurement(profile, model, keep="table", progress=progress).table().assign(weights=WEIGHTS["final"])]
    for control in controls:
        for seed in seeds:
            m = measurement(profile, model, checkpoint=f"{control}@{seed}", keep="table", progress=progress)
            tables.append(m.table().assign(weights=WEIGHTS[control], seed=seed))
    return pd.concat(tables, ignore_index=True).astype({"seed": "Int64"})


def control_bands(table: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """Per (model, block): the trained R²_lin against the scale-matched control's seeds.

    Columns ``model, block, trained, control_mean, control_sd, seeds, low, high, difference, departs``.
    [low, high] is the prediction interval for one more control seed, mean ± t(n−1)·sd·√(1 + 1/n) with n seeds
    (Student's t: with three seeds the spread itself is uncertain); ``departs`` is True where the trained value
    lies outside it. ``table``: :func:`control_tables` (one model, or several with a ``model`` column).
    """
    if not 0 < level < 1:
        raise LinrecError(f"the interval's level must lie in (0, 1); got {level}")
    table = table if "model" in table else table.assign(model="")
    trained = table[table["weights"] == WEIGHTS["final"]]
    controls = table[table["weights"] == MATCHED]
    if trained.empty or controls.empty:
        raise LinrecError(f"the table needs the trained weights and the '{MATCHED}' control (control_tables)")
    stats = controls.groupby(["model", "block"])["r2_lin"].agg(control_mean="mean", control_sd="std", seeds="count")
    bands = trained.set_index(["model", "block"])[["r2_lin"]].rename(columns={"r2_lin": "trained"}).join(stats)
    if bands["seeds"].isna().any():
        missing = bands.index[bands["seeds"].isna()].tolist()
        raise LinrecError(f"no control measured for (model, block) {missing}")
    n = bands["seeds"].astype(int)
    if (n < 2).any():
        raise LinrecError("a seed spread needs at least two control seeds per block")
    half = [t_quantile((1 + level) / 2, k - 1) * sd * math.sqrt(1 + 1 / k) for k, sd in zip(n, bands["control_sd"])]
    bands["low"] = bands["control_mean"] - half
    bands["high"] = bands["control_mean"] + half
    bands["difference"] = bands["trained"] - bands["control_mean"]
    bands["departs"] = (bands["trained"] < bands["low"]) | (bands["trained"] > bands["high"])
    return bands.reset_index().astype({"seeds": int})


CLAIM = "learned, not architectural: most blocks unlike their shuffled weights"


def _verdict(bands: pd.DataFrame, level: float, min_seeds: int) -> Claim:
    """:data:`CLAIM` judged on ``bands`` (see :func:`learned_claims`)."""
    paper = Reported(  # the paper's statement (its title), which it supports with two trained models, no control
        CLAIM, "learned, not architectural (shown by comparing two trained models, with no control)", "title; abstract"
    )
    seeds = int(bands["seeds"].min())
    rule = (
        f"reproduced when the trained R²_lin lies outside the shuffled-weights control's {level:.0%} prediction band "
        f"in more than half of the blocks (by chance: each block with probability {1 - level:.0%}); untestable with "
        f"fewer than {min_seeds} control seeds"
    )
    if seeds < min_seeds:
        return Claim.check(CLAIM, paper, f"{seeds} control seed(s); the rule needs {min_seeds}", None, rule=rule)
    departs = int(bands["departs"].sum())
    above = int((bands["departs"] & (bands["difference"] > 0)).sum())
    half = (bands["high"] - bands["low"]) / 2
    return Claim.check(
        CLAIM,
        paper,
        f"{departs} of {len(bands)} blocks outside ({above} above, {departs - above} below); median "
        f"|trained − control mean| {bands['difference'].abs().median():.3f} against a median "
        f"{level:.0%} half-width of {half.median():.3f} over {seeds} seeds",
        2 * departs > len(bands),
        value=departs / len(bands),
        rule=rule,
    )


def learned_claims(table: pd.DataFrame, level: float = LEVEL, min_seeds: int = MIN_SEEDS) -> list[Claim]:
    """The learned-versus-architectural test on :func:`control_tables`, and the median R²_lin of each kind of
    weights. With several models (a ``model`` column), the test is applied to all their blocks together and then
    to each model on its own (claims named with :meth:`Claim.of`), since one family can carry the pooled verdict.

    The rule, fixed before any result: the claim holds when the trained R²_lin lies outside the scale-matched
    control's ``level`` prediction interval (:func:`control_bands`) in a majority of the blocks. Basis: the
    statement is about the profile, so most of it must be unlike what the architecture gives at the trained
    scale; if the trained weights were one more draw of the control, each block would depart with probability
    1 − ``level``, and (blocks departing independently) a majority, m = ⌊B/2⌋ + 1 of B blocks, with probability
    at most C(B, m)(1 − level)^m: 1e-4 for B = 6 at 95 %. With fewer than ``min_seeds`` control seeds the spread
    is not estimated and the claim is untestable.
    """
    bands = control_bands(table, level)
    claims = [_verdict(bands, level, min_seeds)]
    models = list(dict.fromkeys(bands["model"]))
    if len(models) > 1:
        claims += [_verdict(bands[bands["model"] == m], level, min_seeds).of(m) for m in models]
    medians = table.groupby("weights", sort=False)["r2_lin"].median()
    summary = ", ".join(f"{name} {value:.2f}" for name, value in medians.items())
    return [*claims, Claim.measure("median R²_lin over blocks, by weights", summary)]
