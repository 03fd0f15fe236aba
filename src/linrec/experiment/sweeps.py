"""Per-corpus sweeps (chapter 7): the seeded-poly probe and the affine swap on every (model, corpus), cached.

The paper repeats its depth sweep on each corpus. Kept whole, the measurements behind it would be
nine full entries at the paper's sizes (about 2 GB each); instead each (model, corpus) is captured
once, its k-fold table cached (``keep="table"``), the sweeps run on the capture in memory, and
their result tables cached (:func:`linrec.experiment.results.cached_frames`). A second run reads the
tables and captures nothing, with or without a network.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from linrec.experiment.measurement import entry_path, measurement
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import model_revision, profile_corpus
from linrec.experiment.results import cached_frames
from linrec.experiment.swaps import affine_swaps
from linrec.interventions.probes import ProbeConfig, probe_table


def corpus_sweep(
    profile: Profile,
    model: str,
    corpus: str,
    *,
    seeded_poly: ProbeConfig | None = None,
    swap_tokens: int | None = None,
    progress: bool = True,
) -> dict[str, pd.DataFrame]:
    """``{"probes": probe_table(...), "swaps": affine_swaps(...)}`` of ``model`` on ``corpus``, each present when
    asked for (a probe configuration; a number of eval tokens), from the cache when computed before."""
    wanted = {"probes": seeded_poly is not None, "swaps": swap_tokens is not None}
    if not any(wanted.values()):
        return {}
    source = entry_path(profile, model, "final", profile_corpus(profile, corpus), model_revision(profile, model))
    content = {
        "measurement": source.name,
        "probe": None if seeded_poly is None else asdict(seeded_poly),
        "swap_tokens": swap_tokens,
    }

    def compute() -> dict[str, pd.DataFrame]:
        keep = "samples" if seeded_poly is not None else "moments"
        m = measurement(profile, model, corpus=corpus, keep=keep, store="table", progress=progress)
        tables = {}
        if seeded_poly is not None:
            table = probe_table(m.samples, m.moments, config=seeded_poly, progress=progress)
            tables["probes"] = table.assign(model=model, corpus=corpus)
        if swap_tokens is not None:
            tables["swaps"] = affine_swaps(profile, [m], corpus=corpus, max_tokens=swap_tokens, progress=progress)
        return tables

    return cached_frames("corpus", content, compute)
