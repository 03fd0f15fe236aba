"""Which score says which block to drop: the pruning scores against what dropping each block costs.

From :func:`linrec.experiment.pruning.pruning_costs` of several models:

* :func:`scored_blocks`: one row per model and block, every score beside every cost (ΔPPL of each kind alone).
* :func:`score_correlations`: Spearman's ρ of each score, read as a predicted cost (:data:`linrec.core.scores.COSTLIER`:
  R²s turned round, so that a good predictor has ρ > 0), with each cost; within each model, and combined over models
  (:func:`linrec.stats.bootstrap_correlation`, the interval a bootstrap over blocks).
* :func:`budget_table`: how many blocks, and how many numbers, each order drops before the joint ΔPPL passes the
  budget, next to the order that measures every block's own cost first.
* :func:`verdict`: the rule fixed before any number was seen (:data:`RULE`), applied; :func:`pruning_claims` the
  chapter's claims, with :func:`sink_swaps` (what the first position apart does to the sink blocks' swaps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from linrec.core.scores import COSTLIER, MEASURED, WHOLE_LAYER
from linrec.errors import LinrecError
from linrec.experiment.pruning import LAYER
from linrec.report.claims import Claim
from linrec.stats import bootstrap_correlation

TRUTHS = {
    "affine": "its FFN swapped for the affine map",
    "first-apart:mean": "the map with the first position apart (its mean there)",
    "first-apart:own": "the map with the first position apart (the block's own output there)",
    "mean": "its FFN replaced by its mean output",
    "zero": "its FFN removed",
    LAYER: "the whole block removed (attention and FFN)",
}
"""The costs each score is read against: ΔPPL of one block dropped alone, by each mechanism."""

RULE = (
    "For each mechanism (the affine swap, which linrec replace installs, and the removal of the whole block, which "
    "layer pruning does), the score that predicts its cost best is the one with the highest within-model Spearman ρ "
    "combined over the models; it is called a reliable guide only if the lower end of its 95 % interval is above 0.5, "
    "and better than another score only where its interval lies above that score's ρ. In the practical test, an order "
    "is as good as measuring when it drops as many blocks within the budget, summed over the models."
)
"""How the chapter reads the numbers, written before they were computed."""

MIN_BLOCKS = 4
"""The fewest blocks a model needs for its rank correlation to enter (an interval needs four)."""

RELIABLE = 0.5
"""The lower end of ρ's interval above which a score is a reliable guide (:data:`RULE`)."""


def scored_blocks(tables: Sequence[pd.DataFrame], costs: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row per model and block: its scores (those of :data:`linrec.core.scores.COSTLIER` the tables hold) and its
    ΔPPL for each kind of cost (columns named by :data:`TRUTHS`' keys)."""
    table = pd.concat(tables, ignore_index=True)
    cost = pd.concat(costs, ignore_index=True)
    missing = [c for c in ("model", "block", "kind", "delta_ppl") if c not in cost]
    if missing:
        raise LinrecError(f"the costs lack columns {missing}; pass pruning_costs(...)['costs']")
    wide = cost.pivot_table(index=["model", "block"], columns="kind", values="delta_ppl").reset_index()
    scores = [s for s in COSTLIER if s in table]
    return table[["model", "block", *scores]].merge(wide, on=["model", "block"], validate="one_to_one")


def score_correlations(blocks: pd.DataFrame, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Spearman's ρ between each score read as a cost (sign of :data:`linrec.core.scores.COSTLIER`) and each cost of
    :data:`TRUTHS` the table holds: ``score, cost, group`` (a model, or ``combined``), ``blocks, rho, low, high``
    (within a model the interval is a bootstrap over its blocks). Scores a model lacks (NaN), and models of fewer than
    :data:`MIN_BLOCKS` blocks, leave it out: no rows at all where no model has that many."""
    rows = []
    for score in [s for s in COSTLIER if s in blocks]:
        for cost in [c for c in TRUTHS if c in blocks]:
            known = blocks.dropna(subset=[score, cost])
            if known.empty:
                continue
            ranked = known.groupby("model", sort=False).filter(
                lambda part: len(part) >= MIN_BLOCKS and part[score].nunique() > 1 and part[cost].nunique() > 1  # noqa: B023
            )
            for model, part in ranked.groupby("model", sort=False):
                rho = bootstrap_correlation(COSTLIER[score] * part[score], part[cost], part.model, level, seed=seed)
                rows.append({"score": score, "cost": cost, "group": model, "blocks": rho.n, "rho": rho.r,
                             "low": rho.low, "high": rho.high})  # fmt: skip
            if ranked.model.nunique() > 1:
                rho = bootstrap_correlation(
                    COSTLIER[score] * ranked[score], ranked[cost], ranked.model, level, seed=seed
                )
                rows.append({"score": score, "cost": cost, "group": "combined", "blocks": rho.n, "rho": rho.r,
                             "low": rho.low, "high": rho.high})  # fmt: skip
    return pd.DataFrame(rows, columns=["score", "cost", "group", "blocks", "rho", "low", "high"])


def budget_table(walks: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per model, mechanism and order: the blocks dropped and numbers saved at the last step within the budget, that
    step's joint ΔPPL, and the blocks the measured order drops (``measured_blocks``)."""
    steps = pd.concat(walks, ignore_index=True)
    kept = steps[steps.kept].sort_values("step").groupby(["model", "mechanism", "order"], sort=False).last()
    out = kept.reset_index()[["model", "mechanism", "order", "blocks", "numbers_saved", "delta_ppl"]]
    measured = out[out.order == MEASURED].set_index(["model", "mechanism"]).blocks
    out["measured_blocks"] = [measured.get((m, k)) for m, k in zip(out.model, out.mechanism, strict=True)]
    return out


def verdict(correlations: pd.DataFrame, budget: pd.DataFrame) -> dict[str, Mapping[str, object]]:
    """:data:`RULE` applied, per mechanism (``affine``, the whole block): the best score, its combined ρ and interval,
    whether it is reliable, the scores it is better than, and the orders that drop as many blocks as measuring."""
    out: dict[str, Mapping[str, object]] = {}
    for mechanism in ("affine", LAYER):
        rho = correlations[(correlations.cost == mechanism) & (correlations.group == "combined")]
        if rho.empty:
            continue
        best = rho.sort_values("rho", ascending=False, kind="stable").iloc[0]
        drops = budget[budget.mechanism == mechanism].groupby("order").blocks.sum()
        out[mechanism] = {
            "best": best.score,
            "rho": float(best.rho),
            "low": float(best.low),
            "high": float(best.high),
            "reliable": bool(best.low > RELIABLE),
            "better_than": [s for s, r in zip(rho.score, rho.rho, strict=True) if s != best.score and best.low > r],
            "as_good_as_measuring": [o for o, n in drops.items() if o != MEASURED and n >= drops.get(MEASURED, 0)],
            "whole_layer_scores": [s for s in WHOLE_LAYER if s in set(rho.score)],
        }
    return out


SINK = 0.5
"""A block whose first position carries at least this share of its output variance is a sink block (chapter 2)."""

FIRST_APART_GAIN = 0.1
"""The first position apart rescues a sink block's swap when it costs at most this share of the plain affine swap ...
"""

NEGLIGIBLE = 0.01
"""... or at most this share of the model's perplexity (a swap that was cheap already stays cheap)."""


def summary_row(correlations: pd.DataFrame, score: str, cost: str) -> pd.Series | None:
    """ρ of ``score`` with ``cost``: combined over models where there are several, else the one model's; None where
    it could not be computed."""
    rows = correlations[(correlations.score == score) & (correlations.cost == cost)]
    combined = rows[rows.group == "combined"]
    chosen = combined if not combined.empty else rows
    return None if len(chosen) != 1 else chosen.iloc[0]


def sink_swaps(table: pd.DataFrame, costs: pd.DataFrame, sink: float = SINK) -> pd.DataFrame:
    """The sink blocks (first position's share of the output variance at least ``sink``) of each model, with what
    swapping each alone costs by the plain affine map and with the first position apart."""
    kinds = ["affine", "first-apart:mean", "first-apart:own"]
    chosen = costs[costs.kind.isin(kinds)]
    wide = chosen.pivot_table(index=["model", "block"], columns="kind", values="delta_ppl")
    base = chosen.groupby(["model", "block"]).base_ppl.first()
    shares = table.set_index(["model", "block"]).first_position_share
    out = wide.join(shares, how="inner").join(base).reset_index()
    return out[out.first_position_share >= sink][["model", "block", "first_position_share", "base_ppl", *kinds]]


def pruning_claims(correlations: pd.DataFrame, budget: pd.DataFrame, sinks: pd.DataFrame) -> list[Claim]:
    """The chapter's claims: whether R²_lin orders the affine swaps by cost (the book's reading of the paper's
    safety signal), which score orders each mechanism's cost best (:func:`verdict`), how many blocks each drops in
    the practical test, and whether the first position apart rescues every sink block's swap."""
    said = verdict(correlations, budget)
    claims = []
    r2 = summary_row(correlations, "r2_lin", "affine")
    claims.append(Claim.check(
        "R²_lin orders the affine swaps by their cost",
        "implied: a block of low R²_lin is an unsafe swap (the safety signal of chapter 5)",
        "no ρ" if r2 is None else f"ρ = {r2.rho:+.2f} [{r2.low:+.2f}, {r2.high:+.2f}] over {r2.blocks} blocks",
        None if r2 is None else bool(r2.low > RELIABLE),
        value=None if r2 is None else float(r2.rho), interval=None if r2 is None else (float(r2.low), float(r2.high)),
        rule=f"yes when the lower end of the 95 % interval of the within-model Spearman ρ (R²_lin read as a cost) "
        f"with the affine swap's ΔPPL is above {RELIABLE}",
    ))  # fmt: skip
    for mechanism, reading in said.items():
        claims.append(Claim.measure(
            f"the score that best orders the cost of {TRUTHS[mechanism]}",
            f"{reading['best']}: ρ = {reading['rho']:+.2f} [{reading['low']:+.2f}, {reading['high']:+.2f}]"
            f"{'' if reading['reliable'] else ', not a reliable guide'}",
            interval=(float(reading["low"]), float(reading["high"])),  # type: ignore[arg-type]
        ))  # fmt: skip
        dropped = budget[budget.mechanism == mechanism].groupby("order").blocks.sum()
        claims.append(Claim.measure(
            f"blocks dropped within the budget by {TRUTHS[mechanism]}, summed over the models",
            ", ".join(f"{order} {int(n)}" for order, n in dropped.sort_values(ascending=False).items()),
        ))  # fmt: skip
    if sinks.empty:
        claims.append(Claim.check(
            "the first position apart makes every sink block's swap cheap", "not in the paper",
            f"no block's first position carries {SINK:.0%} of its output variance", None,
            rule="untestable where no block is a sink block",
        ))  # fmt: skip
    else:
        rescued = sinks["first-apart:own"] <= (FIRST_APART_GAIN * sinks["affine"]).clip(
            lower=NEGLIGIBLE * sinks.base_ppl
        )
        pairs = zip(sinks.model, sinks.block, sinks["affine"], sinks["first-apart:own"], strict=True)
        named = ", ".join(f"{m} block {b}: {a:+.3g} → {o:+.3g}" for m, b, a, o in pairs)
        claims.append(Claim.check(
            "the first position apart makes every sink block's swap cheap",
            "not in the paper",
            named,
            bool(rescued.all()),
            rule=f"yes when, for every block whose first position carries at least {SINK:.0%} of its output variance, "
            f"the swap with the first position apart (the block's own output there) costs at most "
            f"{FIRST_APART_GAIN:.0%} of the plain affine swap's ΔPPL, or at most {NEGLIGIBLE:.0%} of the model's "
            "perplexity; untestable where no block is a sink block",
        ))  # fmt: skip
    return claims
