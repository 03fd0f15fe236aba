"""Chapter 9 (your model): reading a recoverability table as a practitioner, and checking a replaced model.

What measuring costs, the numbers the appendix sets beside the paper's, and the check of a replacement directory
loaded back: its perplexity recomputed from the model's own loss, set beside the report's. (The candidate rule is
:meth:`linrec.Measurement.candidates`; the choice and the directory are ``linrec replace``'s.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from linrec.core.plan import capture_bytes
from linrec.data.tokens import TokenBatches
from linrec.report.claims import Claim

ROUND_TRIP = 1e-4
"""The largest relative difference between a loaded replacement's perplexity and its report's that counts as the
same model: float32 sums in another order differ by far less, a wrong or missing map by far more."""


def cost_table(models: dict[str, tuple[int, int]], folds: int = 5) -> pd.DataFrame:
    """Moment memory for ``{name: (width, n_blocks)}``: all blocks in one pass, and one block per pass (the first
    position of each window kept apart, :func:`linrec.core.plan.capture_bytes`)."""
    rows = []
    for name, (width, blocks) in models.items():
        rows.append(
            {
                "model": name,
                "width": width,
                "blocks": blocks,
                "folds": folds,
                "all blocks at once (GiB)": capture_bytes(width, blocks, folds, first_apart=True) / 2**30,
                "one block per pass (GiB)": capture_bytes(width, 1, folds, first_apart=True) / 2**30,
            }
        )
    return pd.DataFrame(rows)


def your_model_claims(swaps: pd.DataFrame, timing: Mapping[str, float], name: str) -> list[Claim]:
    """Headline numbers for the measured model: ΔPPL of swapping its highest-R²_lin block of ``swaps`` (a
    :func:`linrec.interventions.perplexity.swap_deltas` table with ``r2_lin``) for its affine map, beside the
    paper's GPT-2 figure, and the capture's time over a bare forward's
    (:func:`linrec.core.cost.capture_overhead`)."""
    best = swaps.sort_values("r2_lin", ascending=False).iloc[0]
    return [
        Claim.measure(
            "ΔPPL of the highest-R² block swapped for its affine map",
            best.delta_ppl,
            paper="+0.77 (GPT-2 early block, 8× fewer parameters)",
            unit="perplexity",
            note=f"{name} block {int(best.block)}, R²_lin {best.r2_lin:.3f}, {best.ratio:.1f}× fewer numbers",
        ),
        Claim.measure(
            "capture time / bare forward time",
            timing["capture_s"] / timing["bare_s"],
            unit="ratio",
            note=f"{name}, {int(timing['tokens']):,} tokens",
        ),
    ]


def own_loss_perplexity(model: nn.Module, batches: TokenBatches) -> float:
    """Perplexity from the model's own token-level loss (transformers' ``labels=``, padding ignored), weighted by
    the tokens each window predicts: written without linrec's scorer, so it checks it."""
    total, tokens = 0.0, 0
    device = next(model.parameters()).device
    with torch.no_grad():
        for batch in batches:
            ids, mask = batch.input_ids.to(device), batch.attention_mask.to(device)
            labels = ids.masked_fill(mask == 0, -100)
            n = int((labels[:, 1:] != -100).sum())
            total += float(model(input_ids=ids, attention_mask=mask, labels=labels).loss) * n
            tokens += n
    return math.exp(total / tokens)


def replaced_claims(record: Mapping, loaded_ppl: float, name: str) -> list[Claim]:
    """What ``linrec replace`` did to ``name`` (its record) and whether the saved directory loads back to the
    perplexity its report states (``loaded_ppl``: :func:`own_loss_perplexity` of the loaded model on the evaluation
    tokens), within :data:`ROUND_TRIP`."""
    ppl, params = record["ppl"], record["params"]
    gap = abs(loaded_ppl - ppl["replaced"]) / ppl["replaced"]
    blocks = ", ".join(str(b["block"]) for b in record["blocks"])
    return [
        Claim.check(
            "a replaced model, saved, loads back to its reported perplexity",
            "not in the paper (this book's practitioner path)",
            f"{loaded_ppl:.6g} loaded, {ppl['replaced']:.6g} reported (relative difference {gap:.1e})",
            gap <= ROUND_TRIP,
            value=gap,
            note=f"{name}: blocks {blocks} replaced, {params['model_before']:,} → {params['model_after']:,} numbers",
            rule=f"yes when the loaded model's perplexity on the evaluation text, from its own loss, is within "
            f"{ROUND_TRIP:g} (relative) of the report's; no otherwise",
        ),
        Claim.measure(
            f"ΔPPL of the blocks linrec replace chose under {record['selection']['max_ppl_increase']}",
            ppl["delta_ppl"],
            interval=(ppl["delta_ppl_low"], ppl["delta_ppl_high"]),
            unit="perplexity",
            note=f"{name}: blocks {blocks}, perplexity {ppl['base']:.4g} → {ppl['replaced']:.4g}",
        ).of(name),
    ]


def _speed(latency: Mapping) -> str:
    """Decoding speed before → after, with the speed-up where every pair of runs agrees on its side of 1."""
    rates = f"{latency['base_tokens_per_s']:.3g} → {latency['replaced_tokens_per_s']:.3g}"
    if "speedup" not in latency:
        return rates
    return rates + (f" ({latency['speedup']:.2f}x)" if latency["speedup_clear"] else " (no change the runs can tell)")


def replaced_summary(record: Mapping, loaded_ppl: float | None, name: str) -> dict[str, object]:
    """One row on what ``linrec replace`` did to ``name``: blocks chosen (or, when none fits the budget, the
    cheapest block's own cost), numbers stored, perplexity on both texts, decoding speed, and the loaded model's
    perplexity (``loaded_ppl``; None when nothing was saved)."""
    ppl, params, second, latency = record["ppl"], record["params"], record["second_text"], record["latency"]
    steps = record["steps"]
    chosen = ", ".join(str(b["block"]) for b in record["blocks"])
    if not chosen:
        chosen = f"none: the cheapest, block {steps[1]['block']}, costs {steps[1]['delta_ppl']:+.3g} alone"
    row: dict[str, object] = {
        "model": name,
        "budget": record["selection"]["max_ppl_increase"],
        "blocks chosen (in order)": chosen,
        "numbers stored": f"{params['model_before']:,} → {params['model_after']:,}",
        "perplexity": f"{ppl['base']:.4g} → {ppl['replaced']:.4g}",
        "ΔPPL [95% interval]": f"{ppl['delta_ppl']:+.3g} [{ppl['delta_ppl_low']:+.3g}, {ppl['delta_ppl_high']:+.3g}]",
        "loaded back": "–" if loaded_ppl is None else f"{loaded_ppl:.6g}",
        "tokens/s (median of runs in turns)": _speed(latency),
    }
    if second is not None:
        row["second text: perplexity"] = f"{second['base_ppl']:.4g} → {second['replaced_ppl']:.4g}"
        row["second text ΔPPL [95% interval]"] = (
            f"{second['delta_ppl']:+.3g} [{second['delta_ppl_low']:+.3g}, {second['delta_ppl_high']:+.3g}]"
        )
    return row


def shipped_summary(directory: Path, record: Mapping, plain_ppl: float | None) -> dict[str, object]:
    """One row on what ``linrec export`` wrote to ``directory``: its form (and why not plain), size, the layers its
    model has, and the perplexity on the evaluation tokens in the replacement record beside the one computed again
    from the exported model loaded by transformers alone (``plain_ppl``; None for the linrec form)."""
    import json

    note = json.loads((directory / "linrec-export.json").read_text(encoding="utf-8"))
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return {
        "form": note["form"] if note["form"] == "linrec" else "plain checkpoint",
        "why not plain": "; ".join(note["reasons"]) or "–",
        "size (MB)": round(size / 1e6, 1),
        "largest logit difference (of the largest logit)": f"{note['max_logit_difference']:.1e}",
        "perplexity, linrec's record": f"{record['ppl']['replaced']:.6g}",
        "perplexity, transformers alone": "–" if plain_ppl is None else f"{plain_ppl:.6g}",
    }
