"""What a capture computes beyond what the fit needs, when a caller asks (``extras``): the command line's
``--extras`` and the library's ``extras=`` name them alike.

By default a capture keeps, per block and fold, the float64 sums the closed-form fit and its held-out R² need: XᵀX
(one triangle), XᵀY and the diagonal of YᵀY, with each block's largest rows. The extras cost more arithmetic and
are read by few: ``output-covariance`` (the whole YᵀY, for ``effective_rank_out``: d_out² more per row, about a
third more float64 work at equal widths) and ``scores`` (the residual-stream scores of :mod:`linrec.core.scores`,
ShortGPT's, PruneMe's and LLM-Microscope's, with a sample of rows per block for the layer linearity, fitted at the
end of the capture). Without them their columns are NaN and every other column is the same.

Its own module, free of torch, so that the command line refuses a name it does not know before torch loads.
"""

from __future__ import annotations

from collections.abc import Iterable

from linrec.errors import LinrecError

OUTPUT_COVARIANCE = "output-covariance"
SCORES = "scores"

EXTRAS = {
    OUTPUT_COVARIANCE: "the whole output covariance YᵀY, for effective_rank_out (about a third more float64 work)",
    SCORES: "the residual-stream scores (block influence, angular distance, layer linearity) of linrec.core.scores",
}
"""Each extra a capture can compute, and what it gives."""

ALL = "all"


def parse_extras(extras: str | Iterable[str] | None) -> frozenset[str]:
    """The extras named by ``extras`` (names of :data:`EXTRAS`, ``all``; a comma-separated string as the command line
    gives it, an iterable as the library takes it; None: none), or a LinrecError naming the known ones."""
    if extras is None:
        return frozenset()
    names = extras.split(",") if isinstance(extras, str) else list(extras)
    names = [n.strip().replace("_", "-") for n in names if n.strip()]
    if ALL in names:
        return frozenset(EXTRAS)
    unknown = sorted(set(names) - set(EXTRAS))
    if unknown:
        raise LinrecError(
            f"unknown extras {', '.join(unknown)}: choose from {', '.join(EXTRAS)} (or {ALL}), comma-separated"
        )
    return frozenset(names)
