"""Where the rows come from: how much of each block's R²_lin the first positions of every window decide.

Some models put very large activations at the first token of every sequence (a BOS token, or whatever
comes first); a block whose first-position rows are large and easy to predict can show a high global
R²_lin that says little about the other positions. :func:`position_table` sets, per block, R²_lin on all
rows against R²_lin without the first ``first`` positions, and gives the share of the rows and of the
output variance those positions carry (variance about the all-rows mean, so a first position that sits
far from the rest counts fully). :func:`position_effect` captures what it needs for one of a profile's
models: the measurement's moments (all rows) and one more pass that hands over only the later positions
(:func:`linrec.core.capture.capture_moments` with ``positions``; the forward pass is unchanged), cached.
:func:`position_claims` states the largest share and the largest change as headline numbers.
"""

from __future__ import annotations

import pandas as pd

from linrec.core.capture import capture_moments
from linrec.core.fit import kfold, variance_share
from linrec.core.moments import BlockMoments, merge_folds
from linrec.errors import LinrecError
from linrec.experiment.measurement import measurement
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.report.claims import Claim


def position_table(every: BlockMoments, later: BlockMoments, first: int, rcond: float) -> pd.DataFrame:
    """Per block of ``every`` (per-fold moments of all rows) and ``later`` (of the rows after the first ``first``
    positions): ``block, r2_lin, r2_lin_later, change`` (later - all), ``rows_first`` and ``variance_first``
    (the share of rows, and of the output sum of squares about the all-rows mean, at the first positions)."""
    missing = sorted(set(every) - set(later))
    if missing:
        raise LinrecError(f"no later-position moments for blocks {missing}")
    rows = []
    for block in sorted(every):
        total, rest = merge_folds(every[block]), merge_folds(later[block])
        all_rows, after = kfold(block, every[block], rcond), kfold(block, later[block], rcond)
        rows.append(
            {
                "block": block,
                "r2_lin": all_rows.r2_lin,
                "r2_lin_later": after.r2_lin,
                "change": after.r2_lin - all_rows.r2_lin,
                "rows_first": 1 - rest.n / total.n,
                "variance_first": 1 - variance_share(rest, total),
            }
        )
    return pd.DataFrame(rows).assign(first=first)


def position_effect(profile: Profile, model: str, first: int = 1, progress: bool = True) -> pd.DataFrame:
    """:func:`position_table` of one of the profile's models on its main corpus, labelled with ``model``; computed
    once and cached."""
    if not 0 < first < profile.seq_len:
        raise LinrecError(f"first must leave some positions of a {profile.seq_len}-token window; got {first}")
    m = measurement(profile, model, keep="moments", progress=progress)

    def compute() -> dict[str, pd.DataFrame]:
        net, tokenizer = load_profile_model(profile, model, progress=progress)
        batches = profile_batches(profile, tokenizer, profile_corpus(profile), model=net)
        later = capture_moments(
            net, batches, folds=profile.folds, seed=profile.seeds[0], positions=slice(first, None), progress=progress
        )
        every = {b: m.moments[b] for b in m.blocks}
        return {"positions": position_table(every, later, first, m.rcond)}

    table = cached_frames("positions", {"measurement": measurement_identity(m), "first": first}, compute)["positions"]
    return table.assign(model=model)[["model", *table.columns]]


def position_extremes(positions: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The rows of a :func:`position_effect` table whose first positions carry the largest share of the output
    variance, and whose R²_lin moves most without them."""
    return positions.iloc[positions.variance_first.argmax()], positions.iloc[positions.change.abs().argmax()]


def position_claims(positions: pd.DataFrame, first: int, seq_len: int) -> list[Claim]:
    """Headline numbers of a :func:`position_effect` table (several models stacked): the largest share of a
    block's output variance at the first ``first`` of ``seq_len`` positions, and the largest change of R²_lin
    without them. The paper reports neither."""
    heavy, moved = position_extremes(positions)
    return [
        Claim.measure(
            "output variance at the first position(s), largest block share",
            heavy.variance_first,
            note=f"{heavy.model} block {int(heavy.block)}; the first {first} of {seq_len} positions are "
            f"{heavy.rows_first:.1%} of rows",
        ),
        Claim.measure(
            "R²_lin change without the first position(s), largest",
            moved.change,
            note=f"{moved.model} block {int(moved.block)}: {moved.r2_lin:.3f} → {moved.r2_lin_later:.3f}",
        ),
    ]
