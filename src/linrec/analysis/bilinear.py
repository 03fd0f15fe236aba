"""Chapter 4 (bilinear): what the closed-form map leaves over, across a profile's models.

Bilinear probes, and where the output variance sits:

* :func:`probe_sweep`: both bilinear probes (:func:`linrec.interventions.probes.probe_table`) on every block
  of several measured models, one table, with the residual nonlinearity 1 - R²_lin beside the
  gains. R²_lin there is the closed form scored on the probes' own test rows, so a gain is a
  difference on the same rows.
* :func:`gate_summary`: does seeded-poly's gate shrink ("de-recruit") on near-linear blocks?
* :func:`probe_controls`: the probe on two planted residuals with known answers, at the chapter's budget: a
  rank-r quadratic (it must capture nearly all of it) and an odd cubic with no quadratic part (it must
  capture none). Without them a small captured share cannot be told from a probe that cannot learn.
* :func:`residual_correlations`: the paper's Pearson r(gain, 1 - R²_lin), and Spearman's ρ between the
  captured share and 1 - R²_lin within each model and pooled. The gain is the captured share times
  1 - R²_lin, so across blocks that differ mainly in how much they leave over, r(gain, 1 - R²_lin) is
  near +1 whatever the residual is made of; the share divides that size out.
* :func:`bilinear_claims`: the paper's claims about the residual, each against this run.
* :func:`output_concentration` and :func:`output_dims`: global R²_lin weights every output dim by
  its variance, the median per-feature R² weights them equally. Where the two differ, a few
  high-variance dims decide the global number; these say which dims, how much of the variance
  they carry and how well the map predicts them. The R² of a set of dims S is the
  variance-weighted mean of their per-feature R² (k-fold means), Σ_S v_j R²_j / Σ_S v_j, so over
  all dims it is (up to the fold averaging) the global R²_lin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

import pandas as pd
import torch

from linrec.core.fit import DEFAULT_RCOND, BlockReport, recoverability
from linrec.core.moments import merge_folds
from linrec.core.sample import Rows
from linrec.errors import LinrecError
from linrec.experiment.measurement import Measurement
from linrec.experiment.results import cached_frames, measurement_identity
from linrec.interventions.probes import ProbeConfig, bilinear_probe, gain_correlation, probe_table
from linrec.report import paper
from linrec.report.claims import Claim
from linrec.stats import correlation


def probe_sweep(
    measurements: Mapping[str, Measurement],
    config: ProbeConfig,
    blocks: Sequence[int] | None = None,
    test_fold: int = 0,
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
    cache: bool = False,
    seeded: ProbeConfig | None = None,
) -> pd.DataFrame:
    """Both probes on ``blocks`` (all by default) of every model: ``probe_table``'s columns plus
    ``model`` and ``nonlinearity`` (1 - R²_lin on the probes' test rows); ``seeded``: seeded-poly's own settings
    (else ``config``). ``cache``: keep each model's table in the cache
    (:func:`linrec.experiment.results.cached_frames`; for measurements from the cache)."""
    tables = []
    for model, m in measurements.items():

        def compute(m: Measurement = m) -> dict[str, pd.DataFrame]:
            return {"probes": probe_table(m.samples, m.moments, blocks, test_fold, config, rcond, progress, seeded)}

        content = {"measurement": measurement_identity(m), "config": asdict(config), "blocks": blocks,
                   "test_fold": test_fold, "rcond": rcond, "seeded": seeded and asdict(seeded)}  # fmt: skip
        table = (cached_frames("probes", content, compute) if cache else compute())["probes"]
        tables.append(table.assign(nonlinearity=1 - table.r2_lin).assign(model=model))
    if not tables:
        raise LinrecError("no measurements given; pass {model name: linrec.experiment.measurement(...)}")
    out = pd.concat(tables, ignore_index=True)
    return out[["model", *[c for c in out.columns if c != "model"]]]


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


CONTROLS = {"quadratic": "captures nearly all (≥ 0.9)", "odd": "captures none (≈ 0)"}
"""The planted residuals of :func:`probe_controls` and what a working probe does with each."""


def planted_residual(kind: str, n: int = 6000, d: int = 32, rank: int = 8, share: float = 0.3, seed: int = 0) -> Rows:
    """Rows with a known residual: x ~ N(0, I), y = x W + r(x) + 3 % noise, r scaled to carry about ``share`` of
    the output variance; five folds of 40-row "sequences".

    ``kind="quadratic"``: r = P((Ux) ⊙ (Vx)) of rank ``rank``, which a bilinear probe of rank ≥ ``rank`` can
    represent exactly. ``kind="odd"``: r = Σ_k p_k He₃(u_k·x) with He₃(z) = z³ - 3z along ``rank`` unit directions:
    odd in x, so uncorrelated with every quadratic of the symmetric inputs, and with no linear part either,
    so the closed form leaves all of it and no quadratic can take any of it.
    """
    if kind not in CONTROLS:
        raise LinrecError(f"unknown planted residual '{kind}'; choose one of {', '.join(CONTROLS)}")
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    linear = x @ torch.randn(d, d, generator=g) / d**0.5
    if kind == "quadratic":
        u, v = torch.randn(rank, d, generator=g) / d**0.5, torch.randn(rank, d, generator=g) / d**0.5
        residual = ((x @ u.T) * (x @ v.T)) @ torch.randn(rank, d, generator=g)
    else:
        u = torch.randn(rank, d, generator=g)
        z = x @ (u / u.norm(dim=1, keepdim=True)).T
        residual = (z**3 - 3 * z) @ torch.randn(rank, d, generator=g)
    residual = residual / residual.std() * linear.std() * (share / (1 - share)) ** 0.5
    y = linear + residual + 0.03 * linear.std() * torch.randn(n, d, generator=g)
    return Rows(x, y, torch.arange(n) // 40 % 5)


def probe_controls(config: ProbeConfig, rank: int = 8, seed: int = 0) -> pd.DataFrame:
    """The bilinear probe (``config``, the chapter's) on each planted residual of :func:`planted_residual`.

    Columns: ``control, expected, r2_lin, gain, captured, captured_low, captured_high, steps, at_budget``.
    """
    rows = []
    for kind, expected in CONTROLS.items():
        result = bilinear_probe(planted_residual(kind, rank=rank, seed=seed), config=config)
        rows.append(
            {
                "control": f"{kind} residual (rank {rank})",
                "expected": expected,
                "r2_lin": result.r2_lin,
                "gain": result.gain,
                "captured": result.captured.value,
                "captured_low": result.captured.low,
                "captured_high": result.captured.high,
                "steps": result.steps,
                "at_budget": result.best_at_budget,
            }
        )
    return pd.DataFrame(rows)


def controls_pass(controls: pd.DataFrame, captured: float = 0.9, none: float = 0.05) -> bool:
    """Whether the probe captured at least ``captured`` of the quadratic residual and within ``none`` of 0 of the
    odd one (rows of :func:`probe_controls`, in its order)."""
    quadratic, odd = controls.captured.iloc[0], controls.captured.iloc[1]
    return bool(quadratic >= captured and abs(odd) <= none)


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


def _variance(m: Measurement, block: int) -> torch.Tensor:
    total = merge_folds(m.moments[block])
    return total.cyy.diagonal() / total.n


def output_concentration(
    measurements: Mapping[str, Measurement], top: int = 4, rcond: float = DEFAULT_RCOND
) -> pd.DataFrame:
    """Per model and block: global and median per-feature R², effective rank of the outputs, and the
    ``top`` highest-variance output dims' share of the variance and R² against the rest's.

    Columns: ``model, block, r2_lin, r2_feature_median, gap`` (global - median),
    ``effective_rank_out, d_out, top, top_share, uniform_share`` (top / d_out, the share of
    equal dims), ``r2_top, r2_rest``.
    """
    rows = []
    for model, m in measurements.items():
        for report in recoverability(m.moments, rcond):
            if not 1 <= top < report.d_out:
                raise LinrecError(
                    f"top must be between 1 and {report.d_out - 1} (the output width less one); got {top}"
                )
            dims = _dims(m, report)
            head, rest = dims.iloc[:top], dims.iloc[top:]
            rows.append(
                {
                    "model": model,
                    "block": report.block,
                    "r2_lin": report.r2_lin,
                    "r2_feature_median": report.r2_feature_median,
                    "gap": report.r2_lin - report.r2_feature_median,
                    "effective_rank_out": report.effective_rank_out,
                    "d_out": report.d_out,
                    "top": top,
                    "top_share": float(head.share.sum()),
                    "uniform_share": top / report.d_out,
                    "r2_top": _weighted(head),
                    "r2_rest": _weighted(rest),
                }
            )
    return pd.DataFrame(rows)


def _weighted(dims: pd.DataFrame) -> float:
    return float((dims.variance * dims.r2).sum() / dims.variance.sum())


def _dims(m: Measurement, report: BlockReport) -> pd.DataFrame:
    variance = _variance(m, report.block).cpu()
    dims = pd.DataFrame(
        {
            "dim": range(report.d_out),
            "variance": variance.numpy(),
            "share": (variance / variance.sum()).numpy(),
            "r2": report.r2_per_feature.numpy(),
        }
    )
    dims = dims.sort_values(["variance", "dim"], ascending=[False, True], ignore_index=True)
    return dims.assign(rank=range(1, len(dims) + 1))


def output_dims(m: Measurement, block: int, rcond: float = DEFAULT_RCOND) -> pd.DataFrame:
    """Every output dim of one block, highest variance first: ``dim, variance, share`` (of the block's
    total output variance), ``r2`` (per-feature held-out R², k-fold mean), ``rank`` (1 = largest)."""
    if block not in m.moments:
        raise LinrecError(f"no block {block} in this measurement; blocks: {m.blocks}")
    (report,) = recoverability({block: m.moments[block]}, rcond)
    return _dims(m, report)


def widest_gap(concentration: pd.DataFrame) -> pd.Series:
    """The row of :func:`output_concentration` whose global and median per-feature R² differ most."""
    if concentration.empty:
        raise LinrecError("the concentration table is empty")
    return concentration.iloc[concentration.gap.abs().argmax()]


def bilinear_claims(
    sweep: pd.DataFrame,
    concentration: pd.DataFrame,
    gate_init: float,
    few: float = 0.05,
    near_linear: float = 0.95,
    low_rank: float = 1.5,
    gap: float = 0.05,
    controls: pd.DataFrame | None = None,
    little: float = 0.25,
) -> list[Claim]:
    """The paper's claims about the residual, each against this run, with the number behind each (verdicts
    "yes", "no", or "untestable" when the run has no case for it):

    * gain: the median bilinear-probe gain is at most ``few`` (R² units: 0.05 is five points);
    * controls (with ``controls``, :func:`probe_controls`): the probe captures the planted quadratic residual and
      not the odd one (:func:`controls_pass`); when it fails, the share claim below is untestable;
    * share: the median share of the residual the probe captures is at most ``little``;
    * correlation: the 95% CI of Pearson r(gain, 1 - R²_lin) contains 0 (a weak test over few blocks);
    * gate: on near-linear blocks (R²_lin ≥ ``near_linear``) most seeded-poly gates end below ``gate_init``;
    * regimes: some block is low-rank (effective rank ≤ ``low_rank``) with global R²_lin above its median
      per-feature R² by more than ``gap``, and some other block is broad (effective rank above
      ``low_rank``) with the two within ``gap``.
    """
    gain = float(sweep.gain.median())
    seeded = "gain_seeded" in sweep.columns
    claims = [
        Claim.check(
            "bilinear probe gain",
            paper.PROBE_GAIN,
            f"median {gain:+.4f} (max {sweep.gain.max():+.4f}) over {len(sweep)} blocks",
            gain <= few,
            value=gain,
            unit="R²",
            note=f"seeded-poly median {sweep.gain_seeded.median():+.4f}" if seeded else "",
        )
    ]
    if controls is not None:
        working = controls_pass(controls)
        claims.append(
            Claim.check(
                "planted controls at this budget",
                "not reported",
                f"quadratic residual captured {controls.captured.iloc[0]:.3f}, odd residual "
                f"{controls.captured.iloc[1]:+.3f}",
                working,
                value=controls.captured.iloc[0],
                unit="fraction of 1 − R²_lin",
            )
        )
        share = float(sweep.captured.median())
        claims.append(
            Claim.check(
                "share of the residual the probe captures",
                "not reported (the gain is: a few points of R²)",
                f"median {share:.3f} (range {sweep.captured.min():.3f} to {sweep.captured.max():.3f}) over "
                f"{len(sweep)} blocks; {int(sweep.at_budget.sum())} probes still improving at the step cap",
                share <= little if working else None,
                value=share,
                unit="fraction of 1 − R²_lin",
            )
        )
    if len(sweep) >= 4:
        r = gain_correlation(sweep)
        claims.append(
            Claim.check(
                "Pearson r(gain, 1 − R²_lin)",
                paper.GAIN_CORRELATION,
                str(r),
                r.low <= 0 <= r.high,
                value=r.r,
                interval=(r.low, r.high),
                note=f"n = {r.n}",
            )
        )
        if seeded:
            s = gain_correlation(sweep, "gain_seeded")
            claims.append(
                Claim.measure(
                    "Pearson r(seeded-poly gain, 1 − R²_lin)",
                    s.r,
                    paper="not reported separately",
                    interval=(s.low, s.high),
                    note=f"n = {s.n}",
                )
            )
    else:
        claims.append(
            Claim.check(
                "Pearson r(gain, 1 − R²_lin)", paper.GAIN_CORRELATION, f"only {len(sweep)} blocks (a CI needs 4)", None
            )
        )
    gate = ("seeded-poly gate on near-linear blocks", "the gate de-recruits (shrinks) on near-linear targets")
    near = sweep[sweep.r2_lin >= near_linear]
    if len(near):
        shrunk = float((near.gate < gate_init).mean())
        claims.append(
            Claim.check(
                *gate,
                f"|g| below its initial {gate_init:g} on {shrunk:.0%} of {len(near)} blocks "
                f"with R²_lin ≥ {near_linear:g}",
                shrunk > 0.5,
                value=shrunk,
                unit="fraction of blocks",
            )
        )
    else:
        claims.append(Claim.check(*gate, f"no block with R²_lin ≥ {near_linear:g}", None))
    widest = widest_gap(concentration)
    narrow = concentration[(concentration.effective_rank_out <= low_rank) & (concentration.gap > gap)]
    broad = concentration[(concentration.effective_rank_out > low_rank) & (concentration.gap.abs() <= gap)]
    claims.append(
        Claim.check(
            "per-feature vs global R²",
            paper.FEATURE_VS_GLOBAL,
            f"{len(narrow)} low-rank blocks (eff. rank ≤ {low_rank:g}) with global − median > {gap:g}; "
            f"{len(broad)} broad blocks within {gap:g}; largest global − median "
            f"{concentration.gap.max():+.3f}",
            bool(len(narrow) and len(broad)),
            value=concentration.gap.max(),
            note=f"widest gap: {widest.model} block {int(widest.block)}, effective rank "
            f"{widest.effective_rank_out:.2f}, its top dims hold {widest.top_share:.0%} of the variance",
        )
    )
    return claims
