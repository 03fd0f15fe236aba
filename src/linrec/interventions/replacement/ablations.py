"""Replacement kinds side by side: each block swapped alone for its FFN removed, its mean output, its affine map or
a low-rank one, scored on the evaluation text and, for stability, on a text of another domain.

The practitioner's checklist asks for exactly this before anything is changed for good: removal, mean, linear and
low-rank replacement as separate ablations of the same blocks, read by lower, middle and upper layers, with the
numbers each stores and what decoding costs. :func:`ablations` gives one row per (kind, block);
:func:`block_kinds` and :func:`fitted_maps` are the two steps :func:`linrec.interventions.replacement.replace.replace`
shares with it (a ``lowrank:P%`` kind resolved per block, then every map fitted at the measurement's cutoff).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from linrec.core.kinds import GATED
from linrec.core.measure import Measurement
from linrec.core.replacements import Kind
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.gating import gated_replacements
from linrec.interventions.latency import decode_rate
from linrec.interventions.perplexity import WindowNLL, swap_deltas
from linrec.interventions.surgery import ffn_site, n_stored, swapped
from linrec.progress import progress_bar

DEPTHS = ("lower", "middle", "upper")


def depth_third(block: int, n_blocks: int) -> str:
    """Whether ``block`` of ``n_blocks`` sits in the lower, middle or upper third of the model's depth."""
    return DEPTHS[min(2, 3 * block // n_blocks)]


def block_kinds(model: nn.Module, kind: Kind, blocks: Sequence[int]) -> dict[int, Kind]:
    """``kind`` for each of ``blocks``, a ``lowrank:P%`` one as the rank that fits each block's own FFN
    (:meth:`linrec.core.replacements.Kind.within`); reading each FFN also refuses one spread over two modules."""
    width = int(getattr(model, "config").hidden_size)  # noqa: B009 (a PreTrainedModel's config: typed as Any)
    return {b: kind.within(n_stored(ffn_site(model, b)[2]), width, width) for b in blocks}


def fitted_maps(
    measurement: Measurement,
    kinds: Mapping[int, Kind],
    progress: bool = False,
    fit: tuple[nn.Module, TokenBatches] | None = None,
) -> dict[int, nn.Module]:
    """Each block's replacement of its kind, fitted on all of ``measurement``'s rows at its cutoff, in the order of
    ``kinds`` (the maps scored are the maps installed); ``progress``: a bar over the blocks. Gated kinds are fitted on
    the rows their gates route, which needs ``fit``, the model and the batches it was measured on
    (:func:`linrec.interventions.gating.gated_replacements`: two passes over them for all of a kind's blocks)."""
    gated: dict[str, list[int]] = {}
    for b, kind in kinds.items():
        if kind.name == GATED:
            gated.setdefault(str(kind), []).append(b)
    if gated and fit is None:
        raise LinrecError(f"{', '.join(gated)} is fitted on the model's rows, not on moments: give the fit text too")
    done: dict[int, nn.Module] = {}
    for name, blocks in gated.items():
        assert fit is not None  # (refused above)
        done.update(gated_replacements(*fit, name, blocks, seed=measurement.provenance.seed, progress=progress))
    bar = progress_bar([b for b in kinds if b not in done], desc="maps", unit="block", disable=not progress)
    done.update({b: measurement.replacements(str(kinds[b]), [b])[b] for b in bar})
    return {b: done[b] for b in kinds}


def ablations(
    model: nn.Module,
    eval_batches: TokenBatches,
    measurement: Measurement,
    kinds: Sequence[str],
    blocks: Sequence[int] | None = None,
    *,
    second_batches: TokenBatches | None = None,
    base: WindowNLL | None = None,
    second_base: WindowNLL | None = None,
    prompt: torch.Tensor | None = None,
    fit_batches: TokenBatches | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Each of ``blocks`` (default: every measured one) swapped alone for a replacement of each of ``kinds``
    (``zero``, ``mean``, ``affine``, ``lowrank:K``, ``lowrank:P%``, ``remove``, ...), fitted on ``measurement``'s rows.

    One row per (kind, block): ``ablation`` (the kind as given), ``kind`` (as resolved for the block), ``block``,
    ``depth`` (:func:`depth_third`), the columns of :func:`linrec.interventions.perplexity.swap_deltas` on
    ``eval_batches`` and, with ``second_batches``, ``second_delta_ppl`` (``_low``, ``_high``) on that text. With
    ``prompt``, ``tokens_per_s``: greedy decoding from it with the kind's maps in every one of ``blocks`` at once
    (:func:`linrec.interventions.latency.decode_rate`; one block alone changes a step's time too little to read;
    NaN for ``remove`` when ``blocks`` are all of them, which leaves no model).
    ``base``, ``second_base``: the unmodified model's window NLL on each text, when already known. ``fit_batches``:
    the text ``measurement`` was made on, which a gated kind is fitted on (:func:`fitted_maps`).
    """
    chosen = measurement.blocks if blocks is None else list(blocks)
    config = getattr(model, "config")  # noqa: B009 (typed as Any)
    n_blocks, width = int(config.num_hidden_layers), int(config.hidden_size)
    parsed = [Kind.parse(kind).check_width(width) for kind in kinds]  # every kind before any swap
    tables = []
    for kind, asked in zip(kinds, parsed):
        resolved = block_kinds(model, asked, chosen)
        maps = fitted_maps(measurement, resolved, fit=None if fit_batches is None else (model, fit_batches))
        table = swap_deltas(model, eval_batches, maps, progress=progress, base=base)
        if second_batches is not None:
            other = swap_deltas(model, second_batches, maps, progress=progress, base=second_base).set_index("block")
            for column in ("delta_ppl", "delta_ppl_low", "delta_ppl_high"):
                table[f"second_{column}"] = table.block.map(other[column])
        table.insert(0, "kind", table.block.map(lambda b: str(resolved[b])))  # noqa: B023 (used at once)
        table.insert(0, "ablation", kind)
        table.insert(2, "depth", [depth_third(b, n_blocks) for b in table.block])
        if prompt is not None and asked.name == "remove" and len(maps) == n_blocks:
            table["tokens_per_s"] = math.nan  # every block removed leaves no model to time
        elif prompt is not None:
            with swapped(model, maps):
                table["tokens_per_s"] = decode_rate(model, prompt).tokens_per_s
        tables.append(table)
    return pd.concat(tables, ignore_index=True)
