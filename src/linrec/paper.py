"""What the paper reports (Whipp, arXiv 2606.19379), in one place, for showing beside this run's numbers.

Only figures stated in the public abstract, review page and write-ups are here; the PDF was not
available. Every value is the paper's, never a measurement of this package: chapters print them
labelled "paper (reported)" next to "this run (measured)".
"""

from __future__ import annotations

from dataclasses import dataclass

CITATION = "Whipp, S. (2026). How Linear Is a Transformer Feed-Forward Block? Per-Block Linear Recoverability Is Learned, Not Architectural. arXiv:2606.19379."


@dataclass(frozen=True)
class Reported:
    """One reported figure: what it measures, its value as stated, and where it comes from."""

    quantity: str
    value: str
    source: str


REPORTED: dict[str, Reported] = {r.quantity: r for r in [
    Reported("R²_lin range across blocks", "from > 0.99 to < 0.3, between adjacent blocks", "abstract; Fig. 2"),
    Reported("depth profile shape", "non-monotone in depth", "Fig. 2"),
    Reported("GPT-2 vs Pythia-160m profiles", "sharply different at the same width and activation", "abstract"),
    Reported("bilinear probe gain", "a few points of R² over the linear ceiling", "Fig. 3"),
    Reported("Pearson r(gain, 1 − R²_lin)", "≈ 0", "Fig. 3"),
    Reported("per-feature vs global R²", "two regimes: broad linear blocks and low-rank outlier blocks (eff. rank ≈ 1)", "Fig. 4"),
    Reported("single-layer replacement, GPT-2 early block", "8× fewer parameters, +0.77 perplexity", "abstract"),
    Reported("trained linear baselines", "badly under-converge on ill-conditioned activations", "abstract"),
    Reported("corpus robustness", "depth profiles overlay across three domains", "Fig. 5"),
    Reported("rows per block", "about 15,000–30,000 token rows, sequence length 128", "setup"),
]}
