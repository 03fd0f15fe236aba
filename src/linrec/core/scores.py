"""The layer-pruning scores of the literature, read from the residual stream in the capture's own pass.

Practitioners choose which blocks to drop by a score; the field has several, each computed here on the same rows as
R²_lin, with no extra forward pass (hooks on each block's decoder layer and on the module whose output the layer adds
to its residual stream for the FFN: :func:`linrec.models.arch.residual_sites`). With h the stream entering the
layer, h' the stream leaving it and a what the FFN adds to it (so h' − a is the stream the FFN's output is added to):

* **Block Influence** (ShortGPT, Men et al. 2024): 1 − the mean over rows of cos(h, h'), of the whole layer
  (``block_influence``) and of the FFN sublayer alone, cos(h' − a, h') (``ffn_block_influence``).
* **Angular distance** (Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper Layers"): the mean of
  arccos(cos)/π over the same pairs (``angular_distance``, ``ffn_angular_distance``). Gromov et al. read the last
  token of each text, and so do the tools that select blocks by it: PruneMe, and ReplaceMe (Shopkhoev et al. 2025),
  whose ``distance.py`` ranks spans of layers by the last non-padded token's arccos(cos)/π, not by Block Influence.
  Here every captured row counts, for both scores.
* **The last block.** Here h' is always the layer's own output. ShortGPT's and PruneMe's code (and ReplaceMe's, which
  follows PruneMe's) read transformers' ``hidden_states``, whose last entry is the stream after the model's final
  norm, so for the last block they compare its input with a normalised output and their numbers differ from these
  there (only there). The raw output is the sounder choice: the final norm stays when the block goes, and what the
  score should see is what the block writes.
* **Output energy**: Σ‖a‖² / Σ‖h' − a‖², how much the block writes next to the stream it writes into
  (``output_energy``); the table's ``unexplained_energy`` is (1 − R²_lin) Σ‖a − ā‖² / Σ‖h' − a‖², the energy the
  affine map leaves for a swap to perturb (exact where a is the FFN's own output, as in every family but Gemma 3,
  whose norm after the FFN rescales it).
* **Layer linearity** ("Your Transformer is Secretly Linear", Razzhigaev et al. 2024; LLM-Microscope): the share of
  the centred layer output h' that a least-squares map from the centred input h explains, Σ of squared errors over
  the centred total (their normalisation by the Frobenius norm cancels in the ratio). Its moments would be as large
  as the block's own, so it is fitted on a seeded sample of the rows (:class:`linrec.core.sample.RowSample`, about
  an eighth of what the moments of a block hold for five folds), held out by the capture's folds
  (``layer_linearity``) and in sample as the paper defines it (``layer_linearity_in_sample``). LLM-Microscope's own
  code scores in sample on every row; an in-sample fit on the sample's 4,096 rows (four per input dimension above a
  width of 1,024: :func:`linrec.core.plan.sample_rows`) has fewer rows per parameter and overfits a little more, so
  ``layer_linearity_in_sample`` reads somewhat above that all-rows score: by up to 0.027, as reported when the two
  were compared. ``layer_linearity``, held out, has no such optimism.

The capture's sink that computes them is :class:`linrec.core.residual.ResidualSink`; every sum is float64, kept on
the device the rows are on, and read once at the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from linrec.errors import LinrecError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = {
    "block_influence": "ShortGPT's Block Influence of the whole layer: 1 − the mean cosine between the residual "
    "stream entering and leaving it, the layer's own output even for the last block, before the final norm (0: the "
    "layer changes no direction)",
    "angular_distance": "Gromov et al.'s angular distance of the whole layer: the mean of arccos(that cosine)/π "
    "over rows (they, PruneMe and ReplaceMe read the last token of each text only)",
    "ffn_block_influence": "Block Influence of the FFN sublayer alone: 1 − the mean cosine between the residual "
    "stream before and after the FFN's output is added",
    "ffn_angular_distance": "angular distance of the FFN sublayer alone, as for the whole layer",
    "output_energy": "Σ‖a‖² / Σ‖h‖² with a what the FFN adds to the residual stream and h the stream it is added to",
    "unexplained_energy": "(1 − r2_lin) Σ‖a − ā‖² / Σ‖h‖²: the energy the affine map leaves unexplained, next to the "
    "stream a swap perturbs (approximate for Gemma 3, whose norm after the FFN rescales a)",
    "layer_linearity": "the Secretly-Linear score of the whole layer: held-out share of its centred output that an "
    "affine map from its input explains, on a seeded sample of the rows (k-fold mean)",
    "layer_linearity_in_sample": "the same fitted and scored on the whole sample, as Razzhigaev et al. define it "
    "(in sample on a sample: it reads a little above their score on every row)",
}
"""What each score column of the measurement table means (:func:`score_columns`)."""


@dataclass(frozen=True)
class StreamScores:
    """One block's residual-stream statistics over the captured rows: the table's score columns but
    ``unexplained_energy``, which needs R²_lin (:func:`score_columns`)."""

    rows: int
    block_influence: float
    angular_distance: float
    ffn_block_influence: float
    ffn_angular_distance: float
    output_energy: float
    output_spread: float  # Σ‖a − ā‖² / Σ‖h‖²
    layer_linearity: float
    layer_linearity_in_sample: float
    sample_rows: int


def score_columns(scores: StreamScores | None, r2_lin: float) -> dict[str, float]:
    """The table's score columns (:data:`COLUMNS`) of one block, NaN where the capture could not see its residual
    stream (``scores`` None)."""
    if scores is None:
        return dict.fromkeys(COLUMNS, math.nan)
    unexplained = 0.0 if scores.output_spread == 0 else (1 - r2_lin) * scores.output_spread  # (R² of no spread: NaN)
    values = vars(scores) | {"unexplained_energy": unexplained}
    return {column: float(values[column]) for column in COLUMNS}


COSTLIER = {
    "r2_lin": -1,
    "r2_lin_after_first": -1,
    "unexplained_energy": 1,
    "output_energy": 1,
    "ffn_block_influence": 1,
    "ffn_angular_distance": 1,
    "block_influence": 1,
    "angular_distance": 1,
    "layer_linearity": -1,
}
"""The scores a practitioner may rank blocks by (the table's columns), each with its reading: +1 where a larger value
says the block costs more to drop (the distances and energies), -1 where it says it costs less (the R²s: a block its
map recovers, a layer that is nearly linear). ``layer_linearity_in_sample`` ranks as ``layer_linearity`` does."""

MEASURED = "measured"
"""The order that reads no score but measures each block's own cost, cheapest first (``linrec replace
--max-ppl-increase``'s default): the reference every score's order is set against."""

WHOLE_LAYER = ("block_influence", "angular_distance", "layer_linearity")
"""The scores of the whole layer (attention and FFN), whose own claim is about removing the whole block."""


def cheapest_first(table: pd.DataFrame, score: str) -> list[int]:
    """The blocks of a measurement table in the order ``score`` says they cost to drop, cheapest first (ties, and
    unknown values last, in depth order)."""
    if score not in COSTLIER:
        raise LinrecError(f"unknown score '{score}'; choose one of {', '.join(COSTLIER)}")
    values = table[score].astype(float)
    if values.isna().all():
        raise LinrecError(
            f"the table holds no {score}: its blocks' residual stream was not seen (a spec, or an architecture that "
            "normalises after the residual add)"
        )
    cost = table.assign(_cost=COSTLIER[score] * values)
    ordered = cost.sort_values(["_cost", "block"], na_position="last", kind="stable")
    return [int(b) for b in ordered.block]
