"""Statistics used across the package: R² of predictions, correlations with intervals (pooled or within groups),
participation ratios.

These are plain functions of arrays, beneath every other layer, so the core, the interventions
and the analyses all compute them one way.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch

from linrec.errors import LinrecError


def r2(y: torch.Tensor, y_hat: torch.Tensor) -> float:
    """Variance-weighted R² of predictions ``y_hat`` for rows ``y`` (n, d), in float64.

    ``1 - Σ(y - ŷ)² / Σ(y - ȳ)²`` over rows and output dims: scikit-learn's
    ``r2_score(multioutput="variance_weighted")``, the same R² the moments give.
    """
    y = y.detach().to(torch.float64)
    err = y - y_hat.detach().to(device=y.device, dtype=torch.float64)
    sst = ((y - y.mean(0)) ** 2).sum()
    if sst <= 0:
        raise LinrecError("R² is undefined: the target rows have no variance")
    return float(1 - (err**2).sum() / sst)


def participation_ratio(eigenvalues: torch.Tensor) -> float:
    """(Σλ)² / Σλ² of the non-negative part of a spectrum; 0 for an all-zero spectrum."""
    lam = eigenvalues.clamp(min=0)
    denom = (lam**2).sum()
    return float(lam.sum() ** 2 / denom) if denom > 0 else 0.0


@dataclass
class Correlation:
    """A correlation coefficient with its confidence interval over n pairs."""

    r: float
    low: float
    high: float
    n: int
    method: str
    level: float

    def __str__(self) -> str:
        return (
            f"{self.method} r = {self.r:+.3f} [{self.low:+.3f}, {self.high:+.3f}] ({self.level:.0%} CI, n = {self.n})"
        )


def correlation(a: npt.ArrayLike, b: npt.ArrayLike, method: str = "pearson", level: float = 0.95) -> Correlation:
    """Pearson's or Spearman's r between ``a`` and ``b`` with a Fisher-z confidence interval.

    z = atanh(r) is taken as normal with standard error 1/√(n-3) (Pearson) or √(1.06/(n-3))
    (Spearman, Fieller et al. 1957); the interval is tanh(z ± q·se). Needs n ≥ 4.
    """
    _check_method(method, level)
    x: npt.NDArray[np.floating] = np.asarray(a, dtype=np.float64)
    y: npt.NDArray[np.floating] = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise LinrecError(f"expected two equally long sequences; got shapes {x.shape} and {y.shape}")
    n = x.shape[0]
    if n < 4:
        raise LinrecError(f"a confidence interval for r needs at least 4 pairs (blocks); got {n}")
    if method == "spearman":
        x, y = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if x.std() == 0 or y.std() == 0:
        raise LinrecError("r is undefined: one of the sequences is constant")
    r = float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))
    if abs(r) == 1.0:
        return Correlation(r, r, r, n, method, level)
    z, se = math.atanh(r), math.sqrt(_z_variance(method, n))
    q = NormalDist().inv_cdf((1 + level) / 2)
    return Correlation(r, math.tanh(z - q * se), math.tanh(z + q * se), n, method, level)


def _check_method(method: str, level: float) -> None:
    if method not in ("pearson", "spearman"):
        raise LinrecError(f"unknown correlation method '{method}'; choose pearson or spearman")
    if not 0 < level < 1:
        raise LinrecError(f"the confidence level must lie in (0, 1); got {level}")


def _z_variance(method: str, n: int) -> float:
    """The variance of Fisher's z = atanh(r) over n pairs: 1/(n-3) (Pearson), 1.06/(n-3) (Spearman)."""
    return (1.0 if method == "pearson" else 1.06) / (n - 3)


@dataclass
class Stratified:
    """A correlation within groups: each group's own (``groups``), their combination (``combined``), and the groups
    left out with the reason (``skipped``)."""

    combined: Correlation
    groups: dict[Hashable, Correlation]
    skipped: dict[Hashable, str]

    def table(self) -> pd.DataFrame:
        """One row per group and one for the combination: ``group, n, r, low, high``."""
        rows = [("within groups, combined", self.combined), *self.groups.items()]
        return pd.DataFrame([{"group": g, "n": c.n, "r": c.r, "low": c.low, "high": c.high} for g, c in rows])

    @property
    def note(self) -> str:
        """Which groups entered, and which were left out and why."""
        kept = f"{len(self.groups)} group{'s' * (len(self.groups) != 1)}, {self.combined.n} pairs"
        left = "; ".join(f"{g}: {why}" for g, why in self.skipped.items())
        return kept + (f"; left out: {left}" if left else "")


def stratified_correlation(
    a: npt.ArrayLike, b: npt.ArrayLike, groups: npt.ArrayLike, method: str = "spearman", level: float = 0.95
) -> Stratified:
    """Pearson's or Spearman's r between ``a`` and ``b`` within each group of ``groups``, and their combination.

    A correlation pooled over groups mixes the relation within each group with the differences between the groups'
    levels, and can even take the opposite sign (Simpson's paradox); this one compares items only with items of
    their own group. Each group's r is :func:`correlation` of its items. The combination is the inverse-variance
    weighted mean of the groups' Fisher z = atanh(r), weights n_g - 3 (the inverse of :func:`correlation`'s
    variance of z, the same for every group of one method), with the interval tanh(z̄ ± q / √Σw) (Spearman: Σw
    divided by 1.06); for one group with |r| < 1 it is that group's :func:`correlation`. A group with r = ±1 (common for
    Spearman over a handful of items) would have infinite z: it enters at ±(1 - 6/(n³ - n)), half a step of
    Spearman's lattice of attainable values below 1 (for either method). Groups with fewer than 4 items, or with a
    constant sequence, are left out and named in ``skipped``; none left is an error.
    """
    _check_method(method, level)
    if not np.shape(a) == np.shape(b) == np.shape(groups) or np.ndim(a) != 1:
        raise LinrecError(
            f"expected three equally long sequences; got shapes {np.shape(a)}, {np.shape(b)} and {np.shape(groups)}"
        )
    frame = pd.DataFrame(
        {"a": np.asarray(a, dtype=np.float64), "b": np.asarray(b, dtype=np.float64), "g": np.asarray(groups)}
    )
    kept: dict[Hashable, Correlation] = {}
    skipped: dict[Hashable, str] = {}
    for g, part in frame.groupby("g", sort=False):
        if len(part) < 4:
            skipped[g] = f"{len(part)} items, fewer than the 4 an interval needs"
        elif part.a.nunique() == 1 or part.b.nunique() == 1:
            skipped[g] = "a constant sequence, r undefined"
        else:
            kept[g] = correlation(part.a, part.b, method, level)
    if not kept:
        raise LinrecError(f"no group has 4 or more items with varying values; left out: {skipped}")
    weights = np.array([1 / _z_variance(method, c.n) for c in kept.values()])
    bound = np.array([1 - 6 / (c.n**3 - c.n) for c in kept.values()])
    z = np.arctanh(np.clip([c.r for c in kept.values()], -bound, bound))
    mean, se = float(weights @ z / weights.sum()), math.sqrt(1 / weights.sum())
    q = NormalDist().inv_cdf((1 + level) / 2)
    n = sum(c.n for c in kept.values())
    combined = Correlation(math.tanh(mean), math.tanh(mean - q * se), math.tanh(mean + q * se), n, method, level)
    return Stratified(combined, kept, skipped)


def bootstrap_correlation(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    groups: npt.ArrayLike,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Correlation:
    """Spearman's ρ between ``a`` and ``b`` within each group, combined as :func:`stratified_correlation` combines
    them, with a percentile bootstrap interval over items: each resample draws every group's items with
    replacement (seeded), ranks them again (ties averaged) and combines the groups' ρ; resamples in which a group's
    draw is constant are left out. One group: its own ρ (a perfect one is 1, not the value it would enter a
    combination at), the interval over its items."""
    point = stratified_correlation(a, b, groups, "spearman", level)
    frame = pd.DataFrame(
        {"a": np.asarray(a, dtype=np.float64), "b": np.asarray(b, dtype=np.float64), "g": np.asarray(groups)}
    )
    rng = np.random.default_rng(seed)
    z, weights = [], []
    for g in point.groups:
        part = frame[frame.g == g]
        n = len(part)
        drawn = rng.integers(n, size=(resamples, n))
        x = pd.DataFrame(part.a.to_numpy()[drawn]).rank(axis=1).to_numpy()
        y = pd.DataFrame(part.b.to_numpy()[drawn]).rank(axis=1).to_numpy()
        x, y = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = (x * y).sum(1) / np.sqrt((x**2).sum(1) * (y**2).sum(1))
        bound = 1 - 6 / (n**3 - n)
        z.append(np.arctanh(np.clip(r, -bound, bound)))
        weights.append(1 / _z_variance("spearman", n))
    w = np.array(weights)
    combined = np.tanh(w @ np.array(z) / w.sum())
    kept = torch.from_numpy(combined[np.isfinite(combined)])
    low, high = percentile_interval(kept, level)
    alone = [c.r for c in point.groups.values()]
    r = alone[0] if len(alone) == 1 else point.combined.r  # (one group: its own ρ, ±1 included)
    return Correlation(r, min(low, r), max(high, r), point.combined.n, "spearman", level)


@dataclass
class Share:
    """A share with a bootstrap interval: 1 - Σ after / Σ before over rows, resampled with replacement."""

    value: float
    low: float
    high: float
    level: float


def captured_share(
    before: torch.Tensor,
    after: torch.Tensor,
    level: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
    clusters: torch.Tensor | None = None,
) -> Share:
    """The share of the squared error ``before`` (one value per row) that a model leaving ``after`` removes:
    1 - Σ after / Σ before, with a percentile bootstrap interval.

    With ``before`` the closed form's per-row errors and ``after`` a probe's, this is the probe's gain over
    the closed form divided by what the closed form leaves, (R²_probe - R²_lin) / (1 - R²_lin), on the same
    rows: 1 when the probe removes the whole residual, 0 when it removes nothing, negative when it adds error.

    ``clusters``: one label per row (such as its sequence); the bootstrap then resamples whole clusters, since
    rows of one sequence are not independent draws and resampling them one by one narrows the interval. None:
    every row is its own cluster.
    """
    if not 0 < level < 1:
        raise LinrecError(f"the confidence level must lie in (0, 1); got {level}")
    before, after = before.detach().to(torch.float64).flatten(), after.detach().to(torch.float64).flatten()
    if before.shape != after.shape or before.numel() < 2:
        raise LinrecError(f"expected two equally long per-row errors (at least 2); got {before.shape}, {after.shape}")
    if before.sum() <= 0:
        raise LinrecError("the share is undefined: there is no error to capture")
    labels = torch.arange(before.numel()) if clusters is None else clusters.detach().cpu().flatten()
    if labels.shape != before.shape:
        raise LinrecError(f"expected one cluster label per row ({before.numel()}); got {labels.numel()}")
    _, cluster = torch.unique(labels, return_inverse=True)
    k = int(cluster.max()) + 1
    if k < 2:
        raise LinrecError("a cluster bootstrap needs at least 2 clusters; all rows carry one label")
    sums = [torch.zeros(k, dtype=torch.float64).index_add_(0, cluster, e) for e in (before.cpu(), after.cpu())]
    g = torch.Generator().manual_seed(seed)
    drawn = torch.randint(k, (resamples, k), generator=g)
    shares = 1 - sums[1][drawn].sum(1) / sums[0][drawn].sum(1)
    low, high = percentile_interval(shares, level)
    return Share(float(1 - after.sum() / before.sum()), low, high, level)


def percentile_interval(resampled: torch.Tensor, level: float) -> tuple[float, float]:
    """The percentile bootstrap interval at ``level``: the (1 - level)/2 and (1 + level)/2 quantiles of the
    ``resampled`` statistic (one value per resample)."""
    if not 0 < level < 1:
        raise LinrecError(f"the confidence level must lie in (0, 1); got {level}")
    tail = (1 - level) / 2
    low, high = torch.quantile(resampled.to(torch.float64), torch.tensor([tail, 1 - tail], dtype=torch.float64))
    return float(low), float(high)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom.

    Prediction intervals from a handful of seeds need it, and the core keeps no dependency on scipy: the
    upper tail is found by bisection on the CDF, integrated with Simpson's rule after substituting t = √df·tan θ
    (accurate to about 1e-9 for df ≥ 1, which the tests check against scipy).
    """
    if not 0 < p < 1:
        raise LinrecError(f"a quantile needs p in (0, 1); got {p}")
    if df < 1:
        raise LinrecError(f"Student's t needs at least 1 degree of freedom; got {df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    scale = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(math.pi)

    def cdf(x: float) -> float:
        # t = √df·tan θ turns the heavy tail into a finite, smooth integral: 1/2 + scale·∫₀^θx cos^(df-1) θ dθ
        theta = np.linspace(0.0, math.atan(x / math.sqrt(df)), 2001)
        f = np.cos(theta) ** (df - 1)
        h = theta[1] - theta[0]
        return 0.5 + scale * h / 3 * float(f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2 * high
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2
