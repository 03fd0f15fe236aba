"""Chapter 5 (compression), from a measurement: swap blocks for cheaper maps and score perplexity on held-out text.

* :func:`replacement_sets`: one replacement per block for each kind: the closed-form ``affine``
  map, its rank-k truncation ``lowrank`` (k an eighth of the width unless given), a seeded-poly
  probe ``poly`` (trained on the measurement's sampled rows, training folds only), the block's
  mean output ``mean``, and removal ``zero``. All are fitted on the measurement's corpus.
* :func:`swap_kinds`: every kind's per-block ΔPPL (:func:`linrec.interventions.perplexity.swap_deltas`) in one
  table, the unmodified model scored once.
* :func:`best_block`: among the first ``early`` fraction of blocks (the paper's GPT-2 example
  replaces an early block), the one with the highest R²_lin: chosen from the captured rows alone, so
  the text its ΔPPL is reported on plays no part in choosing it (``by="delta_ppl"`` gives the cheapest
  swap on that text instead, an optimistic choice, for comparison).
* :func:`affine_signal`: the affine swap of every block of further models
  (:func:`linrec.experiment.swaps.affine_swaps`), with R²_lin, for the signal below.
* :func:`flags`: per model, the block R²_lin flags as least safe against the costliest swap.
* :func:`signal_correlation`: Spearman's ρ between R²_lin and affine ΔPPL within each model, and their
  combination (:func:`linrec.stats.stratified_correlation`): blocks are compared only with blocks of their own
  model, so differences between models' levels cannot make the signal (Simpson's paradox);
  :func:`signal_table` shows each model's ρ beside it.
* :func:`compression_claims`: the paper's compression claims, each against this run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd
from torch import nn

from linrec.core.fit import DEFAULT_RCOND
from linrec.core.replacements import fit_replacements
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import Profile
from linrec.experiment.swaps import affine_swaps
from linrec.interventions.perplexity import swap_deltas, window_nll
from linrec.interventions.probes import ProbeConfig, seeded_poly
from linrec.models.arch import Spec
from linrec.report import paper
from linrec.report.claims import Claim
from linrec.report.tables import with_interval
from linrec.stats import Stratified, correlation, stratified_correlation

SWAP_KINDS = ("affine", "lowrank", "poly", "mean", "zero")
"""The replacements :func:`replacement_sets` builds (``poly`` included): see the module docstring."""


def default_rank(width: int) -> int:
    """The rank of the ``lowrank`` replacement when none is given: an eighth of the width (at least 1)."""
    return max(1, width // 8)


def replacement_sets(
    m: ProfileMeasurement,
    kinds: Sequence[str] = SWAP_KINDS,
    rank: int | None = None,
    config: ProbeConfig | None = None,
    blocks: Sequence[int] | None = None,
    rcond: float = DEFAULT_RCOND,
) -> dict[str, dict[int, nn.Module]]:
    """{kind: {block: replacement}} for ``blocks`` (all by default) of one measured model.

    ``rank``: of ``lowrank`` (default :func:`default_rank` of the width); ``config``: seeded-poly's
    training settings (needed for ``poly``).
    """
    unknown = [k for k in kinds if k not in SWAP_KINDS]
    if unknown:
        raise LinrecError(f"unknown replacement kinds {unknown}; choose from {', '.join(SWAP_KINDS)}")
    chosen = m.blocks if blocks is None else list(blocks)
    out: dict[str, dict[int, nn.Module]] = {}
    for kind in kinds:
        if kind == "poly":
            if config is None:
                raise LinrecError(
                    "a 'poly' replacement is trained: pass config="
                    "linrec.experiment.resolve.probe_config(profile.probe, device=profile.device)"
                )
            out[kind] = {b: seeded_poly(m.samples[b], m.moments[b], 0, config, b, rcond).probe for b in chosen}
        elif kind == "lowrank":
            k = rank if rank is not None else default_rank(m.moments[chosen[0]][0].d_in)
            out[kind] = fit_replacements(m.moments, kind, k, chosen, rcond=rcond)
        else:
            out[kind] = fit_replacements(m.moments, kind, blocks=chosen, rcond=rcond)
    return out


def swap_kinds(
    model: nn.Module,
    eval_batches: TokenBatches,
    sets: Mapping[str, Mapping[int, nn.Module]],
    r2_lin: Mapping[int, float] | None = None,
    spec: Spec = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Every block of every kind swapped alone: :func:`swap_deltas`' columns (ΔPPL with its interval) plus ``kind``,
    ``relative`` (ΔPPL / PPL) and, given ``r2_lin``, the block's ``r2_lin``."""
    base = window_nll(model, eval_batches)
    tables = []
    for kind, replacements in sets.items():
        table = swap_deltas(model, eval_batches, replacements, spec, progress, base=base)
        tables.append(table.assign(kind=kind, relative=table.delta_ppl / table.base_ppl))
    out = pd.concat(tables, ignore_index=True)
    if r2_lin is not None:
        out["r2_lin"] = out.block.map(r2_lin)
    return out[["kind", *[c for c in out.columns if c != "kind"]]]


def defaults(
    profile: Profile, model: str | None, signal_models: Sequence[str] | None, eval_tokens: int | None
) -> tuple[str, list[str], int]:
    """Chapter 5's parameters with None resolved by ``profile``: the model (its first), the models of the signal
    (all of its models) and the evaluation tokens (an eighth of the model's budget, at least one sequence)."""
    model = model or profile.models[0]
    tokens = eval_tokens or max(profile.seq_len, (profile.budget(model).eval_tokens or 0) // 8)
    return model, list(signal_models or profile.models), tokens


def early_blocks(blocks: Sequence[int], early: float = 0.5) -> list[int]:
    """The first ``early`` fraction of ``blocks`` (in depth order, at least one)."""
    if not 0 < early <= 1:
        raise LinrecError(f"early must be a fraction in (0, 1]; got {early}")
    ordered = sorted(blocks)
    return ordered[: max(1, math.ceil(early * len(ordered)))]


SELECTIONS = ("r2_lin", "delta_ppl")


def best_block(swaps: pd.DataFrame, kind: str = "affine", early: float = 0.5, by: str = "r2_lin") -> pd.Series:
    """The row of :func:`swap_kinds` of ``kind`` among the early blocks with the highest R²_lin (``by="r2_lin"``,
    independent of the evaluation text) or the smallest ΔPPL on the evaluation text (``by="delta_ppl"``)."""
    if by not in SELECTIONS:
        raise LinrecError(f"unknown selection '{by}'; choose one of {', '.join(SELECTIONS)}")
    rows = swaps[swaps.kind == kind]
    if rows.empty:
        raise LinrecError(f"no swaps of kind '{kind}'; kinds present: {', '.join(swaps.kind.unique())}")
    if by not in rows.columns:
        raise LinrecError(f"the swap table has no '{by}' column; pass r2_lin to swap_kinds")
    rows = rows[rows.block.isin(early_blocks(rows.block.tolist(), early))]
    return rows.iloc[rows.r2_lin.argmax()] if by == "r2_lin" else rows.iloc[rows.delta_ppl.argmin()]


def affine_signal(
    profile: Profile,
    measurements: Iterable[ProfileMeasurement],
    tokens: int | None = None,
    progress: bool = True,
    cache: bool = False,
    blocks: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Each block (or each of ``blocks``) of each measured model swapped alone for its affine map
    (:func:`linrec.experiment.swaps.affine_swaps` on ``tokens`` of the profile's evaluation text),
    with ``kind`` ("affine") and the block's ``r2_lin``: rows for :func:`signal_correlation`; ``cache`` as there."""
    measurements = list(measurements)
    swaps = affine_swaps(profile, measurements, max_tokens=tokens, progress=progress, cache=cache, blocks=blocks)
    chosen = [sorted(set(blocks)) if blocks is not None else m.blocks for m in measurements]
    r2_lin = [r for m, bs in zip(measurements, chosen) for r in m.table().set_index("block").loc[bs, "r2_lin"]]
    return swaps.assign(kind="affine", r2_lin=r2_lin)


def early_swap_table(
    best: pd.Series, cheapest: pd.Series, model: str, corpus: str, early: Sequence[int]
) -> pd.DataFrame:
    """The paper's single-layer replacement (:data:`linrec.report.paper.EARLY_SWAP_SETUP`, "paper (reported)")
    beside this run's: ``best``, the early block with the highest R²_lin ("this run (measured)"), and ``cheapest``,
    the one with the lowest ΔPPL on this text (rows of :func:`best_block`); ``early``: the early blocks."""

    def measured(row: pd.Series, chosen: str) -> list[str]:
        return [f"{model}, {corpus}", f"{row.original_params:,} numbers stored", f"block {int(row.block)} ({chosen})",
                f"{row.ratio:.3f}×", with_interval(row.to_frame().T, "delta_ppl").iloc[0], f"{row.base_ppl:.3f}",
                f"{row.relative:+.2%}"]  # fmt: skip

    reported = paper.EARLY_SWAP_SETUP
    return pd.DataFrame({
        "paper (reported)": list(reported.values()),
        "this run (measured)": measured(best, f"highest R²_lin, {best.r2_lin:.3f}, of early blocks {list(early)}"),
        "cheapest on this text (optimistic)": measured(cheapest, "lowest ΔPPL of early blocks"),
    }, index=list(reported))  # fmt: skip


MIN_BLOCKS = 4
"""The fewest blocks a model needs to enter the signal correlation (a Fisher-z interval needs 4)."""


def signal_correlation(swaps: pd.DataFrame, level: float = 0.95) -> Stratified | None:
    """Spearman's ρ between ``r2_lin`` and ``delta_ppl`` within each model, and their combination (the
    inverse-variance weighted mean of the models' Fisher z, :func:`linrec.stats.stratified_correlation`).

    ``swaps`` holds one swap per (model, block) (e.g. the affine rows of several :func:`swap_kinds` calls, each
    with a ``model`` column); a good safety signal gives ρ < 0. A ρ pooled over models would also rank one model's
    blocks against another's, whose perplexities and R²_lin differ in level for reasons of their own, and can take
    the opposite sign of every model's own ρ; this one does not. Models with fewer than :data:`MIN_BLOCKS` blocks
    are left out (named in ``skipped``); None when no model has that many.
    """
    _check_signal(swaps)
    keys: list[tuple[str, int]] = list(zip(swaps.model, swaps.block))
    if len(set(keys)) != len(keys):
        raise LinrecError("one swap per (model, block) is expected; select a single kind first")
    if swaps.groupby("model").size().max() < MIN_BLOCKS:
        return None
    return stratified_correlation(swaps.r2_lin, swaps.delta_ppl, swaps.model, "spearman", level)


def signal_table(swaps: pd.DataFrame, rho: Stratified) -> pd.DataFrame:
    """Each model's Spearman ρ(R²_lin, ΔPPL) with its interval, their combination (what the verdict reads) and, for
    contrast only, the ρ pooled over every block of every model: ``ρ over, blocks, ρ, low, high``."""
    _check_signal(swaps)
    table = rho.table()
    rows = [table.assign(group=table.group.replace({"within groups, combined": "within models, combined"}))]
    if swaps.model.nunique() > 1:
        pooled = correlation(swaps.r2_lin, swaps.delta_ppl, "spearman", rho.combined.level)
        rows.append(
            pd.DataFrame(
                [
                    {
                        "group": "pooled over models (not used)",
                        "n": pooled.n,
                        "r": pooled.r,
                        "low": pooled.low,
                        "high": pooled.high,
                    }
                ]
            )
        )
    out = pd.concat(rows, ignore_index=True)
    return out.rename(columns={"group": "ρ over", "n": "blocks", "r": "ρ"})


def signal_reading(rho: Stratified | None) -> str:
    """The sentence that reads the combined within-model ρ(R²_lin, ΔPPL) of :func:`signal_correlation`: the signal
    holds (lower R²_lin, costlier swaps) only when the whole interval lies below 0; None says too few blocks."""
    if rho is None:
        return "No model has four or more blocks, too few for a rank correlation."
    c = rho.combined
    reading = (
        ": within a model, lower R²_lin goes with costlier swaps."
        if c.high < 0
        else ": the interval does not exclude 0 or a positive value, so this run does not establish the signal."
    )
    return (
        f"Within each of {len(rho.groups)} models and combined over them ({c.n} blocks), "
        f"Spearman ρ(R²_lin, ΔPPL) = {c.r:+.2f} with 95% CI [{c.low:+.2f}, {c.high:+.2f}]" + reading
    )


def _check_signal(swaps: pd.DataFrame) -> None:
    missing = {"model", "block", "r2_lin", "delta_ppl"} - set(swaps.columns)
    if missing:
        raise LinrecError(
            f"the swap table lacks columns {sorted(missing)}; it needs model, block, r2_lin and delta_ppl"
        )


def flags(signal: pd.DataFrame) -> pd.DataFrame:
    """Per model: the block R²_lin ranks least safe (lowest R²_lin) against the block whose affine swap
    actually costs most (largest ΔPPL); ``agree`` when they are the same block.

    Columns: ``model, flagged, flagged_r2_lin, flagged_delta_ppl, costliest, costliest_r2_lin,
    costliest_delta_ppl, agree``.
    """
    _check_signal(signal)
    rows = []
    for model, group in signal.groupby("model", sort=False):
        low, worst = group.iloc[group.r2_lin.argmin()], group.iloc[group.delta_ppl.argmax()]
        rows.append(
            {
                "model": model,
                "flagged": int(low.block),
                "flagged_r2_lin": low.r2_lin,
                "flagged_delta_ppl": low.delta_ppl,
                "costliest": int(worst.block),
                "costliest_r2_lin": worst.r2_lin,
                "costliest_delta_ppl": worst.delta_ppl,
                "agree": bool(low.block == worst.block),
            }
        )
    return pd.DataFrame(rows)


def compression_claims(
    best: pd.Series,
    rho: Stratified | None,
    min_ratio: float = 7.5,
    max_relative: float = 0.05,
    frontier: pd.DataFrame | None = None,
) -> list[Claim]:
    """The paper's compression claims against this run, with the numbers behind them (verdicts "yes", "no",
    or "untestable"):

    * replacement: ``best`` (:func:`best_block`, the early block of highest R²_lin) stores at least ``min_ratio``× fewer
      numbers and raises perplexity by at most ``max_relative`` of the original (the paper: +0.77
      at 8×; its base perplexity is not in the sources, so the relative cost is the comparable part);
    * signal: Spearman's ρ(R²_lin, ΔPPL) within models, combined (:func:`signal_correlation`), is negative with
      its 95% CI below 0 (untestable when no model has enough blocks);
    * with ``frontier`` (:func:`linrec.interventions.perplexity.compression_frontier`), the cost of swapping every
      block, a headline number the paper does not report.
    """
    replacement = (
        (f"{best.model}: " if "model" in best else "")
        + f"{best.ratio:.2f}× fewer numbers, ΔPPL {best.delta_ppl:+.3f} ({best.relative:+.2%} of "
        f"{best.base_ppl:.2f}) at block {int(best.block)}"
    )
    ok = best.ratio >= min_ratio and best.relative <= max_relative
    claims = [
        Claim.check(
            "single-layer replacement of an early block",
            paper.EARLY_SWAP,
            replacement,
            ok,
            value=best.delta_ppl,
            interval=(best.delta_ppl_low, best.delta_ppl_high) if "delta_ppl_low" in best else None,
            unit="perplexity",
            note=f"block {int(best.block)}, the early block of highest R²_lin {best.r2_lin:.3f}; "
            f"base PPL {best.base_ppl:.2f}",
            rule=f"reproduced when the early block of highest R²_lin, swapped for its affine map, stores at least "
            f"{min_ratio:g}× fewer numbers and raises perplexity by at most {max_relative:.0%} of the original model's "
            "(the paper's +0.77 is an absolute change at a base perplexity it does not state, so the relative cost "
            "is the part two models can share)",
        )
    ]
    claim = (
        "low R²_lin flags unsafe replacements",
        paper.Reported(
            "low R²_lin flags unsafe replacements",
            "low-recoverability blocks flag where replacement is unsafe",
            paper.EARLY_SWAP.source,
        ),
    )
    rule = (
        "reproduced when Spearman's ρ(R²_lin, ΔPPL), taken within each model and combined, is negative with its 95% "
        f"interval wholly below 0; untestable when no model has {MIN_BLOCKS} or more blocks"
    )
    if rho is None:
        claims.append(
            Claim.check(*claim, f"no model has {MIN_BLOCKS} or more blocks for a rank correlation", None, rule=rule)
        )
    else:
        r = rho.combined
        claims.append(
            Claim.check(
                *claim,
                f"Spearman ρ(R²_lin, ΔPPL) within models, combined = {r.r:+.3f} [{r.low:+.3f}, {r.high:+.3f}]; "
                + ", ".join(f"{model} {c.r:+.2f}" for model, c in rho.groups.items()),
                r.high < 0,
                value=r.r,
                interval=(r.low, r.high),
                note=rho.note,
                rule=rule,
            )
        )
    if frontier is not None:
        claims.append(
            Claim.measure(
                "affine swap ΔPPL, all blocks swapped",
                frontier.delta_ppl.iloc[-1],
                unit="perplexity",
                note=f"{frontier.ffn_saved_fraction.iloc[-1]:.0%} of FFN numbers saved",
            )
        )
    return claims


def _listed(blocks: list, shown: int = 6) -> str:
    """Blocks in the order tried, the first ``shown`` of a longer list with how many there are."""
    names = [str(int(b)) for b in blocks]
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[:shown])}, … ({len(names)} in all)"


def budget_summary(
    budget: pd.DataFrame, frontier: pd.DataFrame | None = None, model: str | None = None
) -> pd.DataFrame:
    """One row per model of a :func:`linrec.experiment.swaps.greedy_frontiers` table: the blocks kept in order, the
    numbers saved, the joint ΔPPL at the last kept step (absolute with its interval, and as a percentage of the
    perplexity), and the blocks left out for breaking the budget. With ``frontier``
    (:func:`linrec.interventions.perplexity.compression_frontier` of ``model``: the same maps added in order of
    R²_lin), ``model``'s row also gives that order's ΔPPL (%) with as many blocks, so the two orders can be compared
    at equal size."""
    rows = []
    for name, steps in budget.groupby("model", sort=False):
        kept = steps[steps.kept.astype(bool)]
        last, out = kept.iloc[-1], steps[~steps.kept.astype(bool)]
        row: dict[str, object] = {
            "model": name,
            "blocks kept (in order)": ", ".join(str(int(b)) for b in kept.block.iloc[1:]) or "none",
            "numbers saved (% of the model)": 100 * float(last.model_saved_fraction),
            "joint ΔPPL [95% interval]": with_interval(kept.iloc[[-1]], "delta_ppl").iloc[0],
            "ΔPPL (% of the perplexity)": 100 * float(last.relative),
            "left out (over the budget)": "none: every block fits" if out.empty else _listed(list(out.block)),
        }
        if frontier is not None and name == model:
            at = frontier.iloc[len(kept) - 1]  # the R²_lin order with as many blocks
            row["R²_lin order, as many blocks: ΔPPL (%)"] = 100 * float(at.delta_ppl / frontier.ppl.iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)
