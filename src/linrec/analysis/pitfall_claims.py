"""Chapter 6 (the pitfall): the claims about trained linear baselines, each against this run.

:func:`pitfall_claims` checks the claims per optimiser on the tuned runs of
:func:`linrec.analysis.pitfall.pitfall_runs`; the attribution to conditioning is read on centred inputs, where an
input offset or scale cannot make a run fall short.
"""

from __future__ import annotations

import pandas as pd

from linrec.analysis.pitfall import CENTRED, ROLES, tuned_only
from linrec.report import paper
from linrec.report.claims import Claim


def block_gaps(runs: pd.DataFrame, optimizer: str, inputs: str, role: str) -> pd.Series:
    """The tuned runs' final gaps of one optimiser and input arm on one role's blocks, indexed by (model, block)."""
    tuned = tuned_only(runs)
    pick = tuned[(tuned.optimizer == optimizer) & (tuned.inputs == inputs) & (tuned.role == role)]
    return pick.set_index(["model", "block"]).gap_final.astype(float)


def _spread(gaps: pd.Series, over: str = "block") -> str:
    """Median and range of per-block (or per-model) gaps, as the claims print them."""
    n = len(gaps)
    return f"median {gaps.median():.3g}, range [{gaps.min():.3g}, {gaps.max():.3g}] over {n} {over}{'s' * (n != 1)}"


def _interval_note(n: int, over: str) -> str:
    return (
        f"interval: the range over {n} {over}s, a distribution-free interval for their median "
        f"(coverage 1 - 2^(1-n) = {1 - 2.0 ** (1 - n):.0%})"
    )


def pitfall_claims(runs: pd.DataFrame, tolerance: float = 0.01, condition: pd.Series | None = None) -> list[Claim]:
    """The pitfall against this run, per optimiser, on the tuned runs (:func:`pitfall_runs`).

    Every rule reads per-block final gaps (ceiling - final held-out R²) against ``tolerance``, the chapter's own
    definition of reaching the ceiling, so no threshold is chosen for the verdicts; a "gap" is a final gap above it.
    Each set of gaps is reported as its median with its range over blocks, which is a distribution-free interval
    for the median (coverage 1 - 2^(1-n) for n blocks), and a rule that needs "every block" is the rule that this
    interval lies beyond the tolerance. "Worst" and "best" are the roles of :func:`representative_blocks`.

    * **raw baselines fall short** (the paper's claim as observed): every worst-conditioned block's raw run has a
      gap. This says nothing about the cause: an input offset or scale makes raw runs fall short at any
      conditioning.
    * **the conditioning causes the gap**: on centred inputs (:func:`centred_rows`: no input offset, one overall
      scale, the condition number unchanged), in every model with both blocks the worst-conditioned block's gap
      exceeds the best-conditioned one's by more than ``tolerance`` (value: the median of these differences,
      interval: their range); untestable when no model has both blocks. An offset or a scale of the inputs
      cannot pass this test, since centring removes both.
    * **whitening closes the gap**: on the worst-conditioned blocks with a gap on centred inputs, every whitened
      run is within ``tolerance``; untestable where no such block exists (there is no gap to close).
    * **standardising does not close it** (the conditioning lies along rotated directions, not the axes): on the
      blocks whose centred gap whitening closes (so the gap is the conditioning's), every standardised run still
      has a gap; "no" means a per-dimension rescaling (a diagonal preconditioner) is enough; untestable where no
      such block exists.

    A missing arm or role makes a claim untestable, with the reason; nothing is compared against a missing
    value. With ``condition`` (the blocks' input condition numbers) their range is reported too.
    """
    claims = []
    for optimizer in dict.fromkeys(tuned_only(runs).optimizer):
        claims += _optimizer_claims(runs, str(optimizer), tolerance)
    if condition is not None:
        claims.append(
            Claim.measure(
                "input condition number, range over blocks",
                f"{condition.min():.3g} to {condition.max():.3g}",
                note="λ_max / λ_min of the input covariance over its non-null directions",
            )
        )
    return claims


def _optimizer_claims(runs: pd.DataFrame, optimizer: str, tolerance: float) -> list[Claim]:
    worst, best = ROLES[1], ROLES[0]

    def check(
        name: str,
        paper_side: str | paper.Reported,
        rule: str,
        gaps: pd.Series,
        measured: str,
        holds: bool,
        over: str = "block",
    ) -> Claim:
        return Claim.check(
            f"{name} ({optimizer})",
            paper_side,
            measured,
            holds,
            value=float(gaps.median()),
            interval=(float(gaps.min()), float(gaps.max())),
            unit="R²",
            note=_interval_note(len(gaps), over),
            rule=rule,
        )

    def untestable(name: str, paper_side: str | paper.Reported, rule: str, reason: str) -> Claim:
        return Claim.check(f"{name} ({optimizer})", paper_side, reason, None, rule=rule)

    gap = f"a final gap (closed-form ceiling minus the trained map's held-out R²) above {tolerance:g}"
    claims = []
    fall_short = (
        "raw baselines fall short",
        paper.TRAINED_BASELINES,
        f"reproduced when every worst-conditioned block's run on raw inputs ends with {gap}",
    )
    raw = block_gaps(runs, optimizer, "raw", worst)
    if raw.empty:
        claims.append(untestable(*fall_short, "no raw-input runs on worst-conditioned blocks"))
    else:
        measured = f"raw inputs, worst-conditioned blocks: final gap {_spread(raw)}; tolerance {tolerance:g}"
        claims.append(check(*fall_short, raw, measured, bool(raw.min() > tolerance)))

    cause = (
        "the conditioning causes the gap",
        paper.Reported(
            "the conditioning causes the gap",
            "the paper attributes the gap to input conditioning",
            paper.TRAINED_BASELINES.source,
        ),
        "reproduced when, on centred inputs, the worst-conditioned block's final gap exceeds the best-conditioned "
        f"one's by more than {tolerance:g} in every model that has both; untestable when no model has both",
    )
    centred, centred_best = block_gaps(runs, optimizer, CENTRED, worst), block_gaps(runs, optimizer, CENTRED, best)
    gapped = centred[centred > tolerance]
    excess = (centred.droplevel("block") - centred_best.droplevel("block")).dropna()
    if centred.empty:
        claims.append(untestable(*cause, "no centred-input runs on worst-conditioned blocks"))
    elif excess.empty:
        claims.append(untestable(*cause, "no model has a best-conditioned block with centred-input runs to compare"))
    else:
        measured = (
            f"centred inputs, final gap on worst-conditioned blocks {_spread(centred)}, on best-conditioned "
            f"{_spread(centred_best)}; worst minus best per model: {_spread(excess, 'model')}"
        )
        claims.append(check(*cause, excess, measured, bool(excess.min() > tolerance), "model"))

    whiten = (
        "whitening closes the gap",
        "not reported (the paper recommends the closed form)",
        f"holds when every whitened run on the worst-conditioned blocks with {gap} on centred inputs ends "
        f"within {tolerance:g}; untestable where no block has such a gap",
    )
    whitened = block_gaps(runs, optimizer, "whitened", worst).reindex(gapped.index)
    if gapped.empty:
        claims.append(untestable(*whiten, "no worst-conditioned block has a gap on centred inputs"))
    elif whitened.isna().any():
        claims.append(untestable(*whiten, "no whitened-input runs on every block with a gap on centred inputs"))
    else:
        measured = f"blocks with a gap on centred inputs ({_spread(gapped)}): whitened final gap {_spread(whitened)}"
        claims.append(check(*whiten, whitened, measured, bool(whitened.max() <= tolerance)))

    rotated = (
        "standardising does not close it",
        "not reported (rotated, not axis-aligned, conditioning)",
        f"holds when every standardised run on the blocks whose centred gap whitening closes still ends with "
        f"{gap}; untestable where whitening closes no gap",
    )
    closed = whitened[whitened <= tolerance].index
    standardised = block_gaps(runs, optimizer, "standardised", worst).reindex(closed)
    if closed.empty:
        claims.append(untestable(*rotated, "no block has a gap on centred inputs that whitening closes"))
    elif standardised.isna().any():
        claims.append(untestable(*rotated, "no standardised-input runs on every block whose gap whitening closes"))
    else:
        measured = f"blocks whose centred gap whitening closes: standardised final gap {_spread(standardised)}"
        claims.append(check(*rotated, standardised, measured, bool(standardised.min() > tolerance)))
    return claims
