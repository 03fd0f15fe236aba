"""Standardising and whitening a block's inputs without leaving the manifold they live on.

A LayerNorm's outputs x = γ ⊙ z + β have Σ z = 0, so every captured row satisfies (x - β)·(1/γ) = 0:
the raw input covariance Cxx has an exact null direction v ∝ 1/γ, and the FFN was never trained on
inputs that move along it. A transform that is linear on the correlation scale (D⁻¹ x, with
D = diag(Cxx)^{1/2}) rotates v into other directions and would push rows off that manifold, so both
transforms here are built in the raw basis and keep every null direction of Cxx at the mean:

* whitening is the raw-basis pseudo-inverse square root, Z = x̄ + (x - x̄) Cxx^{+1/2} · √(n·variance):
  identity covariance (times ``variance``) on the non-null directions, nothing along the null ones;
* standardising divides each dimension by its spread and then projects the raw null directions out,
  so every dimension has about (not exactly) a common variance and the null directions stay null.

A norm also fixes each row's length: with z = (x - β)/γ (γ: the norm's gain, β: its bias, 0 for RMSNorm),
every row has ‖z‖² = d (slightly less with the norm's eps), and an RMSNorm has no null direction at all, so
keeping null directions null says nothing about its rows. Neither transform keeps lengths (whitening spreads
them by tens of percent), so the rows a block is fed are put back on its norm's surface with
:class:`NormManifold`: z centred (LayerNorm only: that is the hyperplane) and rescaled to the length the
captured rows have, their mean ‖z‖. The same step puts cross-fed rows on the receiving block's surface.

The null directions come from the same rank-revealing eigendecomposition of the correlation matrix as
:func:`linrec.core.fit.fit_affine` (same ``rcond``): R = D⁻¹ Cxx D⁻¹ = V Λ Vᵀ, its dropped eigenvectors
u map to raw null directions D⁻¹ u, and with B = D V_kept Λ^{1/2} = U S Qᵀ (so Cxx = B Bᵀ on its range)
Cxx^{+1/2} = U S⁻¹ Uᵀ, computed without ever inverting a raw-scale eigenvalue. The cross-feeding controls
and the whitened trained baselines both use it.
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


@dataclass
class NormManifold:
    """The surface a norm's outputs x = γ ⊙ z + β lie on: ‖z‖ = ``radius`` on every row, and Σ z = 0 when
    ``centred`` (a LayerNorm; an RMSNorm has β = 0 and is not centred). A feature with γ = 0 carries nothing:
    its z is 0 and its x is β."""

    gain: torch.Tensor  # (d,) float64
    bias: torch.Tensor  # (d,) float64
    centred: bool
    radius: float

    @classmethod
    def of_rows(cls, x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, centred: bool) -> NormManifold:
        """The surface of a norm with ``gain`` and ``bias`` whose outputs are ``x``: their mean ‖z‖ is the radius
        (√d up to the norm's eps, which shortens rows of small variance)."""
        if not gain.shape == bias.shape == x.shape[1:]:
            raise LinrecError(
                f"rows of width {x.shape[1]} cannot come from a norm of width {gain.shape[0]}; "
                "cross-feeding needs models of the same width"
            )
        gain, bias = gain.to(torch.float64), bias.to(torch.float64)
        radius = float(cls(gain, bias, centred, 1.0).features(x).norm(dim=1).mean())
        return cls(gain, bias, centred, radius)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """z = (x - β)/γ in float64 (0 where γ = 0)."""
        live = self.gain != 0
        return torch.where(live, (x.to(torch.float64) - self.bias) / torch.where(live, self.gain, 1.0), 0.0)

    def place(self, z: torch.Tensor) -> torch.Tensor:
        """Rows γ ⊙ z' + β, with z' = z centred over the live features (when ``centred``) and rescaled to ``radius``."""
        live = self.gain != 0
        z = z.to(torch.float64) * live
        if self.centred:
            z = z - live * (z.sum(1, keepdim=True) / live.sum().clamp(min=1))
        length = z.norm(dim=1, keepdim=True).clamp(min=torch.finfo(torch.float64).tiny)
        return self.gain * (z * (self.radius / length)) + self.bias

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Rows ``x`` moved onto this surface (the nearest row direction in z, at the surface's length)."""
        return self.place(self.features(x))


def off_manifold_spread(x: torch.Tensor, directions: torch.Tensor) -> float:
    """Spread of rows ``x`` along unit ``directions`` (d, k), relative to their typical distance from the mean:
    about 1e-8 for captured LayerNorm rows, 0 for rows that respect every null direction."""
    x = x.to(torch.float64)
    centred = x - x.mean(0)
    along = (centred @ directions.to(torch.float64)).pow(2).sum(1).mean().sqrt()
    return float(along / centred.pow(2).sum(1).mean().sqrt().clamp(min=torch.finfo(torch.float64).tiny))


def input_transform(
    moments: Moments,
    kind: str,
    variance: float | None = None,
    keep_mean: bool = True,
    rcond: float = DEFAULT_RCOND,
) -> InputTransform:
    """Standardise or whiten inputs with the statistics in ``moments``, keeping their null directions null.

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
    spec = input_spectrum(moments, rcond)
    if kind == "standardise":
        scale = cxx.diagonal().clamp(min=0).sqrt()
        inverse = torch.where(scale > 0, 1 / scale.clamp(min=torch.finfo(torch.float64).tiny), torch.zeros_like(scale))
        null = spec.null_basis()
        matrix = torch.diag(inverse) - (inverse[:, None] * null) @ null.T
    else:
        root = spec.scale[:, None] * spec.eigenvectors * spec.eigenvalues.sqrt()  # B, with B Bᵀ = Cxx
        u, s, _ = torch.linalg.svd(root, full_matrices=False)
        matrix = (u / s) @ u.T
    matrix = matrix * (moments.n * target) ** 0.5
    shift = moments.mean_x if keep_mean else torch.zeros_like(moments.mean_x)
    return InputTransform(moments.mean_x.clone(), matrix, shift.clone(), kind, spec.null_dims)
