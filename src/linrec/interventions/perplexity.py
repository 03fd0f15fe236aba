"""Perplexity with FFN blocks swapped out: per-block ΔPPL and the compression frontier.

Perplexity is exp of the mean next-token negative log-likelihood over every predicted token of
the evaluation batches (token t+1 scored from tokens ≤ t; a pair is scored when both tokens are
real, not padding), accumulated in float64. The evaluation batches must come from held-out
text, never from the text whose rows fitted the replacements: cut them from a separate part of
the corpus (e.g. ``make_batches`` on a held-out split). The model must be a causal LM with its
head (``load_model`` loads one) and in eval mode.

* :func:`swap_deltas`: each block swapped alone, ΔPPL = PPL(swapped) - PPL(original).
* :func:`compression_frontier`: blocks swapped cumulatively in order of R²_lin, highest
  first; after each step the cumulative numbers saved and ΔPPL: the compression frontier.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from linrec.core.capture import input_device, require_eval
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.surgery import ffn_site, n_stored, param_table, swapped
from linrec.models.arch import Spec, ffn_blocks


def perplexity(model: nn.Module, batches: TokenBatches, progress: bool = False) -> float:
    """exp(mean next-token NLL) of ``model`` over ``batches`` (held-out text)."""
    require_eval(model, "perplexity")
    device = input_device(model)
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in tqdm(batches, desc="perplexity", disable=not progress):
            out = model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device))
            logits = getattr(out, "logits", None)
            if logits is None:
                raise LinrecError(
                    "the model returned no logits; perplexity needs a causal LM with its head (AutoModelForCausalLM)"
                )
            mask = batch.attention_mask.bool()
            scored = (mask[:, 1:] & mask[:, :-1]).to(logits.device)
            targets = batch.input_ids[:, 1:].to(logits.device)
            nll = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), targets, reduction="none")
            total += float(nll[scored].to(torch.float64).sum())
            count += int(scored.sum())
    if count == 0:
        raise LinrecError("the evaluation batches contain no token pairs to score; use sequences of at least 2 tokens")
    return math.exp(total / count)


def swap_deltas(
    model: nn.Module,
    eval_batches: TokenBatches,
    replacements: Mapping[int, nn.Module],
    spec: Spec = None,
    progress: bool = True,
    base: float | None = None,
) -> pd.DataFrame:
    """Each block swapped alone: ``block, ppl, base_ppl, delta_ppl, params, original_params, ratio``
    (the last three from :func:`linrec.interventions.surgery.param_table`).

    ``base``: the unmodified model's perplexity on ``eval_batches``, when already known (saves a pass).
    """
    base = perplexity(model, eval_batches) if base is None else base
    rows = []
    for b in tqdm(sorted(replacements), desc="swap ΔPPL", disable=not progress):
        with swapped(model, {b: replacements[b]}, spec):
            ppl = perplexity(model, eval_batches)
        rows.append({"block": b, "ppl": ppl, "base_ppl": base, "delta_ppl": ppl - base})
    stored = param_table(model, replacements, spec)[["params", "original_params", "ratio"]]
    return pd.concat([pd.DataFrame(rows, columns=["block", "ppl", "base_ppl", "delta_ppl"]), stored], axis=1)


def compression_frontier(
    model: nn.Module,
    eval_batches: TokenBatches,
    replacements: Mapping[int, nn.Module],
    r2_lin: Mapping[int, float],
    spec: Spec = None,
    progress: bool = True,
    base: float | None = None,
) -> pd.DataFrame:
    """Swap blocks cumulatively in order of R²_lin (highest first); one row per step, step 0 the original.

    ``base``: the unmodified model's perplexity on ``eval_batches``, when already known (saves a pass).

    Columns: ``step, block`` (added at this step), ``r2_lin, params_saved`` (cumulative, numbers
    stored), ``ffn_saved_fraction`` (of all FFN blocks' numbers), ``model_saved_fraction`` (of
    the model's), ``ppl, delta_ppl``.
    """
    missing = [b for b in replacements if b not in r2_lin]
    if missing:
        raise LinrecError(f"no R²_lin for blocks {missing}; give r2_lin for every replaced block")
    order = sorted(replacements, key=lambda b: (-r2_lin[b], b))
    ffn_total = sum(n_stored(ffn_site(model, b.index, spec)[2]) for b in ffn_blocks(model, spec))
    model_total = n_stored(model)
    base = perplexity(model, eval_batches) if base is None else base
    rows = [
        {
            "step": 0,
            "block": None,
            "r2_lin": None,
            "params_saved": 0,
            "ffn_saved_fraction": 0.0,
            "model_saved_fraction": 0.0,
            "ppl": base,
            "delta_ppl": 0.0,
        }
    ]
    saved = 0
    for step, b in enumerate(tqdm(order, desc="frontier", disable=not progress), start=1):
        saved += n_stored(ffn_site(model, b, spec)[2]) - n_stored(replacements[b])
        with swapped(model, {c: replacements[c] for c in order[:step]}, spec):
            ppl = perplexity(model, eval_batches)
        rows.append(
            {
                "step": step,
                "block": b,
                "r2_lin": r2_lin[b],
                "params_saved": saved,
                "ffn_saved_fraction": saved / ffn_total,
                "model_saved_fraction": saved / model_total,
                "ppl": ppl,
                "delta_ppl": ppl - base,
            }
        )
    return pd.DataFrame(rows).astype({"block": "Int64"})
