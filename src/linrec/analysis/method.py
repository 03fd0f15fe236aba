"""Chapter 1 (method): the setup of this run's measurements beside the paper's.

:func:`setup_table` sets the paper's reported measurement setup (:data:`linrec.report.paper.SETUP`) next to what
ran in chapter 1: the randomly initialised tiny GPT-2, the profile's first trained model, and every packaged model
of the profile, so that the difference in scale is explicit.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import profile_corpus
from linrec.report import paper


def setup_table(
    profile: Profile,
    trained: ProfileMeasurement,
    tables: Mapping[tuple[str, str], pd.DataFrame],
    *,
    layers: int,
    width: int,
    rows: int,
    seq_len: int,
    folds: int,
) -> pd.DataFrame:
    """One column per setup, one row per item of :data:`~linrec.report.paper.SETUP`: "paper (reported)"; the tiny
    random-init GPT-2 (``layers`` blocks of width ``width``, ``rows`` rows of ``seq_len`` random tokens, ``folds``
    folds by sequence); ``trained``, the measurement of the profile's first model on its main corpus; and each
    packaged model of the profile, from its final-checkpoint table in ``tables`` ((model, checkpoint) -> table)."""
    reported = paper.SETUP
    by_document = f"{profile.folds}-fold by document"
    trained_table = trained.table()
    columns = {
        "paper (reported)": list(reported.values()),
        "random-init GPT-2 (above)": [f"GPT-2 architecture, {layers} layers", str(width), str(layers), f"{rows:,}",
                                      str(seq_len), "uniform random token ids", f"{folds}-fold by sequence"],
        f"trained ({profile.name} profile)": [profile.models[0], str(trained_table["d_in"].iloc[0]),
                                              str(len(trained_table)), f"{trained.info.rows:,}",
                                              str(trained.info.seq_len), profile_corpus(profile).name, by_document],
        **{f"{m} ({profile.name} profile)": [m, str(t["d_in"].iloc[0]), str(len(t)),
                                             f"{round(t.n_train.iloc[0] + t.n_test.iloc[0]):,}", str(profile.seq_len),
                                             profile.budget(m).corpus, by_document]
           for (m, checkpoint), t in tables.items() if checkpoint == "final" and m in profile.packaged},
    }  # fmt: skip
    return pd.DataFrame(columns, index=list(reported))
