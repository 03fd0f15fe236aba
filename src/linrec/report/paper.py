"""What the paper reports (Whipp, arXiv 2606.19379), in one place, for showing beside this run's numbers.

Only figures stated in the public abstract, review page and write-ups are here; the PDF was not
available. Every value is the paper's, never a measurement of this package: chapters print them
labelled "paper (reported)" next to "this run (measured)". Each is a named constant, so a chapter
or claim that names one that does not exist fails at import rather than silently losing it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

CITATION = (
    "Whipp, S. (2026). How Linear Is a Transformer Feed-Forward Block? Per-Block Linear Recoverability Is Learned, "
    "Not Architectural. arXiv:2606.19379."
)


@dataclass(frozen=True)
class Reported:
    """One reported figure: what it measures, its value as stated, and where it comes from."""

    quantity: str
    value: str
    source: str


R2_RANGE = Reported("R²_lin range across blocks", "from > 0.99 to < 0.3, between adjacent blocks", "abstract; Fig. 2")
PROFILE_SHAPE = Reported("depth profile shape", "non-monotone in depth", "Fig. 2")
GPT2_VS_PYTHIA = Reported(
    "GPT-2 vs Pythia-160m profiles", "sharply different at the same width and activation", "abstract"
)
PROBE_GAIN = Reported("bilinear probe gain", "a few points of R² over the linear ceiling", "Fig. 3")
GAIN_CORRELATION = Reported("Pearson r(gain, 1 − R²_lin)", "≈ 0", "Fig. 3")
FEATURE_VS_GLOBAL = Reported(
    "per-feature vs global R²", "two regimes: broad linear blocks and low-rank outlier blocks (eff. rank ≈ 1)", "Fig. 4"
)
EARLY_SWAP = Reported(
    "single-layer replacement, GPT-2 early block", "8× fewer parameters, +0.77 perplexity", "abstract"
)
TRAINED_BASELINES = Reported(
    "trained linear baselines", "badly under-converge on ill-conditioned activations", "abstract"
)
CORPUS_ROBUSTNESS = Reported("corpus robustness", "depth profiles overlay across three domains", "Fig. 5")
ROWS_PER_BLOCK = Reported("rows per block", "about 15,000–30,000 token rows, sequence length 128", "setup")

NOT_STATED = "not stated in the sources"
"""What a table shows, in the paper's column, for a figure the paper's sources do not give."""

EARLY_SWAP_SETUP = {
    "model, text": "GPT-2 (124M), WikiText-2",
    "FFN": "768 → 3072 → 768",
    "block": "an early block",
    "parameter ratio": "8× (7.996 numbers stored)",
    "ΔPPL [95% interval]": "+0.77",
    "perplexity before": NOT_STATED,
    "relative ΔPPL": NOT_STATED,
}
"""The single-layer replacement of :data:`EARLY_SWAP` row by row, as chapter 5 sets it beside its own swap."""

SETUP = {
    "models": "GPT-2 124M, Pythia-160m, llama-160m",
    "width d": "768",
    "FFN blocks": "12 per model",
    "rows per block": "about 15–30k",
    "sequence length": "128",
    "text": "WikiText-2-raw",
    "held-out": "held-out split (fraction not stated)",
}
"""The paper's measurement setup row by row (:data:`ROWS_PER_BLOCK` among them), as chapter 1 sets it beside its
own."""

REPORTED: tuple[Reported, ...] = (
    R2_RANGE,
    PROFILE_SHAPE,
    GPT2_VS_PYTHIA,
    PROBE_GAIN,
    GAIN_CORRELATION,
    FEATURE_VS_GLOBAL,
    EARLY_SWAP,
    TRAINED_BASELINES,
    CORPUS_ROBUSTNESS,
    ROWS_PER_BLOCK,
)
"""Every reported figure, in the order the appendix lists them."""


def reported_table() -> pd.DataFrame:
    """:data:`REPORTED` as a table, one row per figure: ``quantity``, ``paper (reported)``, ``where``."""
    return pd.DataFrame([{"quantity": r.quantity, "paper (reported)": r.value, "where": r.source} for r in REPORTED])
