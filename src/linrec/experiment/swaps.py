"""The zero-shot swap of a profile's measured models: each block alone replaced by its affine map, ΔPPL.

Chapters 2 (heterogeneity), 5 (compression) and 7 (corpora) all score the same swap: the
closed-form map fitted on all captured rows of a measurement, put in place of one FFN block at a
time, perplexity on the *eval* split of a corpus, text the fit never saw. It needs the profile
(which model to load, which text, how many tokens), so it lives here, once:

* :func:`eval_batches`: the profile's held-out evaluation tokens for one tokenizer.
* :func:`affine_swaps`: every block of every given measurement swapped alone, one table.
* :func:`greedy_frontiers`: from those single swaps, blocks added cheapest first under a perplexity budget, each
  step scored jointly (what ``linrec replace --max-ppl-increase`` does, on the profile's measurements).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pandas as pd
from torch import nn

from linrec.core.moment_sink import trim_heap
from linrec.core.replacements import fit_replacements
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.interventions.perplexity import greedy_selection, swap_deltas

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

LABELS = ("model", "checkpoint", "corpus")
"""The measurement's labels that lead each row of :func:`affine_swaps` (those of the fitted rows)."""


def eval_batches(
    profile: Profile,
    tokenizer: PreTrainedTokenizerBase,
    model: nn.Module | None = None,
    tokens: int | None = None,
    corpus: str | None = None,
    name: str | None = None,
) -> TokenBatches:
    """``tokens`` of the eval split of ``corpus``, a split never used for fitting; ``model`` bounds the sequence
    length. Defaults: the evaluation tokens and corpus of profile model ``name``'s budget
    (:meth:`~linrec.experiment.profiles.Profile.budget`), else the profile's ``eval_tokens`` and ``eval_corpus``."""
    corpus = corpus or profile.eval_corpus_of(name)
    return profile_batches(profile, tokenizer, profile_corpus(profile, corpus), split="eval", max_rows=tokens,
                           model=model, name=name)  # fmt: skip


def affine_swaps(
    profile: Profile,
    measurements: Iterable[ProfileMeasurement],
    corpus: str | None = None,
    max_tokens: int | None = None,
    progress: bool = True,
    cache: bool = False,
    blocks: Sequence[int] | None = None,
) -> pd.DataFrame:
    """ΔPPL of each block (or each of ``blocks``) of each measured model swapped alone for its closed-form affine map.

    Each measurement's model is loaded at its checkpoint, its affine maps are fitted on all its
    captured rows, and perplexity is scored on :func:`eval_batches` of ``corpus`` (default: each model's
    evaluation corpus, :meth:`~linrec.experiment.profiles.Profile.eval_corpus_of`), ``max_tokens`` of it: the
    unmodified model once, then each block in depth order (:func:`linrec.interventions.perplexity.swap_deltas`).
    Columns: ``model, checkpoint, corpus`` (the fitted rows'), those of ``swap_deltas``, ``relative`` (ΔPPL / PPL,
    comparable across corpora), ``eval_corpus`` and ``eval_tokens``; measurements in the order given. ``cache``:
    keep each measurement's table in the cache (:func:`linrec.experiment.results.cached_frames`; measurements from
    the cache).
    """
    tables = []
    for m in measurements:
        scored = corpus or profile.eval_corpus_of(m.info.model)

        def compute(m: ProfileMeasurement = m, scored: str = scored) -> dict[str, pd.DataFrame]:
            net, tokenizer = load_profile_model(profile, m.info.model, m.info.checkpoint, progress=progress)
            batches = eval_batches(profile, tokenizer, net, max_tokens, scored, m.info.model)
            chosen = m.moments if blocks is None else {b: m.moments[b] for b in sorted(set(blocks))}
            table = swap_deltas(net, batches, fit_replacements(chosen, "affine", rcond=m.rcond), progress=progress)
            del net  # freed here with its reference cycles and heap pages, not beside the next model loaded
            gc.collect()
            trim_heap()
            for i, column in enumerate(LABELS):
                table.insert(i, column, getattr(m.info, column))
            table["relative"] = table["delta_ppl"] / table["base_ppl"]
            table["eval_corpus"] = scored
            table["eval_tokens"] = batches.n_rows
            return {"swaps": table}

        if cache:
            content = {"measurement": measurement_identity(m), "profile": repr(profile), "corpus": scored,
                       "eval_sha256": profile_corpus(profile, scored).sha256, "max_tokens": max_tokens,
                       **({} if blocks is None else {"blocks": sorted(set(blocks))})}  # fmt: skip
            tables.append(cached_frames("swaps", content, compute)["swaps"])
        else:
            tables.append(compute()["swaps"])
    if not tables:
        raise LinrecError("no measurements given; pass at least one linrec.experiment.measurement.measurement(...)")
    return pd.concat(tables, ignore_index=True)


def greedy_frontiers(
    profile: Profile,
    measurements: Iterable[ProfileMeasurement],
    single: pd.DataFrame,
    max_increase: str,
    progress: bool = True,
    cache: bool = False,
) -> pd.DataFrame:
    """Each measured model's blocks chosen greedily under ``max_increase`` (``"5%"`` or an absolute ΔPPL), ordered
    by their own affine-swap ΔPPL in ``single`` (one row per model and block, as :func:`affine_swaps` gives, scored
    on ``eval_tokens`` of ``eval_corpus``: the same tokens are used here, and a different base perplexity is
    refused), every step scored with all chosen maps in
    place (:func:`linrec.interventions.perplexity.greedy_selection`). Columns: ``model`` and ``greedy_selection``'s,
    with ``relative`` (joint ΔPPL / PPL); ``cache`` as :func:`affine_swaps`'s."""
    tables = []
    for m in measurements:
        rows = single[single.model == m.info.model]
        if rows.empty:
            raise LinrecError(f"no single swaps of '{m.info.model}' given; score them first with affine_swaps")
        scored, tokens = str(rows.eval_corpus.iloc[0]), int(rows.eval_tokens.iloc[0])

        def compute(
            m: ProfileMeasurement = m, rows: pd.DataFrame = rows, scored: str = scored, tokens: int = tokens
        ) -> dict:
            net, tokenizer = load_profile_model(profile, m.info.model, m.info.checkpoint, progress=progress)
            batches = eval_batches(profile, tokenizer, net, tokens, scored, m.info.model)
            blocks = sorted(int(b) for b in rows.block)
            maps = fit_replacements({b: m.moments[b] for b in blocks}, "affine", rcond=m.rcond)
            steps = greedy_selection(net, batches, maps, max_increase, progress=progress, single=rows)
            if abs(steps.ppl.iloc[0] / rows.base_ppl.iloc[0] - 1) > 1e-9:
                raise LinrecError(
                    f"'{m.info.model}' scores perplexity {steps.ppl.iloc[0]:.6g} here and {rows.base_ppl.iloc[0]:.6g} "
                    "in the single swaps given: not the same evaluation tokens; give swaps of these measurements"
                )
            steps.insert(0, "model", m.info.model)
            steps["relative"] = steps.delta_ppl / steps.ppl.iloc[0]
            return {"steps": steps}

        if cache:
            content = {"measurement": measurement_identity(m), "profile": repr(profile), "corpus": scored,
                       "eval_sha256": profile_corpus(profile, scored).sha256, "tokens": tokens,
                       "budget": max_increase, "single": rows[["block", "delta_ppl"]].to_dict("list"),
                       "rule": "a block over the budget is skipped and the next tried"}  # fmt: skip
            tables.append(cached_frames("greedy", content, compute)["steps"])
        else:
            tables.append(compute()["steps"])
    if not tables:
        raise LinrecError("no measurements given; pass at least one linrec.experiment.measurement.measurement(...)")
    return pd.concat(tables, ignore_index=True)
