"""Standardising and whitening a block's inputs with the statistics of its moments.

Standardising gives every input dimension a common variance; whitening gives every non-null
direction a common variance. Whitening uses the same rank-revealing eigendecomposition of the
correlation matrix as :func:`linrec.core.fit.fit_affine` (same ``rcond``): directions it treats
as null stay at the mean, the others get identity covariance. The result is rotated back to the
input basis (Z = x̄ + (x - x̄) D⁻¹ V Λ^{-1/2} Vᵀ · √(n·variance), with D = diag(Cxx)^{1/2},
R = D⁻¹ Cxx D⁻¹ = V Λ Vᵀ over its non-null eigenvalues), so it can be fed to the FFN; its
covariance is ``variance`` times the projector onto the non-null directions. The cross-feeding
controls and the whitened trained baselines both use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from linrec.core.fit import DEFAULT_RCOND, input_spectrum
from linrec.core.moments import Moments
from linrec.errors import LinrecError

NORMALISATIONS = ("standardise", "whiten")


@dataclass
class InputTransform:
    """z = shift + (x - mean) @ matrix, in float64 (see the module docstring)."""

    mean: torch.Tensor  # (d,)
    matrix: torch.Tensor  # (d, d)
    shift: torch.Tensor  # (d,)
    kind: str
    null_dims: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.shift + (x.to(torch.float64) - self.mean) @ self.matrix


def input_transform(
    moments: Moments,
    kind: str,
    variance: float | None = None,
    keep_mean: bool = True,
    rcond: float = DEFAULT_RCOND,
) -> InputTransform:
    """Standardise or whiten inputs with the statistics in ``moments``.

    ``variance``: the variance each (non-null) direction gets; None keeps the inputs' average
    variance tr(Σ)/d. ``keep_mean``: add the input mean back (else the outputs are centred).
    """
    if kind not in NORMALISATIONS:
        raise LinrecError(f"unknown normalisation '{kind}'; choose one of {', '.join(NORMALISATIONS)}")
    if moments.n < 2:
        raise LinrecError(f"normalising needs at least 2 rows; got {moments.n}")
    if variance is not None and variance <= 0:
        raise LinrecError(f"variance must be positive; got {variance}")
    cxx = moments.cxx
    target = float(cxx.diagonal().sum() / (moments.n * moments.d_in)) if variance is None else variance
    if kind == "standardise":
        scale = cxx.diagonal().clamp(min=0).sqrt()
        constant = scale == 0
        matrix = torch.diag(
            torch.where(constant, torch.zeros_like(scale), 1 / scale.clamp(min=torch.finfo(torch.float64).tiny))
        )
        null_dims = int(constant.sum())
    else:
        spec = input_spectrum(cxx, rcond)
        vk = spec.eigenvectors
        matrix = ((vk / spec.eigenvalues.sqrt()) @ vk.T) / spec.scale[:, None]
        null_dims = spec.null_dims
    matrix = matrix * (moments.n * target) ** 0.5
    shift = moments.mean_x if keep_mean else torch.zeros_like(moments.mean_x)
    return InputTransform(moments.mean_x.clone(), matrix, shift.clone(), kind, null_dims)
