"""Chapters 2 and 8: depth curves of R²_lin across models and checkpoints, compared.

A *depth curve* (the paper's "depth profile"; in code, "profile" names only a run setting of
:mod:`linrec.experiment.profiles`) is R²_lin of every FFN block of one model, at one checkpoint, on one
corpus: the rows of :meth:`linrec.experiment.measurement.ProfileMeasurement.table` for that measurement. The
chapters on heterogeneity (2), corpus robustness (7) and training dynamics (8) ask how such curves differ;
chapter 3 (:mod:`linrec.analysis.identity`, :mod:`linrec.analysis.activation`) builds on the same
summaries and distances:

* :func:`depth_table` stacks measurements into one tidy table (with each checkpoint's optimiser
  step, from :func:`training_checkpoints`); :func:`depth_summary` gives each curve's range, its
  largest jump between adjacent blocks and whether it is monotone, judged against the k-fold
  spread; :func:`heterogeneity_claims` checks the paper's claim part by part, and :func:`swap_range`
  states the swap's cost beside it.
* :func:`curve_distance` is the root-mean-square difference of two curves over their blocks;
  :func:`drift_table` and :func:`training_summary` follow one model across checkpoints (with
  :func:`training_losses`, the zoo's record of held-out loss), and :func:`training_claims` states the
  numbers; chapter 7 compares profiles across corpora (:mod:`linrec.analysis.corpora`).

The zero-shot swap these chapters show beside the profiles is
:func:`linrec.experiment.swaps.affine_swaps`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from linrec.errors import LinrecError
from linrec.experiment.measurement import ProfileMeasurement
from linrec.experiment.profiles import Profile
from linrec.models.zoo import zoo_record
from linrec.report import paper
from linrec.report.claims import Claim

CURVE_KEYS = ("model", "checkpoint", "corpus")
"""The columns that name one depth curve in a stacked table."""

# ---------------------------------------------------------------------------------------------
# Checkpoints and stacked tables.


def checkpoint_step(name: str) -> int | None:
    """The optimiser step of a checkpoint named ``step<N>`` (None for any other name)."""
    match = re.fullmatch(r"step(\d+)", name)
    return int(match.group(1)) if match else None


def training_checkpoints(profile: Profile, model: str) -> list[tuple[str, int | None]]:
    """(name to measure with, optimiser step) of each checkpoint of ``model``, first to last.

    The first checkpoint is named ``"init"``, and the last ``"final"`` when it holds the final weights
    (a zoo's always; Pythia's ``step143000``, which is its main branch), so a chapter measuring along
    training shares its cached measurements with the chapters that measure ``init`` and ``final``
    and has a ``final`` to compare with. Other checkpoints keep their names (``step<N>``).
    """
    names = profile.checkpoints(model)
    if len(names) == 1:
        return [(names[0], checkpoint_step(names[0]))]
    out = []
    for i, name in enumerate(names):
        last = i == len(names) - 1 and (profile.zoo is not None or profile.canonical_checkpoint(model, name) == "final")
        alias = "init" if i == 0 else ("final" if last else name)
        out.append((alias, checkpoint_step(name)))
    return out


def depth_table(measurements: Iterable[ProfileMeasurement], profile: Profile | None = None) -> pd.DataFrame:
    """Every measurement's k-fold table, stacked; with ``profile``, a ``step`` column (None where unknown)."""
    tables = [m.table() for m in measurements]
    if not tables:
        raise LinrecError("no measurements to tabulate; measure at least one (model, checkpoint, corpus)")
    table = pd.concat(tables, ignore_index=True)
    if profile is not None:
        steps = {(m, name): step for m in table["model"].unique() for name, step in training_checkpoints(profile, m)}
        table.insert(
            3, "step", [steps.get((m, c), checkpoint_step(c)) for m, c in zip(table["model"], table["checkpoint"])]
        )
        table["step"] = table["step"].astype("Int64")
    return table


def curve_groups(table: pd.DataFrame, by: Sequence[str]) -> Iterable[tuple[tuple, pd.DataFrame]]:
    """(key, rows in block order) of each depth curve of ``table``, a curve being one value of the ``by`` columns."""
    missing = [c for c in (*by, "block", "r2_lin") if c not in table.columns]
    if missing:
        raise LinrecError(f"the table has no column {missing}; columns: {', '.join(table.columns)}")
    for key, group in table.groupby(list(by), sort=False):
        if group["block"].duplicated().any():
            raise LinrecError(
                f"profile {dict(zip(by, key))} has a block more than once; group by more columns "
                f"(e.g. {', '.join(c for c in CURVE_KEYS if c not in by)})"
            )
        yield key, group.sort_values("block")


# ---------------------------------------------------------------------------------------------
# One profile: range, jumps, monotonicity.


def depth_summary(table: pd.DataFrame, by: Sequence[str] = ("model",), sigmas: float = 2.0) -> pd.DataFrame:
    """Per profile: the range of R²_lin over blocks, the largest jump between adjacent blocks, and shape.

    A step between adjacent blocks counts as a rise or a fall only when its size exceeds
    ``sigmas`` times the combined k-fold spread, √(sd_i² + sd_{i+1}²); a profile is non-monotone
    when it has at least one significant rise and one significant fall. ``jump_sigma`` is the
    largest jump in those units (inf when both blocks have zero spread).
    """
    rows = []
    for key, g in curve_groups(table, by):
        r2 = g["r2_lin"].to_numpy(dtype=float)
        sd = g["r2_lin_std"].to_numpy(dtype=float) if "r2_lin_std" in g else np.zeros_like(r2)
        blocks = g["block"].to_numpy()
        step = np.diff(r2)
        noise = np.sqrt(sd[:-1] ** 2 + sd[1:] ** 2)
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row.update(
            {
                "blocks": len(r2),
                "r2_min": r2.min(),
                "block_min": int(blocks[r2.argmin()]),
                "r2_max": r2.max(),
                "block_max": int(blocks[r2.argmax()]),
                "r2_range": r2.max() - r2.min(),
                "mean_fold_std": sd.mean(),
            }
        )
        if len(r2) > 1:
            j = int(np.abs(step).argmax())
            big = np.abs(step) > sigmas * noise
            row.update(
                {
                    "max_jump": abs(step[j]),
                    "jump": f"{blocks[j]}→{blocks[j + 1]}",
                    "jump_sigma": abs(step[j]) / noise[j] if noise[j] > 0 else math.inf,
                    "rises": int((big & (step > 0)).sum()),
                    "falls": int((big & (step < 0)).sum()),
                }
            )
        else:
            row.update({"max_jump": 0.0, "jump": "", "jump_sigma": 0.0, "rises": 0, "falls": 0})
        row["non_monotone"] = row["rises"] > 0 and row["falls"] > 0
        rows.append(row)
    return pd.DataFrame(rows)


def heterogeneity_claims(table: pd.DataFrame, high: float = 0.99, low: float = 0.3, sigmas: float = 2.0) -> list[Claim]:
    """The paper's heterogeneity claim, part by part, against a depth table of trained models, and its
    headline numbers.

    Four tested parts: near-linear blocks (R²_lin > ``high``), strongly nonlinear blocks (< ``low``), both
    between *adjacent* blocks, and a non-monotone profile (:func:`depth_summary` with ``sigmas``). Then the
    numbers the appendix sets beside the paper's: the range of R²_lin, the largest jump between adjacent
    blocks, and how many profiles are non-monotone.
    """
    summary = depth_summary(table, by=("model",), sigmas=sigmas)
    top = table.iloc[table["r2_lin"].argmax()]
    bottom = table.iloc[table["r2_lin"].argmin()]
    best = summary.iloc[summary["max_jump"].argmax()]
    adjacent = False
    for _, g in curve_groups(table, ("model",)):
        r2 = g["r2_lin"].to_numpy()
        pairs = np.stack([r2[:-1], r2[1:]])
        adjacent |= bool(((pairs.max(0) > high) & (pairs.min(0) < low)).any())
    shaped = summary[summary["non_monotone"]]
    steps = f"steps beyond {sigmas:g} k-fold std both up and down"
    return [
        Claim.check(
            "near-linear blocks",
            paper.Reported("near-linear blocks", f"R²_lin > {high}", paper.R2_RANGE.source),
            f"highest {top['r2_lin']:.3f} ({top['model']}, block {top['block']})",
            top["r2_lin"] > high,
            value=top["r2_lin"],
            rule=f"reproduced when some block's held-out R²_lin exceeds {high:g}",
        ),
        Claim.check(
            "strongly nonlinear blocks",
            paper.Reported("strongly nonlinear blocks", f"R²_lin < {low}", paper.R2_RANGE.source),
            f"lowest {bottom['r2_lin']:.3f} ({bottom['model']}, block {bottom['block']})",
            bottom["r2_lin"] < low,
            value=bottom["r2_lin"],
            rule=f"reproduced when some block's held-out R²_lin is below {low:g}",
        ),
        Claim.check(
            "both, between adjacent blocks",
            paper.Reported("both, between adjacent blocks", f"from > {high} to < {low}", paper.R2_RANGE.source),
            f"largest adjacent jump {best['max_jump']:.3f} ({best['model']}, blocks {best['jump']}, "
            f"{best['jump_sigma']:.1f} k-fold std)",
            adjacent,
            value=best["max_jump"],
            rule=f"reproduced when, in some model, a block above {high:g} sits next to one below {low:g}",
        ),
        Claim.check(
            "non-monotone in depth",
            paper.Reported("non-monotone in depth", "yes", paper.PROFILE_SHAPE.source),
            f"{len(shaped)} of {len(summary)} models ({steps})",
            len(shaped) > 0,
            value=len(shaped),
            rule=f"reproduced when some model's profile has {steps} between adjacent blocks",
        ),
        Claim.measure(
            paper.R2_RANGE,
            f"{bottom['r2_lin']:.3f} to {top['r2_lin']:.3f}",
            note="; ".join(f"{r.model}: {r.r2_min:.3f}–{r.r2_max:.3f}" for r in summary.itertuples()),
        ),
        Claim.measure(
            "largest jump in R²_lin between adjacent blocks",
            best["max_jump"],
            paper="from > 0.99 to < 0.3 (a jump of at least 0.69)",
            note=f"{best['model']}, blocks {best['jump']}, {best['jump_sigma']:.1f} k-fold std",
        ),
        Claim.measure(
            paper.PROFILE_SHAPE,
            f"non-monotone in {int(summary['non_monotone'].sum())} of {len(summary)} models",
            note=steps,
        ),
    ]


def swap_range(swaps: pd.DataFrame) -> Claim:
    """The range of the zero-shot affine swap's ΔPPL over blocks (a :func:`linrec.experiment.swaps.affine_swaps`
    table), overall and per model: a headline number, untested."""
    harm = swaps.groupby("model")["delta_ppl"].agg(["min", "max"])
    return Claim.measure(
        "zero-shot affine swap ΔPPL per block",
        f"{harm['min'].min():+.3f} to {harm['max'].max():+.3f}",
        note="; ".join(f"{m}: {r['min']:+.3f} to {r['max']:+.3f}" for m, r in harm.iterrows()),
    )


# ---------------------------------------------------------------------------------------------
# Pairs of profiles: distances, along training and across corpora.


def rms_difference(a: pd.Series, b: pd.Series) -> float:
    """Root-mean-square difference of two series on the same index."""
    return float(np.sqrt(((a - b.loc[a.index]) ** 2).mean()))


def curve_distance(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """Root-mean-square difference of R²_lin between two depth curves (tables with block, r2_lin) over their blocks."""
    ra, rb = a.set_index("block")["r2_lin"], b.set_index("block")["r2_lin"]
    if set(ra.index) != set(rb.index):
        raise LinrecError(
            f"the profiles cover different blocks ({sorted(ra.index)} and {sorted(rb.index)}); "
            "compare models of the same depth"
        )
    return rms_difference(ra, rb)


def drift_table(table: pd.DataFrame, reference: str = "final") -> pd.DataFrame:
    """Per (model, checkpoint): RMS distance of the profile to the same model's ``reference`` checkpoint."""
    rows = []
    for model, g in table.groupby("model", sort=False):
        ref = g[g["checkpoint"] == reference]
        if ref.empty:
            raise LinrecError(
                f"model '{model}' has no '{reference}' checkpoint in the table; checkpoints: "
                f"{', '.join(g['checkpoint'].unique())}"
            )
        for checkpoint, h in g.groupby("checkpoint", sort=False):
            rows.append(
                {
                    "model": model,
                    "checkpoint": checkpoint,
                    "step": h["step"].iloc[0] if "step" in h else None,
                    "distance_to_" + reference: curve_distance(h, ref),
                    "mean_r2": h["r2_lin"].mean(),
                }
            )
    return pd.DataFrame(rows)


def training_summary(table: pd.DataFrame, reference: str = "final", sigmas: float = 2.0) -> pd.DataFrame:
    """Per model: its profile at the first and last checkpoint, and when the final profile took shape.

    Columns: ``first, last`` (checkpoint names, in step order), ``mean_first, range_first,
    mean_last, range_last`` (R²_lin over blocks), ``non_monotone_last`` (:func:`depth_summary`),
    ``distance_first`` (RMS distance of the first profile to ``reference``) and ``halfway_step``:
    the first step whose profile is within half that distance of the reference.
    """
    missing = [c for c in ("model", "checkpoint", "step", "block", "r2_lin") if c not in table.columns]
    if missing:
        raise LinrecError(f"the table has no column {missing}; build it with depth_table(..., profile=...)")
    drift = drift_table(table, reference)
    shape = depth_summary(table, by=("model", "checkpoint"), sigmas=sigmas)
    rows = []
    for model, d in drift.groupby("model", sort=False):
        d = d.sort_values("step")
        first, last = d.iloc[0], d.iloc[-1]
        s_first = shape[(shape["model"] == model) & (shape["checkpoint"] == first["checkpoint"])].iloc[0]
        s_last = shape[(shape["model"] == model) & (shape["checkpoint"] == last["checkpoint"])].iloc[0]
        start = first["distance_to_" + reference]
        halfway = d.loc[d["distance_to_" + reference] <= start / 2, "step"]
        rows.append(
            {
                "model": model,
                "first": first["checkpoint"],
                "last": last["checkpoint"],
                "mean_first": first["mean_r2"],
                "range_first": s_first["r2_range"],
                "mean_last": last["mean_r2"],
                "range_last": s_last["r2_range"],
                "non_monotone_last": bool(s_last["non_monotone"]),
                "distance_first": start,
                "halfway_step": halfway.iloc[0] if len(halfway) else None,
            }
        )
    return pd.DataFrame(rows)


def training_claims(summary: pd.DataFrame) -> list[Claim]:
    """Headline numbers of a :func:`training_summary`: each model's mean R²_lin at its first and last
    checkpoint (the paper reports none: its training claim rests on GPT-2 against Pythia)."""
    claims = []
    for r in summary.to_dict("records"):
        shape = "non-monotone" if r["non_monotone_last"] else "monotone"
        claims += [
            Claim.measure(
                f"mean R²_lin at {r['first']} ({r['model']})",
                r["mean_first"],
                note=f"range over blocks {r['range_first']:.3f}",
            ),
            Claim.measure(
                f"mean R²_lin at {r['last']} ({r['model']})",
                r["mean_last"],
                note=f"range {r['range_last']:.3f}, {shape}; half-way to the final profile at step {r['halfway_step']}",
            ),
        ]
    return claims


# ---------------------------------------------------------------------------------------------
# Training records.


def training_losses(profile: Profile, model: str) -> pd.DataFrame:
    """Held-out loss (nats/token) per corpus at each saved checkpoint of a zoo model (empty for hub models).

    Columns: ``model, step, corpus, loss``; from the training record the zoo keeps (``zoo.json``).
    """
    profile.check_model(model)
    if profile.zoo is None:
        return pd.DataFrame(columns=["model", "step", "corpus", "loss"])
    record = zoo_record(profile.zoo, model, progress=False)
    return pd.DataFrame(
        [
            {"model": model, "step": c["step"], "corpus": corpus, "loss": loss}
            for c in record["checkpoints"]
            for corpus, loss in c["eval_loss"].items()
        ]
    )
