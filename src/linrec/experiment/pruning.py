"""Which score says which block to drop: every block of a profile model scored by each pruning score and by what
dropping it actually costs, on the same tokens.

For one model of a profile (:func:`pruning_costs`): a capture of the text the profile measures it on, with the first
position of each window apart (:meth:`linrec.core.measure.Measurement.capture`: the rows of the profile's own
measurement, so R²_lin and the scores equal chapter 2's), then on the model's held-out evaluation text

* each block alone: its FFN replaced by each of :data:`KINDS` (removed, its mean, its affine map, the map with the
  first position apart), and the whole block removed (:func:`linrec.interventions.perplexity.removal_deltas`);
* the practical test: blocks dropped in the order each score gives (:func:`linrec.core.scores.cheapest_first`), and
  in the order of their own measured cost (what ``linrec replace`` does), until the joint ΔPPL passes the budget,
  by two mechanisms: each FFN swapped for its affine map, and each whole block removed
  (:func:`linrec.interventions.perplexity.budget_walk`, the joint scores shared between orders).

Cached per model and settings (:func:`linrec.experiment.results.cached_frames`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import pandas as pd
from torch import nn

from linrec.core.extras import ALL
from linrec.core.measure import Measurement
from linrec.core.moment_sink import trim_heap
from linrec.core.resume import decoder_layers, passing
from linrec.core.scores import COSTLIER, MEASURED, cheapest_first
from linrec.data.tokens import TokenBatches
from linrec.experiment.measurement import measurement, profile_weights_id
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.experiment.results import cached_frames
from linrec.experiment.swaps import affine_swaps, eval_batches
from linrec.interventions.perplexity import budget_ppl, budget_walk, pass_rows, removal_deltas, window_nll
from linrec.interventions.replacement.ablations import ablations
from linrec.interventions.surgery import n_stored, swapped
from linrec.models.arch import ffn_blocks

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

KINDS = ("zero", "mean", "affine", "first-apart:mean", "first-apart:own")
"""What each block's FFN is replaced by, alone, for its cost."""

LAYER = "layer"
"""The cost of removing the whole block (attention and FFN), beside :data:`KINDS`."""

MECHANISMS = ("affine", LAYER)
"""How the practical test drops a block: its FFN swapped for the affine map, or the whole block removed."""


def pruning_costs(
    profile: Profile,
    model: str,
    *,
    eval_tokens: int | None = None,
    budget: str = "5%",
    progress: bool = True,
    cache: bool = True,
) -> dict[str, pd.DataFrame]:
    """The scores and costs of every block of profile model ``model`` (module docstring), on ``eval_tokens`` of its
    evaluation text (None: its budget's). Tables, each with a ``model`` column: ``table`` (the measurement's, with
    every score), ``costs`` (``kind, block, base_ppl, ppl, delta_ppl, delta_ppl_low, delta_ppl_high, params,
    original_params``, one row per kind of :data:`KINDS` and :data:`LAYER` and block) and ``walks`` (``mechanism,
    order, step, block, blocks, numbers_saved, ppl, delta_ppl, delta_ppl_low, delta_ppl_high, kept``: each order
    walked until the joint ΔPPL passes ``budget``, ``"5%"`` of the model's perplexity or an absolute ΔPPL)."""

    def compute() -> dict[str, pd.DataFrame]:
        cut: list[TokenBatches] = []
        text = profile_corpus(profile, profile.budget(model).corpus)

        def fit_text(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase) -> None:
            cut.append(profile_batches(profile, tokenizer, text, model=config, name=model))

        # The affine swaps alone are chapter 5's (:func:`linrec.experiment.swaps.affine_swaps`, cached): the same maps,
        # fitted on the same rows, scored on the same tokens; read (or computed) there, before this model loads.
        shared = measurement(profile, model, progress=progress)
        affine = affine_swaps(profile, [shared], max_tokens=eval_tokens, progress=progress, cache=True)
        del shared
        net, tokenizer = load_profile_model(profile, model, "final", progress=progress, before_weights=fit_text)
        measured = Measurement.capture(net, cut[0], folds=profile.folds, seed=profile.seeds[0], progress=progress,
                                       name=model, memory=profile.memory, extras=ALL)  # fmt: skip
        evals = eval_batches(profile, tokenizer, net, eval_tokens, name=model)
        out = _costs(net, evals, measured, affine, budget, progress)
        del net, measured
        gc.collect()
        trim_heap()
        return {name: frame.assign(model=model)[["model", *frame.columns]] for name, frame in out.items()}

    if not cache:
        return compute()
    content = {"profile": repr(profile), "model": model, "weights": profile_weights_id(profile, model, "final"),
               "eval_tokens": eval_tokens, "budget": budget, "kinds": list(KINDS),
               "scores": list(COSTLIER)}  # fmt: skip
    return cached_frames("pruning", content, compute)


def _costs(
    net: nn.Module, evals: TokenBatches, measured: Measurement, affine_alone: pd.DataFrame, budget: str, progress: bool
) -> dict[str, pd.DataFrame]:
    """The tables of :func:`pruning_costs` for a loaded model and its measurement, each block's affine swap alone
    given (``affine_alone``: :func:`linrec.experiment.swaps.affine_swaps` on the same tokens)."""
    base = window_nll(net, evals, progress)
    others = ablations(net, evals, measured, [k for k in KINDS if k != "affine"], base=base, progress=progress)
    alone = {"affine": affine_alone.assign(kind="affine"), **dict(list(others.groupby("ablation", sort=False)))}
    single = pd.concat([alone[k] for k in KINDS], ignore_index=True)
    removed = removal_deltas(net, evals, measured.blocks, progress=progress, base=base)
    layers = decoder_layers(net, ffn_blocks(net))
    assert layers is not None  # removal_deltas found them
    removed = removed.assign(kind=LAYER, original_params=removed.params, params=0)
    columns = ["kind", "block", "base_ppl", "ppl", "delta_ppl", "delta_ppl_low", "delta_ppl_high", "params",
               "original_params"]  # fmt: skip
    costs = pd.concat([single[columns], removed[columns]], ignore_index=True)
    table = measured.table()
    affine = measured.replacements("affine")
    swaps = single[single.kind == "affine"]
    how: dict[str, tuple[Callable[[list[int]], AbstractContextManager[object]], dict[int, int]]] = {
        "affine": (
            lambda blocks: swapped(net, {b: affine[b] for b in blocks}),
            dict(zip(swaps.block.astype(int), (swaps.original_params - swaps.params).astype(int), strict=True)),
        ),
        LAYER: (lambda blocks: passing([layers[b] for b in blocks]), {b: n_stored(layers[b]) for b in measured.blocks}),
    }
    limit = budget_ppl(budget, base.ppl)
    walks = []
    for mechanism, (dropped, saves) in how.items():
        own = costs[costs.kind == mechanism].sort_values(["delta_ppl", "block"], kind="stable")
        orders = {MEASURED: [int(b) for b in own.block], **{s: cheapest_first(table, s) for s in _known(table)}}
        # A walk's first step is its block dropped alone: the same model as that block's own cost (scored with the
        # layers below replayed, the same numbers bit for bit), so no walk scores it again.
        memo = {frozenset([b]): row for b, row in pass_rows(own).items()}
        for name, order in orders.items():
            walk = budget_walk(net, evals, order, dropped, base, limit, saves, memo)
            walks.append(walk.assign(mechanism=mechanism, order=name))
    steps = pd.concat(walks, ignore_index=True)
    return {"table": table, "costs": costs, "walks": steps[["mechanism", "order", *steps.columns[:-2]]]}


def _known(table: pd.DataFrame) -> list[str]:
    """The scores the table holds (all of :data:`linrec.core.scores.COSTLIER` where the residual stream was seen)."""
    return [s for s in COSTLIER if s in table and table[s].notna().any()]
