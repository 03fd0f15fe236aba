"""Chapter 4 (bilinear): the bilinear probes across a profile's models, and how their gains correlate.

* :func:`probe_sweep`: both bilinear probes (:func:`linrec.interventions.probes.probe_table`) on every block
  of several measured models, one table, with the residual nonlinearity 1 - R²_lin beside the
  gains. R²_lin there is the closed form scored on the probes' own test rows, so a gain is a
  difference on the same rows.
* :func:`gate_summary`: does seeded-poly's gate shrink ("de-recruit") on near-linear blocks?
* :func:`residual_correlations`: the paper's Pearson r(gain, 1 - R²_lin), and Spearman's ρ between the
  captured share and 1 - R²_lin within each model and pooled. The gain is the captured share times
  1 - R²_lin, so across blocks that differ mainly in how much they leave over, r(gain, 1 - R²_lin) is
  near +1 whatever the residual is made of; the share divides that size out.

The chapter's other parts: the planted controls (:mod:`linrec.analysis.bilinear_controls`), where the output
variance sits (:mod:`linrec.analysis.bilinear_outputs`) and the claims with their readings
(:mod:`linrec.analysis.bilinear_claims`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

import pandas as pd

from linrec.core.fit import DEFAULT_RCOND
from linrec.errors import LinrecError
from linrec.experiment.measurement import MeasurementInfo, ProfileMeasurement
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.interventions.probes import (
    ProbeConfig,
    gain_correlation,
    probe_table,
)
from linrec.stats import Correlation, correlation


def kept_sequence_rows(info: MeasurementInfo) -> int:
    """How many sampled rows one sequence holds, on average: ``seq_len`` times the share of rows the sample kept.

    The sampled rows are in stream order, sequence after sequence (``linrec.core.sample.RowSample.rows``), and a
    fold is made of whole sequences, so runs of this many consecutive test rows stand for sequences: exactly
    when every row was kept (the offline profile keeps all of them), roughly otherwise (a run may straddle
    two sequences). Rows do not carry their sequence's index, only its fold.
    """
    if info.seq_len < 1 or info.rows < 1 or info.sample_rows < 1:
        raise LinrecError(
            f"the measurement of '{info.model}' records no sequence layout (seq_len {info.seq_len}, rows "
            f"{info.rows}, sampled rows {info.sample_rows}); a sequence bootstrap needs all three"
        )
    return max(1, round(info.seq_len * min(1.0, info.sample_rows / info.rows)))


def probe_sweep(
    measurements: Mapping[str, ProfileMeasurement],
    config: ProbeConfig,
    blocks: Sequence[int] | None = None,
    test_fold: int = 0,
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
    cache: bool = False,
    seeded: ProbeConfig | None = None,
    seeds: int = 2,
) -> pd.DataFrame:
    """Both probes on ``blocks`` (all by default) of every model: ``probe_table``'s columns plus
    ``model`` and ``nonlinearity`` (1 - R²_lin on the probes' test rows); ``seeded``: seeded-poly's own settings
    (else ``config``). The bilinear probe runs with ``seeds`` probe seeds and its captured share's interval
    resamples whole sequences (:func:`kept_sequence_rows`) and spans the seeds. ``cache``: keep each model's
    table in the cache (:func:`linrec.experiment.results.cached_frames`; for measurements from the cache)."""
    tables = []
    for model, m in measurements.items():
        run = kept_sequence_rows(m.info)

        def compute(m: ProfileMeasurement = m, run: int = run) -> dict[str, pd.DataFrame]:
            table = probe_table(m.samples, m.moments, blocks, test_fold, config, rcond, progress, seeded, seeds, run)
            return {"probes": table}

        content = {"measurement": measurement_identity(m), "config": asdict(config), "blocks": blocks,
                   "test_fold": test_fold, "rcond": rcond, "seeded": seeded and asdict(seeded), "seeds": seeds,
                   "sequence_rows": run}  # fmt: skip
        table = (cached_frames("probes", content, compute) if cache else compute())["probes"]
        tables.append(table.assign(nonlinearity=1 - table.r2_lin).assign(model=model))
    if not tables:
        raise LinrecError("no measurements given; pass {model name: linrec.experiment.measurement(...)}")
    out = pd.concat(tables, ignore_index=True)
    return out[["model", *[c for c in out.columns if c != "model"]]]


def block_width(measurements: Mapping[str, ProfileMeasurement]) -> int:
    """The input width of the sampled rows, common to every model (the width the planted controls must match);
    read from each model's first sampled block (a model's blocks share one width)."""
    widths = {m.samples[next(iter(m.samples))].x.shape[1] for m in measurements.values() if len(m.samples)}
    if len(widths) != 1:
        raise LinrecError(f"expected one block width across the measurements; got {sorted(widths) or 'none'}")
    return widths.pop()


def gate_summary(table: pd.DataFrame, gate_init: float) -> dict[str, object]:
    """Seeded-poly's gate after fitting, against where it started and against 1 - R²_lin.

    ``shrunk``: the fraction of blocks whose |g| ended below ``gate_init``; ``median_ratio``:
    the median of |g| / gate_init; ``rho``: Spearman's ρ between |g| and 1 - R²_lin (positive
    when the term is recruited more where the map leaves more over; needs 4 blocks, else None).
    """
    if gate_init <= 0:
        raise LinrecError(f"gate_init must be positive to compare the gate with it; got {gate_init}")
    ratio = table["gate"] / gate_init
    rho = correlation(table["gate"], table["nonlinearity"], "spearman") if len(table) >= 4 else None
    return {
        "blocks": len(table),
        "shrunk": float((ratio < 1).mean()),
        "median_ratio": float(ratio.median()),
        "rho": rho,
    }


def residual_correlations(sweep: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """The paper's Pearson r(gain, 1 - R²_lin) over all blocks, and Spearman ρ(captured share, 1 - R²_lin) within
    each model and pooled (rows of :func:`probe_sweep`; a scope with fewer than 4 blocks gets no interval).

    Columns: ``statistic, scope, r, low, high, n``.
    """
    rows = []

    def add(statistic: str, scope: str, a: pd.Series, b: pd.Series, method: str) -> None:
        if len(a) < 4 or a.nunique() < 2 or b.nunique() < 2:
            rows.append({"statistic": statistic, "scope": scope, "r": float("nan"), "low": float("nan"),
                         "high": float("nan"), "n": len(a)})  # fmt: skip
            return
        c = correlation(a, b, method, level)
        rows.append({"statistic": statistic, "scope": scope, "r": c.r, "low": c.low, "high": c.high, "n": c.n})

    add("Pearson r(gain, 1 − R²_lin) (the paper's)", "all blocks", sweep.gain, sweep.nonlinearity, "pearson")
    for model, group in sweep.groupby("model", sort=False):
        add("Spearman ρ(captured share, 1 − R²_lin)", str(model), group.captured, group.nonlinearity, "spearman")
    add("Spearman ρ(captured share, 1 − R²_lin)", "all blocks", sweep.captured, sweep.nonlinearity, "spearman")
    return pd.DataFrame(rows)


def gain_correlations(sweep: pd.DataFrame) -> dict[str, Correlation]:
    """The paper's Pearson r(gain, 1 - R²_lin) of each probe (``gain``, ``gain_seeded``), or none below 4 blocks."""
    if len(sweep) < 4:
        return {}
    return {column: gain_correlation(sweep, column) for column in ("gain", "gain_seeded")}


def gain_table(sweep: pd.DataFrame, correlations: Mapping[str, Correlation]) -> pd.DataFrame:
    """Both probes' median and largest gains, and their Pearson r with 1 - R²_lin (:func:`gain_correlations`)."""
    return pd.DataFrame({
        "probe": ["bilinear probe", "seeded-poly"],
        "median gain (R²)": [sweep.gain.median(), sweep.gain_seeded.median()],
        "max gain (R²)": [sweep.gain.max(), sweep.gain_seeded.max()],
        "Pearson r with 1 − R²_lin (95% CI)": [str(correlations[c]) if c in correlations else "needs 4 blocks"
                                               for c in ("gain", "gain_seeded")],
    })  # fmt: skip


def measured_table(measured: Mapping[str, ProfileMeasurement]) -> pd.DataFrame:
    """What each model's probes run on: its text, input width, the blocks whose rows its budget samples, and how
    many rows per block."""
    return pd.DataFrame({
        "text": {m: r.info.corpus for m, r in measured.items()},
        "input width": {m: block_width({m: r}) for m, r in measured.items()},
        "probed blocks": {m: ", ".join(map(str, r.sampled_blocks)) for m, r in measured.items()},
        "sampled rows per block": {m: r.info.sample_rows for m, r in measured.items()},
    }).rename_axis("model")  # fmt: skip


def probe_settings(config: ProbeConfig, seeded: ProbeConfig, seeds: int) -> pd.DataFrame:
    """The probes' settings of a run, one row each: ``config`` (the bilinear probe's), ``seeded`` (seeded-poly's) and
    the number of bilinear probe seeds per block."""
    return pd.Series({
        "rank r of the bilinear term": config.rank,
        "bilinear probe: Adam steps (a cap; early stopping may end it sooner)": config.steps,
        "seeded-poly: Adam steps (at most)": seeded.steps,
        "learning rate: quadratic part, gate, offset": config.lr,
        "learning rate: seeded-poly's linear part": config.lr_linear,
        "initial gate |g|": config.gate_init,
        "validation every / patience": f"{config.eval_every} steps / {config.patience} checks",
        "bilinear probe seeds per block": seeds,
    }, name="setting").to_frame()  # fmt: skip
