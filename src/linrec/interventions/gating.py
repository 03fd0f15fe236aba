"""Gated replacements fitted on a model's rows, and how much of each block is linear once a gate routes its hard rows
to the FFN: the curve of ΔPPL against the share of rows sent to the map.

Two passes over the fit text, each stopping after the deepest block asked for: the first keeps a seeded sample of
each block's rows (:class:`linrec.core.sample.RowSample`), from which the gates are trained and the thresholds of
the shares read; the second scores every row with its gate and accumulates float64 moments per fold and score band
(:class:`linrec.core.routed.RoutedSink`), so every share's map is the closed-form fit of exactly the rows its gate
routes. The logistic gate's labels: a row "needs the FFN" where it is among the rows the map of the typical rows gets
most wrong (:func:`needs_ffn`).

:func:`gated_replacements` gives the maps of one kind; :func:`gating_curve` scores every rule and share on evaluation
text, each block swapped alone, with the held-out R² of the routed rows and of the gated block as a whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import pandas as pd
import torch
from torch import nn

from linrec.core.capture import require_eval, run_capture
from linrec.core.fit import AffineFit, fit_affine, held_out, leave_one_out, rcond_for
from linrec.core.gated import GatedFFN, NormGate, fit_logistic_gate, threshold_for
from linrec.core.kinds import GATE_RULES, GATED, Kind
from linrec.core.moments import Moments, merge_folds
from linrec.core.replacements import affine_ffn
from linrec.core.routed import RoutedMoments, RoutedSink
from linrec.core.rows import RowSink
from linrec.core.sample import Rows, RowSample
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.perplexity import WindowNLL, variant_deltas, window_nll
from linrec.models.arch import Spec, ffn_blocks, select_blocks
from linrec.progress import stage

SAMPLE_ROWS = 16_384
"""Rows per block the gates are trained on and their thresholds read from."""

SHARES = (0.5, 0.75, 0.9, 0.95, 0.99)
"""The shares of rows routed to the map that :func:`gating_curve` scores by default."""


def _dtype(model: nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype


def _pass(
    model: nn.Module,
    batches: TokenBatches,
    blocks: Sequence[int],
    sinks: Sequence[RowSink],
    folds: int,
    seed: int,
    spec: Spec,
    progress: bool,
) -> None:
    """One capture pass of ``blocks`` over ``batches`` into ``sinks``, its sequences dealt to ``folds`` folds as a
    measurement deals them (all to fold 0 when one)."""
    chosen = select_blocks(ffn_blocks(model, spec), list(blocks))
    dealt = batches.folds(folds, seed) if folds > 1 else torch.zeros(batches.n_sequences_total, dtype=torch.long)
    run_capture(model, batches, chosen, sinks, dealt, progress)


def sample_rows(
    model: nn.Module,
    batches: TokenBatches,
    blocks: Sequence[int],
    rows: int = SAMPLE_ROWS,
    seed: int = 0,
    spec: Spec = None,
    progress: bool = True,
    folds: int = 1,
) -> dict[int, Rows]:
    """A seeded sample of at most ``rows`` rows per block (float32 on the CPU), from one pass over ``batches``, each
    row with the fold its sequence is dealt to (``folds``, whole documents, as a measurement deals them)."""
    sample = RowSample(rows, seed)
    with stage(f"sampling at most {rows:,} rows per block", progress):
        _pass(model, batches, blocks, [sample], folds, seed, spec, progress)
    return {b: sample.rows(b) for b in blocks}


def needs_ffn(rows: Rows, rcond: float, share: float) -> torch.Tensor:
    """Per row, whether it is among the 1 - ``share`` of ``rows`` that the affine map of the other ``share`` gets most
    wrong (by squared error): what a logistic gate that routes ``share`` of the rows to the map learns to find.

    The map of all rows is pulled towards the few heavy rows (an attention sink's), so it gets them nearly right and
    their errors under it would not mark them. So the map starts from the ``share`` rows of least output (about its
    mean), and one concentration step of least trimmed squares refits it on the ``share`` rows it then errs on least;
    every row's error under that map is what is ranked."""
    x, y = rows.x.to(torch.float64), rows.y.to(torch.float64)

    def errors(fitted_on: torch.Tensor) -> torch.Tensor:
        fit = fit_affine(Moments.from_rows(x[fitted_on], y[fitted_on]), rcond, condition=False)
        return (y - fit(x)).square().sum(1)

    least = (y - y.mean(0)).square().sum(1)
    error = errors(least <= threshold_for(least, share))
    error = errors(error <= threshold_for(error, share))
    return error > threshold_for(error, share)


@dataclass
class Routing:
    """One gate per block, the thresholds of ``shares`` (ascending, each in (0, 1), as the sample reads them) and the
    moments of every row per fold and band: a norm gate serves every share, a logistic gate the share it was trained
    for."""

    rule: str
    shares: tuple[float, ...]
    gates: dict[int, nn.Module]
    moments: dict[int, RoutedMoments]

    def upto(self, share: float) -> int:
        """The last band routed at ``share`` (the number of thresholds for share 1)."""
        return len(self.shares) if share == 1 else self.shares.index(share)

    def fit(self, block: int, share: float, rcond: float, folds: Sequence[int] | None = None) -> AffineFit:
        """The closed-form map of the rows routed at ``share`` (of ``folds``, default every fold)."""
        per_fold = self.moments[block].folds(self.upto(share))
        chosen = per_fold if folds is None else [per_fold[f] for f in folds]
        return fit_affine(merge_folds(chosen), rcond, condition=False)

    def replacement(self, block: int, share: float, rcond: float) -> GatedFFN:
        """The gated map of ``block`` at ``share`` (at 0 every row goes to the FFN, and the map, never used, is the
        all-rows one)."""
        if share in (0, 1):
            return GatedFFN(affine_ffn(self.fit(block, 1, rcond)), self.gates[block], math.inf if share else -math.inf)
        threshold = self.moments[block].thresholds[self.upto(share)]
        return GatedFFN(affine_ffn(self.fit(block, share, rcond)), self.gates[block], threshold)


def route(
    model: nn.Module,
    batches: TokenBatches,
    rules: Sequence[str],
    shares: Sequence[float],
    blocks: Sequence[int],
    *,
    folds: int = 1,
    seed: int = 0,
    rows: int = SAMPLE_ROWS,
    spec: Spec = None,
    progress: bool = True,
) -> dict[tuple[str, float], Routing]:
    """The :class:`Routing` of ``blocks`` for each rule and share in (0, 1) of ``shares`` (0 and 1 need no gate; a
    norm gate's routing serves all its shares) over ``batches``: one pass sampling rows, one accumulating the routed
    moments of every rule and share at once."""
    require_eval(model, "the routed rows")
    wanted = tuple(sorted({float(s) for s in shares if 0 < s < 1})) or (0.5,)  # (share 0 and 1 use any gate)
    for rule in rules:
        if rule not in GATE_RULES:
            raise LinrecError(f"unknown gate '{rule}'; choose one of {', '.join(GATE_RULES)}")
    rcond = rcond_for(_dtype(model))
    sampled = sample_rows(model, batches, blocks, rows, seed, spec, progress)
    trained: list[tuple[str, tuple[float, ...], dict[int, nn.Module]]] = []
    for rule in rules:
        if rule == "norm":
            trained.append((rule, wanted, {b: NormGate() for b in blocks}))
        else:
            trained += [(rule, (s,), {b: fit_logistic_gate(sampled[b].x, needs_ffn(sampled[b], rcond, s))
                                      for b in blocks}) for s in wanted]  # fmt: skip
    sinks = []
    for _, cut_at, gates in trained:
        with torch.no_grad():
            cuts = {b: [threshold_for(gates[b](sampled[b].x), s) for s in cut_at] for b in blocks}
        sinks.append(RoutedSink(gates, cuts, folds))
    with stage(f"routing every row of {len(blocks)} blocks by {', '.join(rules)}", progress):
        _pass(model, batches, blocks, sinks, folds, seed, spec, progress)
    out = {}
    for (rule, cut_at, gates), sink in zip(trained, sinks, strict=True):
        routing = Routing(rule, cut_at, gates, {b: sink.moments(b) for b in blocks})
        out.update({(rule, s): routing for s in cut_at})
    return out


def gated_replacements(
    model: nn.Module,
    batches: TokenBatches,
    kind: str,
    blocks: Sequence[int],
    *,
    seed: int = 0,
    rows: int = SAMPLE_ROWS,
    spec: Spec = None,
    progress: bool = True,
) -> dict[int, GatedFFN]:
    """A :class:`linrec.core.gated.GatedFFN` of ``kind`` (``gated:RULE:SHARE``) per block of ``blocks``, its gate
    trained and its threshold read on a sample of ``batches``' rows, its map fitted on every row the gate routes
    (module docstring). Swap them in with :func:`linrec.swapped`."""
    parsed = Kind.parse(kind)
    if parsed.name != GATED or parsed.rule is None or parsed.routed is None:
        raise LinrecError(f"{kind} is no gated kind; write gated:RULE:SHARE, e.g. gated:norm:0.9")
    share = parsed.routed
    routings = route(model, batches, [parsed.rule], [share], blocks, seed=seed, rows=rows, spec=spec,
                     progress=progress)  # fmt: skip
    routing = next(iter(routings.values()))  # (the only one: share 0 and 1 use any gate)
    rcond = rcond_for(_dtype(model))
    return {b: routing.replacement(b, share, rcond) for b in blocks}


def _held_out(routing: Routing, block: int, share: float, rcond: float) -> tuple[float, float]:
    """(held-out R² of the routed rows, held-out R² of the gated block: the routed rows' errors over every row's
    variance, the FFN's rows exact), each the mean over folds, both from one fit per fold."""
    moments = routing.moments[block]
    routed, every = moments.folds(routing.upto(share)), moments.every_fold()
    scores = [held_out(routing.fit(block, share, rcond, training), routed[f])
              for f, training in enumerate(leave_one_out(len(routed)))]  # fmt: skip
    whole = [float(1 - score.sse.sum() / every[f].output_ss.sum()) for f, score in enumerate(scores)]
    return sum(score.r2 for score in scores) / len(scores), sum(whole) / len(scores)


def gating_curve(
    model: nn.Module,
    fit_batches: TokenBatches,
    eval_batches: TokenBatches,
    blocks: Sequence[int],
    *,
    rules: Sequence[str] = GATE_RULES,
    shares: Sequence[float] = SHARES,
    folds: int = 5,
    seed: int = 0,
    rows: int = SAMPLE_ROWS,
    base: WindowNLL | None = None,
    spec: Spec = None,
    progress: bool = True,
) -> pd.DataFrame:
    """For each rule, share (and share 1, the plain affine map) and block of ``blocks``, swapped alone: ``rule,
    share`` (as asked), ``routed`` (the share of the fit rows its gate sent to the map), ``r2_routed`` and
    ``r2_gated`` (held-out, over ``folds``: :func:`_held_out`) and the columns of
    :func:`linrec.interventions.perplexity.swap_deltas` on ``eval_batches`` (ΔPPL with its interval, numbers
    stored)."""
    asked = sorted({float(s) for s in shares} | {1.0})
    if any(not 0 < s <= 1 for s in asked):
        raise LinrecError(f"the shares of rows routed to the map must lie in (0, 1]; got {list(shares)}")
    routings = route(model, fit_batches, rules, asked, blocks, folds=folds, seed=seed, rows=rows, spec=spec,
                     progress=progress)  # fmt: skip
    rcond = rcond_for(_dtype(model))
    base = base if base is not None else window_nll(model, eval_batches, progress)
    chosen = sorted(set(blocks))
    # every gated map of a block scored beside the others, so the layers below it run once (variant_deltas);
    # share 1, every row to the map, is the plain affine map whatever the rule: scored once, for the first rule
    settings = [(rule, share) for rule in rules for share in asked if share < 1 or rule == rules[0]]
    routed = {(rule, share): _routing(routings, rule, share) for rule, share in settings}
    variants = [(b, routed[setting].replacement(b, setting[1], rcond)) for setting in settings for b in chosen]
    scored = variant_deltas(model, eval_batches, variants, spec, progress, base)
    tables = []
    for rule in rules:
        for share in asked:
            routing = _routing(routings, rule, share)
            at = settings.index((rule, share) if share < 1 else (rules[0], share)) * len(chosen)
            table = scored.iloc[at : at + len(chosen)].reset_index(drop=True)
            held = [_held_out(routing, b, share, rcond) for b in table.block]
            table.insert(0, "routed", [routing.moments[b].share(routing.upto(share)) for b in table.block])
            table.insert(0, "share", share)
            table.insert(0, "rule", rule)
            table["r2_routed"] = [h[0] for h in held]
            table["r2_gated"] = [h[1] for h in held]
            tables.append(table)
    return pd.concat(tables, ignore_index=True)


def _routing(routings: Mapping[tuple[str, float], Routing], rule: str, share: float) -> Routing:
    """The routing of ``rule`` that serves ``share`` (share 1: the rule's last, any gate sends every row to the
    map)."""
    return routings[(rule, share if share < 1 else max(s for r, s in routings if r == rule))]


def largest_share(curve: pd.DataFrame, budget: float = 0.01) -> pd.DataFrame:
    """Per rule and block of a :func:`gating_curve`, the largest share routed to the map whose ΔPPL stays under
    ``budget`` of the model's perplexity (0 where none does), and the ΔPPL there."""
    rows = []
    for (rule, block), part in curve.groupby(["rule", "block"], sort=True):
        under = part[part.delta_ppl < budget * part.base_ppl].sort_values("routed")
        best = under.iloc[-1] if len(under) else None
        rows.append(
            {
                "rule": rule,
                "block": int(cast(int, block)),
                "largest_share": 0.0 if best is None else float(best.routed),
                "delta_ppl_there": math.nan if best is None else float(best.delta_ppl),
            }
        )
    return pd.DataFrame(rows)


def gate_agreement(gates: Mapping[str, nn.Module], rows: Rows, share: float) -> pd.DataFrame:
    """Whether gates trained on different texts (``gates``: text name -> gate) route the same of ``rows`` to the map
    at ``share`` (each gate's own threshold on these rows): per pair, the share of rows routed alike and the
    correlation of their scores."""
    with torch.no_grad():
        scores = {name: gate(rows.x).to(torch.float64) for name, gate in gates.items()}
    routed = {name: s <= threshold_for(s, share) for name, s in scores.items()}
    names = list(gates)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            r = torch.corrcoef(torch.stack([scores[a], scores[b]]))[0, 1]
            out.append({"gate": a, "other": b, "share": share, "alike": float((routed[a] == routed[b]).double().mean()),
                        "score_correlation": float(r)})  # fmt: skip
    return pd.DataFrame(out)
