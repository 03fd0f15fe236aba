"""The map for the many rows, the FFN for the few: a profile model's costliest blocks gated, a share of their rows
sent to the affine map and the rest through the block's own FFN.

For one model of a profile (:func:`gating_study`), on the tokens of chapter 11 (:func:`linrec.experiment.pruning.
pruning_costs`, whose cached tables give every block's measurement and its swap costs):

* a few blocks (:func:`choose_blocks`: the costliest swaps for the plain affine map and a typical one, or the
  blocks asked for), each gated alone by each rule at each share of rows routed to the map
  (:func:`linrec.interventions.gating.gating_curve`): ΔPPL with its interval on the held-out evaluation text, the
  held-out R² of the routed rows and of the gated block; and per rule and block the largest share whose ΔPPL stays
  under 1 % of the model's perplexity (:func:`linrec.interventions.gating.largest_share`);
* whether a gate carries from one text to another: logistic gates trained on the model's fit text and on a second
  corpus of the profile (:func:`second_text`), each on all but one fold of a row sample of its text, compared on the
  held-out fold of each text, rows that neither gate was trained on (:func:`linrec.interventions.gating.
  gate_agreement`);
* beside them, the chapter's own measurement of the same blocks (R²_lin with and without the first position, the
  share of the output variance at the first position and in the largest rows) and what the first position apart
  costs (``first-apart:own``: the map for every later position, the FFN's own output at the first; chapter 11's).

The gated passes are cached per model and settings (:func:`linrec.experiment.results.cached_frames`).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from linrec.core.fit import rcond_for
from linrec.core.gated import fit_logistic_gate
from linrec.core.kinds import GATE_RULES
from linrec.core.moment_sink import trim_heap
from linrec.core.sample import Rows
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.experiment.measurement import profile_weights_id
from linrec.experiment.profiles import Profile
from linrec.experiment.pruning import pruning_costs
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.experiment.results import cached_frames
from linrec.experiment.swaps import eval_batches
from linrec.interventions.gating import gate_agreement, gating_curve, largest_share, needs_ffn, sample_rows
from linrec.progress import stage

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

SHARES = (0.25, 0.5, 0.9, 0.99)
"""The shares of rows routed to the map the chapter scores (beside 1, the plain affine map): 0.25, the low end of
the share the study routes in GPT-2 at under 1 % perplexity; 0.99, about as many rows kept for the FFN as the first
position apart keeps (one per window of 128)."""

AGREEMENT_SHARE = 0.9
"""The share of rows routed to the map at which gates trained on two texts are compared."""

BUDGET = 0.01
"""The largest share is read at ΔPPL under this share of the model's perplexity (the study's 1 %)."""

MEASURED = ["r2_lin", "r2_lin_after_first", "top_rows_share", "top_rows_share_after_first", "first_position_share"]
"""The measurement's columns set beside each gated block."""

HELD_OUT = 0
"""The fold of each text's row sample that neither gate trains on, where they are compared."""


def choose_blocks(costs: pd.DataFrame, costliest: int = 2, typical: int = 1) -> list[int]:
    """The blocks to gate from a model's swap costs (``kind, block, delta_ppl``, the affine kind read): the
    ``costliest`` whose plain affine swap costs most, and ``typical`` more of median cost among the rest (the block
    nearest the median, then the next nearest), in block order."""
    affine = costs[costs.kind == "affine"].sort_values(["delta_ppl", "block"], ascending=[False, True], kind="stable")
    if affine.empty:
        raise LinrecError("the costs hold no affine swap; pass pruning_costs(...)['costs']")
    top = [int(b) for b in affine.block.iloc[:costliest]]
    rest = affine.iloc[costliest:]
    middle = (rest.delta_ppl - rest.delta_ppl.median()).abs().sort_values(kind="stable")
    return sorted(top + [int(rest.block[i]) for i in middle.index[:typical]])


def second_text(profile: Profile, model: str) -> str:
    """The corpus a second gate is trained on: the first of the profile's corpora other than the one ``model`` is
    measured on."""
    main = profile.budget(model).corpus
    others = [c for c in profile.corpora if c != main]
    if not others:
        raise LinrecError(f"profile '{profile.name}' has no corpus beside {main} to train a second gate on")
    return others[0]


def gating_study(
    profile: Profile,
    model: str,
    *,
    blocks: Sequence[int] | None = None,
    rules: Sequence[str] = GATE_RULES,
    shares: Sequence[float] = SHARES,
    eval_tokens: int | None = None,
    budget: str = "5%",
    second_corpus: str | None = None,
    agreement_share: float = AGREEMENT_SHARE,
    agreement_rows: int | None = None,
    progress: bool = True,
    cache: bool = True,
) -> dict[str, pd.DataFrame]:
    """The gated blocks of profile model ``model`` (module docstring), on ``eval_tokens`` of its evaluation text
    (None: its budget's) and chapter 11's tables for the same tokens (``budget`` keys them: see
    :func:`linrec.experiment.pruning.pruning_costs`, read from the cache where the chapter computed it). Tables, each
    with a ``model`` column:

    * ``curve``: :func:`linrec.interventions.gating.gating_curve` of ``blocks`` (None: :func:`choose_blocks`) for
      each of ``rules`` and ``shares`` (and 1, the plain affine map);
    * ``largest``: per rule and block the largest share routed under :data:`BUDGET` of perplexity;
    * ``agreement``: per block and text whose held-out rows compare them (``rows_of``), gates trained on the fit text
      and on ``second_corpus`` (None: :func:`second_text`) at ``agreement_share``, on row samples of
      ``agreement_rows`` each (None: the budget's sample rows): the share routed alike, their scores' correlation;
    * ``blocks``: per gated block the measurement's :data:`MEASURED` columns, ``base_ppl``, the plain swap's and the
      first-position rule's ΔPPL (``affine``; ``first_apart``, with ``first_apart_low``, ``first_apart_high``), the
      share of rows the first-position rule sends to the map (``first_apart_routed``) and the architecture
      (``family``);
    * ``run``: the settings and how long the gated passes took (``seconds``, the run that computed them).
    """
    pruned = pruning_costs(profile, model, eval_tokens=eval_tokens, budget=budget, progress=progress, cache=cache)
    chosen = sorted({int(b) for b in blocks}) if blocks else choose_blocks(pruned["costs"])
    known = set(pruned["table"].block.astype(int))
    if missing := [b for b in chosen if b not in known]:
        raise LinrecError(f"{model} has no FFN block {missing}; its blocks are {min(known)}..{max(known)}")
    other = second_corpus or second_text(profile, model)
    rows = agreement_rows or int(profile.budget(model).sample_rows or 0)

    def compute() -> dict[str, pd.DataFrame]:
        started = time.perf_counter()
        frames = _gated(profile, model, chosen, rules, shares, eval_tokens, other, agreement_share, rows, progress)
        frames["run"] = frames["run"].assign(seconds=time.perf_counter() - started)
        return {name: frame.assign(model=model)[["model", *frame.columns]] for name, frame in frames.items()}

    if cache:
        content = {"profile": repr(profile), "model": model, "weights": profile_weights_id(profile, model, "final"),
                   "eval_tokens": eval_tokens, "blocks": chosen, "rules": list(rules),
                   "shares": sorted(float(s) for s in shares), "second_corpus": other,
                   "agreement_share": agreement_share, "agreement_rows": rows}  # fmt: skip
        frames = cached_frames("gating", content, compute)
    else:
        frames = compute()
    curve = frames["curve"]
    largest = largest_share(curve, BUDGET).assign(model=model)
    run = frames["run"].iloc[0]
    joined = _measured(pruned, chosen).assign(first_apart_routed=float(run.first_apart_routed), family=run.family)
    return {**frames, "largest": largest[["model", *largest.columns[:-1]]], "blocks": joined}


def _measured(pruned: dict[str, pd.DataFrame], blocks: list[int]) -> pd.DataFrame:
    """The measurement's columns and the plain and first-position swaps' costs of ``blocks``, from chapter 11's
    tables of one model."""
    table = pruned["table"].set_index("block")
    costs = pruned["costs"]
    affine = costs[costs.kind == "affine"].set_index("block")
    first = costs[costs.kind == "first-apart:own"].set_index("block")
    out = table.loc[blocks, ["model", *MEASURED]].reset_index()
    out["base_ppl"] = affine.base_ppl.loc[blocks].to_numpy()
    out["affine"] = affine.delta_ppl.loc[blocks].to_numpy()
    for column, source in (("first_apart", "delta_ppl"), ("first_apart_low", "delta_ppl_low"),
                           ("first_apart_high", "delta_ppl_high")):  # fmt: skip
        out[column] = first[source].loc[blocks].to_numpy()
    return out[["model", "block", *out.columns.drop(["model", "block"])]]


def _gated(
    profile: Profile,
    model: str,
    blocks: list[int],
    rules: Sequence[str],
    shares: Sequence[float],
    eval_tokens: int | None,
    other: str,
    agreement_share: float,
    rows: int,
    progress: bool,
) -> dict[str, pd.DataFrame]:
    """The gated passes of :func:`gating_study` on the loaded model: its curve, the gates' agreement and the run."""
    cut: list[TokenBatches] = []
    main = str(profile.budget(model).corpus)  # (budget() fills every field in)
    text = profile_corpus(profile, main)

    def fit_text(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase) -> None:
        cut.append(profile_batches(profile, tokenizer, text, model=config, name=model))

    net, tokenizer = load_profile_model(profile, model, "final", progress=progress, before_weights=fit_text)
    fit = cut[0]
    evals = eval_batches(profile, tokenizer, net, eval_tokens, name=model)
    seed = profile.seeds[0]
    curve = gating_curve(net, fit, evals, blocks, rules=rules, shares=shares, folds=profile.folds, seed=seed,
                         progress=progress)  # fmt: skip
    samples = {}
    for name in (main, other):
        batches = profile_batches(profile, tokenizer, profile_corpus(profile, name), max_rows=rows, model=net,
                                  name=model)  # fmt: skip
        with stage(f"{batches.n_rows:,} rows of {name}, for a gate trained on each text", progress):
            samples[name] = sample_rows(net, batches, blocks, rows, seed, progress=progress, folds=profile.folds)
    agreement = cross_text_agreement(samples, agreement_share, rcond_for(next(net.parameters()).dtype))
    run = pd.DataFrame([{
        "family": str(getattr(getattr(net, "config", None), "model_type", "")), "fit_corpus": main,
        "second_corpus": other, "fit_rows": fit.n_rows, "eval_tokens": evals.n_rows, "agreement_rows": rows,
        # the first-position rule routes every row but each window's first to the map
        "first_apart_routed": 1 - fit.n_sequences_total / fit.n_rows,
    }])  # fmt: skip
    del net
    gc.collect()
    trim_heap()
    return {"curve": curve, "agreement": agreement, "run": run}


def _part(rows: Rows, held_out: bool) -> Rows:
    keep = (rows.fold == HELD_OUT) if held_out else (rows.fold != HELD_OUT)
    return Rows(rows.x[keep], rows.y[keep], rows.fold[keep])


def cross_text_agreement(samples: dict[str, dict[int, Rows]], share: float, rcond: float) -> pd.DataFrame:
    """Per block and text: logistic gates trained at ``share`` on each text's sample (``samples``: text -> block ->
    rows with their folds) but its held-out fold (:data:`HELD_OUT`), compared on that text's held-out rows
    (:func:`linrec.interventions.gating.gate_agreement`; ``rows_of`` names the text, ``held_out_rows`` counts them)."""
    texts = list(samples)
    blocks = sorted(set.intersection(*(set(s) for s in samples.values())))
    out = []
    for block in blocks:
        gates = {}
        for name in texts:
            train = _part(samples[name][block], held_out=False)
            gates[name] = fit_logistic_gate(train.x, needs_ffn(train, rcond, share))
        for name in texts:
            held = _part(samples[name][block], held_out=True)
            table = gate_agreement(gates, held, share)
            out.append(table.assign(block=block, rows_of=name, held_out_rows=len(held)))
    frame = pd.concat(out, ignore_index=True)
    return frame[["block", "rows_of", "held_out_rows", *frame.columns.drop(["block", "rows_of", "held_out_rows"])]]
