"""The map for the many, the FFN for the few: what the gated blocks of :func:`linrec.experiment.gating.gating_study`
say, beside the study that proposed the gate.

* :func:`gated_summary`: one row per model and gated block: its measurement, the plain swap's and the first-position
  rule's cost, the better gate's largest share routed within :data:`BUDGET` of perplexity, the gate's cost at the
  share nearest the first-position rule's, and R² of the routed rows and of the gated block at :data:`READ_AT`.
* :func:`agreement_summary`: the gates trained on two texts, with the agreement two unrelated gates would reach by
  chance and Cohen's κ.
* :func:`relations`: Spearman's ρ of the largest share with R²_lin, the top rows' share and the first position's.
* :func:`beside_the_study`: the study's reported figures (:data:`STUDY`) beside this run's, each labelled.
* :func:`gating_claims`: the claims, each verdict by a rule fixed before any number was computed (:data:`RULE`).

The study is arXiv 2603.03459 (:data:`STUDY_CITATION`); its figures are quoted from its abstract, never computed
here, and its models (GPT-2, Pythia) are not the offline profile's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from linrec.analysis._tables import require_columns
from linrec.report.claims import Claim
from linrec.report.paper import Reported
from linrec.stats import bootstrap_correlation

STUDY_CITATION = (
    "Balogh, P. (2026). Half the Nonlinearity Is Wasted: Measuring and Reallocating the Transformer's MLP Budget. "
    "arXiv:2603.03459."
)
STUDY_NAME = "the study (arXiv 2603.03459)"
"""How a table or claim names the study: never "the paper", which is the one this book re-derives."""

STUDY_GATE = Reported("the gate", "one logistic classifier of d + 1 numbers per layer (769 in GPT-2)", "abstract")
STUDY_MODELS = Reported(
    "the models", "six models of 162M to 2.8B parameters, GPT-2 and Pythia, on three corpora", "abstract"
)
STUDY_ROUTED = Reported("tokens routed to the linear map at under 1 % perplexity cost", "25–56 % in GPT-2", "abstract")
STUDY_PYTHIA = Reported(
    "Pythia against GPT-2",
    "Pythia's linearization costs are higher; in Pythia-2.8B one layer of 32 (L3) narrowly beats baseline (−0.13 %)",
    "abstract",
)
STUDY_LARGE = Reported(
    "GPT-2 Large", "11 of 36 layers beat baseline with gating; no layer's all-linear cost exceeds 3.7 %", "abstract"
)
STUDY_CROSS = Reported(
    "routing carried to another corpus",
    "per-token routing lists built on one corpus show no correlation on another (r < 0.05)",
    "abstract",
)
STUDY: tuple[Reported, ...] = (STUDY_MODELS, STUDY_GATE, STUDY_ROUTED, STUDY_PYTHIA, STUDY_LARGE, STUDY_CROSS)
"""The study's figures the chapter sets beside its own, as its abstract states them (the study's, not this run's)."""

BUDGET = 0.01
"""A cost within this share of the model's perplexity is the study's "under 1 %"; a block whose plain affine swap
costs more is one the map alone cannot carry (a hard block)."""

STUDY_LOW = 0.25
"""The low end of the share the study routes to the map in GPT-2 within :data:`BUDGET` (25 %)."""

READ_AT = 0.9
"""The share at which the summary reads R² of the routed rows and of the gated block."""

KAPPA = 0.5
"""Cohen's κ at or above which two gates are said to route the same rows (half the way from chance to full
agreement)."""

FAMILIES = {"gpt2": "GPT-2", "gpt_neox": "GPT-NeoX (Pythia's)", "llama": "Llama", "gemma3_text": "Gemma 3"}
"""How an architecture (a config's ``model_type``) is named."""

RULE = (
    f"A block is hard when its plain affine swap costs more than {BUDGET:.0%} of the model's perplexity. The gate "
    f"carries a hard block when its better rule routes at least {STUDY_LOW:.0%} of the rows to the map (the low end "
    f"of the study's GPT-2 range) within {BUDGET:.0%} of perplexity. A gate does as well as the first position apart "
    "when, at the share of the grid nearest the rows the first-position rule routes, the better gate's ΔPPL is no "
    "larger than that rule's, in every hard block. GPT-NeoX is harder to route than GPT-2 when the median largest "
    "share over its gated blocks is below GPT-2's. Two gates route the same rows when the median Cohen's κ of gates "
    f"trained on two texts, over every gated block and held-out text, is at least {KAPPA}."
)
"""How the section reads its numbers, written before they were computed."""

RELATED = ("r2_lin", "r2_lin_after_first", "top_rows_share_after_first", "first_position_share")
"""The measurement's columns the largest share is set against (:func:`relations`)."""

MIN_BLOCKS = 4
"""The fewest gated blocks a rank correlation is computed over."""


def family_name(family: str) -> str:
    """An architecture's name for a reader (:data:`FAMILIES`), else ``family`` itself."""
    return FAMILIES.get(family, family)


_require = functools.partial(require_columns, study="gating_study")
"""The columns a table of :func:`~linrec.experiment.gating.gating_study` must have."""


def _at(curve: pd.DataFrame, share: float) -> pd.DataFrame:
    """The curve's rows at ``share``, one per model, rule and block."""
    return curve[np.isclose(curve.share, share)]


def gated_summary(
    curves: Sequence[pd.DataFrame], largest: Sequence[pd.DataFrame], blocks: Sequence[pd.DataFrame]
) -> pd.DataFrame:
    """One row per model and gated block, from :func:`~linrec.experiment.gating.gating_study`'s ``curve``,
    ``largest`` and ``blocks`` of each model: the measurement's columns, ``affine`` and ``first_apart`` (ΔPPL),
    ``hard`` (the plain swap over :data:`BUDGET` of perplexity), ``largest_<rule>`` per rule and, for the better rule
    (``gate``: the larger share, then the lower ΔPPL there), ``largest_share`` and ``delta_ppl_there``; at the share
    of the grid nearest the first-position rule's (``matched_share``), the better gate's ``matched_delta`` with its
    interval; at :data:`READ_AT`, ``r2_routed`` and ``r2_gated`` of the better gate; ``gate_numbers``, what a
    logistic gate stores (d + 1)."""
    curve, large, table = (pd.concat(list(t), ignore_index=True) for t in (curves, largest, blocks))
    _require(curve, ["model", "rule", "share", "block", "delta_ppl", "delta_ppl_low", "delta_ppl_high", "r2_routed",
                     "r2_gated", "params"], "the curve")  # fmt: skip
    _require(large, ["model", "rule", "block", "largest_share", "delta_ppl_there"], "the largest shares")
    _require(table, ["model", "block", "base_ppl", "affine", "first_apart", "first_apart_routed", "family"], "blocks")
    rules = list(dict.fromkeys(curve.rule))
    wide = large.pivot_table(index=["model", "block"], columns="rule", values="largest_share")
    wide = wide.reindex(columns=rules).add_prefix("largest_").reset_index()
    ranked = large.assign(order=large.rule.map({r: i for i, r in enumerate(rules)}))
    ranked = ranked.sort_values(["model", "block", "largest_share", "delta_ppl_there", "order"],
                                ascending=[True, True, False, True, True], kind="stable")  # fmt: skip
    better = (
        ranked.groupby(["model", "block"], sort=False)
        .head(1)[["model", "block", "rule", "largest_share", "delta_ppl_there"]]
        .rename(columns={"rule": "gate"})
    )
    out = table.merge(wide, on=["model", "block"]).merge(better, on=["model", "block"])
    out["hard"] = out.affine > BUDGET * out.base_ppl
    grid = sorted(s for s in curve.share.unique() if s < 1)
    matched = []
    for row in out.itertuples():
        share = min(grid, key=lambda s: (abs(s - row.first_apart_routed), -s)) if grid else math.nan
        there = _at(curve[(curve.model == row.model) & (curve.block == row.block)], share)
        best = there.sort_values("delta_ppl", kind="stable").iloc[0] if len(there) else None
        read = _at(curve[(curve.model == row.model) & (curve.block == row.block) & (curve.rule == row.gate)], READ_AT)
        numbers = curve[(curve.model == row.model) & (curve.block == row.block) & (curve.share < 1)]
        by_rule = numbers.groupby("rule").params.first()
        matched.append({
            "matched_share": share,
            "matched_rule": None if best is None else best.rule,
            "matched_delta": math.nan if best is None else float(best.delta_ppl),
            "matched_low": math.nan if best is None else float(best.delta_ppl_low),
            "matched_high": math.nan if best is None else float(best.delta_ppl_high),
            "r2_routed": float(read.r2_routed.iloc[0]) if len(read) else math.nan,
            "r2_gated": float(read.r2_gated.iloc[0]) if len(read) else math.nan,
            "gate_numbers": int(by_rule["logistic"] - by_rule["norm"]) if {"logistic", "norm"} <= set(by_rule.index)
            else None,
        })  # fmt: skip
    return pd.concat([out, pd.DataFrame(matched, index=out.index)], axis=1)


def agreement_summary(agreements: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The gates trained on two texts (:func:`~linrec.experiment.gating.gating_study`'s ``agreement`` of each
    model), with ``chance``, the share two gates that each route ``share`` of the rows at random would route alike
    (share² + (1 − share)²), and ``kappa``, Cohen's κ: (alike − chance) / (1 − chance), 0 for chance and 1 for the
    same rows."""
    columns = ["model", "block", "rows_of", "share", "alike", "score_correlation"]
    table = pd.concat(list(agreements), ignore_index=True) if agreements else pd.DataFrame(columns=columns)
    _require(table, columns, "the agreement")
    chance = table.share**2 + (1 - table.share) ** 2
    return table.assign(chance=chance, kappa=(table.alike - chance) / (1 - chance))


def relations(summary: pd.DataFrame, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Spearman's ρ, over every gated block of every model pooled, of the better gate's largest share with each of
    :data:`RELATED` (and with the plain swap's cost relative to perplexity), a bootstrap interval over blocks:
    ``score, blocks, rho, low, high``; none where fewer than :data:`MIN_BLOCKS` blocks, or a constant column."""
    rows = []
    scores = [*RELATED, "affine_relative"]
    table = summary.assign(affine_relative=summary.affine / summary.base_ppl)
    for score in scores:
        known = table.dropna(subset=[score, "largest_share"])
        if len(known) < MIN_BLOCKS or known[score].nunique() < 2 or known.largest_share.nunique() < 2:
            continue
        rho = bootstrap_correlation(known[score], known.largest_share, np.zeros(len(known)), level, seed=seed)
        rows.append({"score": score, "blocks": rho.n, "rho": rho.r, "low": rho.low, "high": rho.high})
    return pd.DataFrame(rows, columns=["score", "blocks", "rho", "low", "high"])


def _span(values: pd.Series) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:.0%}" if low == high else f"{low:.0%}–{high:.0%}"


def beside_the_study(summary: pd.DataFrame, agreement: pd.DataFrame) -> pd.DataFrame:
    """The study's figures (:data:`STUDY`, as reported) beside what this run measured on its own models, one row
    each: ``quantity``, ``the study (reported)``, ``this run (measured)``."""
    by_family = {family_name(str(f)): part for f, part in summary.groupby("family", sort=False)}
    families = summary.groupby("model", sort=False).family.first()
    models = ", ".join(f"{m} ({family_name(str(f))})" for m, f in families.items())
    numbers = summary.gate_numbers.dropna()
    routed = "; ".join(
        f"{name}: {_span(part.largest_share)} over {len(part)} gated blocks of {part.model.nunique()} model(s)"
        for name, part in by_family.items()
    )
    medians = "; ".join(
        f"{name}: median largest share {part.largest_share.median():.0%}, median plain-swap cost "
        f"{round((part.affine / part.base_ppl).median(), 3) + 0.0:+.1%} of perplexity"
        for name, part in by_family.items()
    )
    beat = summary[summary.delta_ppl_there < 0]
    worst = summary.iloc[int(np.argmax((summary.affine / summary.base_ppl).to_numpy()))]
    cross = (
        f"gates trained on two texts, compared on held-out rows of each: median score correlation r = "
        f"{agreement.score_correlation.median():+.2f}, median κ = {agreement.kappa.median():+.2f} over "
        f"{len(agreement)} comparisons (a gate reads the whole FFN input, not a token's identity)"
        if len(agreement)
        else "not measured"
    )
    mine = [
        models,
        "the same form: a logistic classifier of d + 1 numbers per block"
        + (f" ({', '.join(str(int(n)) for n in sorted(set(numbers)))})" if len(numbers) else ""),
        f"the better of the norm and logistic gates: {routed} (the blocks gated are each model's costliest swaps and "
        "a typical one, not every layer)",
        medians,
        f"{len(beat)} of {len(summary)} gated blocks cost less than the unmodified model at their largest share; the "
        f"costliest plain swap: {worst.model} block {int(worst.block)}, {worst.affine / worst.base_ppl:+.1%} of "
        "perplexity",
        cross,
    ]
    return pd.DataFrame({
        "quantity": [r.quantity for r in STUDY],
        f"{STUDY_NAME}, reported": [r.value for r in STUDY],
        "this run, measured": mine,
    })  # fmt: skip


def gating_claims(summary: pd.DataFrame, agreement: pd.DataFrame, related: pd.DataFrame) -> list[Claim]:
    """The section's claims by :data:`RULE`: whether a gate carries every hard block, whether it does as well as the
    first position apart, whether GPT-NeoX routes less than GPT-2, whether gates trained on two texts route the same
    rows; and, without a verdict, R²_lin before and after the hard rows go to the FFN, and :func:`relations`."""
    claims = []
    hard = summary[summary.hard]
    study_routed = f"not in the paper; {STUDY_NAME}: {STUDY_ROUTED.value} within 1 % of perplexity"
    carries = (f"yes when every gated block whose plain affine swap costs more than {BUDGET:.0%} of perplexity has a "
               f"gate that routes at least {STUDY_LOW:.0%} of its rows to the map within {BUDGET:.0%} of perplexity; "
               "untestable where no gated block's plain swap costs that much")  # fmt: skip
    if hard.empty:
        claims.append(Claim.check(
            "a gate carries every block the affine map alone cannot", study_routed,
            f"no gated block's plain affine swap costs more than {BUDGET:.0%} of perplexity", None, rule=carries,
        ))  # fmt: skip
    else:
        said = ", ".join(f"{m} block {int(b)}: {s:.0%} by {g}" for m, b, s, g in
                         zip(hard.model, hard.block, hard.largest_share, hard.gate, strict=True))  # fmt: skip
        claims.append(Claim.check(
            "a gate carries every block the affine map alone cannot", study_routed,
            f"largest share routed within {BUDGET:.0%}: {said}", bool((hard.largest_share >= STUDY_LOW).all()),
            rule=carries,
        ))  # fmt: skip
    compared = hard.dropna(subset=["matched_delta"])
    first = ("yes when, in every hard block, the better gate at the share of the grid nearest the share of rows the "
             "first-position rule sends to the map costs no more ΔPPL than that rule (first-apart:own); untestable "
             "where no gated block is hard")  # fmt: skip
    if compared.empty:
        claims.append(Claim.check(
            "a gate does as well as the first position apart", "not in the paper, nor in the study",
            "no hard block, or no share of the grid below 1", None, rule=first,
        ))  # fmt: skip
    else:
        said = ", ".join(
            f"{m} block {int(b)}: gate {d:+.3g} at {s:.0%} against {f:+.3g} at {r:.1%}"
            for m, b, d, s, f, r in zip(compared.model, compared.block, compared.matched_delta, compared.matched_share,
                                        compared.first_apart, compared.first_apart_routed, strict=True)
        )  # fmt: skip
        claims.append(Claim.check(
            "a gate does as well as the first position apart", "not in the paper, nor in the study", said,
            bool((compared.matched_delta <= compared.first_apart).all()), rule=first,
        ))  # fmt: skip
    families = dict(list(summary.groupby("family")))
    pythia = f"not in the paper; {STUDY_NAME}: {STUDY_PYTHIA.value}"
    harder = ("yes when the median, over the gated blocks of the GPT-NeoX models, of the better gate's largest share "
              f"within {BUDGET:.0%} of perplexity is below that of the GPT-2 models; untestable without models of "
              "both")  # fmt: skip
    if "gpt2" in families and "gpt_neox" in families:
        neox, gpt2 = families["gpt_neox"].largest_share.median(), families["gpt2"].largest_share.median()
        claims.append(Claim.check(
            "GPT-NeoX blocks are harder to route to the map than GPT-2 blocks", pythia,
            f"median largest share within {BUDGET:.0%}: GPT-NeoX {neox:.0%} ({len(families['gpt_neox'])} blocks), "
            f"GPT-2 {gpt2:.0%} ({len(families['gpt2'])} blocks)",
            bool(neox < gpt2), rule=harder,
        ))  # fmt: skip
    else:
        claims.append(Claim.check(
            "GPT-NeoX blocks are harder to route to the map than GPT-2 blocks", pythia,
            f"models of {', '.join(family_name(str(f)) for f in families) or 'no family'} only", None, rule=harder,
        ))  # fmt: skip
    cross = f"not in the paper; {STUDY_NAME}: {STUDY_CROSS.value}"
    same = (f"yes when the median Cohen's κ (the agreement beyond chance of two logistic gates trained on two texts "
            f"at the same share, on rows of either text that neither was trained on), over every gated block and "
            f"held-out text, is at least {KAPPA}; untestable where no gates were compared")  # fmt: skip
    if agreement.empty:
        claims.append(Claim.check("gates trained on two texts route the same rows", cross, "not measured", None,
                                  rule=same))  # fmt: skip
    else:
        kappa = float(agreement.kappa.median())
        claims.append(Claim.check(
            "gates trained on two texts route the same rows", cross,
            f"median κ {kappa:+.2f} (alike {agreement.alike.median():.1%}, chance {agreement.chance.median():.1%}), "
            f"median score correlation {agreement.score_correlation.median():+.2f}, over {len(agreement)} "
            "comparisons",
            bool(kappa >= KAPPA), value=kappa, rule=same,
        ))  # fmt: skip
    if not hard.empty:
        claims.append(Claim.measure(
            f"R²_lin of the hard blocks, every row → the rows the better gate routes at {READ_AT:.0%}",
            ", ".join(f"{m} block {int(b)}: {a:.3f} → {r:.3f}" for m, b, a, r in
                      zip(hard.model, hard.block, hard.r2_lin, hard.r2_routed, strict=True)),
        ))  # fmt: skip
    rows = related.to_dict("records") if "score" in related else []
    for score, n, rho, low, high in ((r["score"], r["blocks"], r["rho"], r["low"], r["high"]) for r in rows):
        claims.append(Claim.measure(
            f"Spearman ρ of the largest share routed within 1 % with {score}",
            f"{rho:+.2f} [{low:+.2f}, {high:+.2f}] over {n} gated blocks", interval=(float(low), float(high)),
        ))  # fmt: skip
    return claims
