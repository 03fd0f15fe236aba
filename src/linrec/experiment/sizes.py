"""How many parameters a profile's model has: the x axis of the scale chapter, counted once and cached."""

from __future__ import annotations

import pandas as pd

from linrec.experiment.measurement import profile_weights_id
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import load_profile_model
from linrec.experiment.results import cached_frames


def parameter_count(profile: Profile, model: str, progress: bool = False) -> int:
    """The parameters of ``model``'s final weights, each tensor once (tied embeddings count once), as loaded: the
    model is loaded the first time and the count cached under its weights (by content, or the profile and hub id)."""

    def count() -> dict[str, pd.DataFrame]:
        net, _ = load_profile_model(profile, model, progress=progress)
        return {"parameters": pd.DataFrame({"parameters": [sum(p.numel() for p in net.parameters())]})}

    content = {"model": model, "weights": profile_weights_id(profile, model, "final") or f"{profile!r}"}
    return int(cached_frames("parameters", content, count)["parameters"]["parameters"].iloc[0])
