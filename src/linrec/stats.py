"""Statistics used across the package: R² of predictions, correlations with intervals, participation ratios.

These are plain functions of arrays, beneath every other layer, so the core, the interventions
and the analyses all compute them one way.
"""

from __future__ import annotations

import math
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
    if method not in ("pearson", "spearman"):
        raise LinrecError(f"unknown correlation method '{method}'; choose pearson or spearman")
    if not 0 < level < 1:
        raise LinrecError(f"the confidence level must lie in (0, 1); got {level}")
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
    se = math.sqrt((1.0 if method == "pearson" else 1.06) / (n - 3))
    q = NormalDist().inv_cdf((1 + level) / 2)
    z = math.atanh(r)
    return Correlation(r, math.tanh(z - q * se), math.tanh(z + q * se), n, method, level)


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
    tail = (1 - level) / 2
    low, high = torch.quantile(shares, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return Share(float(1 - after.sum() / before.sum()), low, high, level)
