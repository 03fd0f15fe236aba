"""Chapter 8 (training): how the depth profile of :mod:`linrec.analysis.depth`'s training summary reads.

* :data:`REFERENCE`: what the project's issue (not the paper) expects of each family's profile, in one place.
* :func:`reference_table`: this run's profile at the first and the last checkpoint beside :data:`REFERENCE`.
* :func:`formation_note`: when each model's profile forms, a description (the paper measures final models only).
"""

from __future__ import annotations

import pandas as pd

from linrec.analysis.identity import ACTIVATIONS, model_identity
from linrec.experiment.profiles import Profile

REFERENCE = {
    "gpt2": "≈ 0.955, flat across blocks, at init; non-monotone at the end",
    "llama": "≈ 0 at init",
}
"""What the project's issue, not the paper, reports of each family's profile (by :mod:`~linrec.analysis.identity`
family); a family not named here has no reference."""


def reference_table(summary: pd.DataFrame, profile: Profile) -> pd.DataFrame:
    """One row per model of ``summary`` (:func:`linrec.analysis.depth.training_summary`): its family and activation
    (zoo models; a hub model's are not needed here), :data:`REFERENCE` for its family, and this run's profile: its
    mean and range at the first checkpoint, and whether it is non-monotone at the last."""
    rows = []
    for r in summary.itertuples():
        family = model_identity(profile, str(r.model)).family if profile.zoo is not None else None
        shape = "non-monotone" if r.non_monotone_last else "monotone"
        rows.append({
            "model": r.model, "family": family, "activation": ACTIVATIONS.get(family or "", "?"),
            "reference (issue, not the paper)": REFERENCE.get(family or "", "—"),
            "this run (measured)": f"{r.mean_first:.3f} ± range {r.range_first:.3f} at {r.first}; "
                                   f"{shape} at {r.last} (range {r.range_last:.3f})",
        })  # fmt: skip
    return pd.DataFrame(rows)


def formation_note(summary: pd.DataFrame, profile: str) -> str:
    """When each model's profile forms (Markdown): how far its first checkpoint's profile lies from its last one,
    and the step at which it first comes within half that distance (models that never do are left out)."""
    formed = summary.dropna(subset=["halfway_step"])
    return (
        f"**When the profile forms** (profile `{profile}`; a description, not a verdict: the paper measures final "
        "models only). "
        + "; ".join(
            f"{r.model}'s profile lies {r.distance_first:.3f} (RMS) from its {r.last} one at {r.first} and first "
            f"comes within half that distance at step {r.halfway_step}"
            for r in formed.itertuples()
        )
        + "."
    )
