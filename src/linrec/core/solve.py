"""The Cholesky solve of a fit that is only scored: the map of the rank-revealing pseudo-inverse, from a Cholesky
factorisation instead of an eigendecomposition, wherever that provably gives the same map.

A fit that is only scored (``condition=False`` in :func:`linrec.core.fit.fit_affine`: every held-out fit of
:func:`~linrec.core.fit.kfold` and :func:`~linrec.core.fit.held_out_r2`) needs the pseudo-inverse's map, not the
spectrum, and :func:`cholesky_map` gets it from a Cholesky factorisation wherever that provably gives the map of
:mod:`linrec.core.fit`'s eigendecomposition and its rule for null directions (at width 4,096 on two cores an
eigendecomposition takes 5 s or more, a factorisation and its inverse under 1 s). With C the training correlation
matrix and N orthonormal columns (on its scale) along the m directions taken as null, C + NNᵀ is factored and
inverted. N is found once per group of fits: :func:`~linrec.core.fit.kfold` takes the directions its fit on all rows
dropped (a LayerNorm's 1/γ is null in every subset of the rows, and so is a constant or a duplicated feature);
elsewhere the group's first fit guesses them (inverse iteration with a Cholesky factor of C plus its rounding,
:func:`guessed_null`); a fit that falls back hands the directions its eigendecomposition dropped to the next fits.
Two sufficient conditions, with s_i = E[x_i²]/Var[x_i]:

- the rule keeps C's d - m largest eigenvalues: for x ⊥ N, xᵀ(C + NNᵀ)x = xᵀCx, so by Courant–Fischer they are at
  least λmin(C + NNᵀ) ≥ 1 / ‖(C + NNᵀ)⁻¹‖_F, which must exceed rcond × min(the largest absolute row sum of C, a
  bound on λmax (Gershgorin), max s / 4, a bound on the rounding clause);
- the rule drops C's m smallest: they are at most μ, the largest eigenvalue of NᵀCN (Courant–Fischer again), which
  must be at most rcond × min(max C_ii, at most λmax, min s / 4).

Rounding is given room: √d·eps times the bound on λmax for each factorisation (the usual size of their backward
errors, not the worst case) and a factor 2 on the computed inverse's norm; a factorisation that fails, or whose
smallest pivot is already too small (every pivot is at least λmin), gives up before the inverse is formed. The m
dropped directions are then C's own m smallest eigenvectors U, which rounding of the rows moves off N (in a 16-bit
capture, by enough to change R² in the 7th digit): Davidson's method, with (C + NNᵀ)⁻¹ as preconditioner, refines N
to U until their residual ‖CU - UΘ‖ is at the rounding of an eigendecomposition's own, and W = (I - UUᵀ)(C + UUᵀ)⁻¹
D⁻¹Cxy / D, the pseudo-inverse's map, follows from (C + NNᵀ)⁻¹ by Woodbury's identity with products of 2m columns.
Where a condition fails, or the refinement does not converge, :func:`cholesky_map` returns None and the fit is the
eigendecomposition's (:mod:`linrec.core.fit`; everywhere with ``solver="eigh"``, the reference): for a Gram singular
in another way, or a 16-bit capture whose cutoff (:func:`~linrec.core.fit.rcond_for`) drops small real directions.

What the fits read of the moments is here too: :class:`FitSums`, a training set's sums made once, and
:func:`scales`, the correlation scale and the weights of the rounding clause that both solves share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from linrec.core.moments import Moments


@dataclass
class FitSums:
    """What a fit reads of a stream's moments: the row count, the means and the centred sums Cxx and Cxy (not Cyy)."""

    n: int
    mean_x: torch.Tensor
    mean_y: torch.Tensor
    cxx: torch.Tensor
    cxy: torch.Tensor

    @property
    def d_in(self) -> int:
        return self.mean_x.shape[0]

    @classmethod
    def of(cls, folds: list[Moments]) -> FitSums:
        """The sums of ``folds`` together: :func:`merge_folds`'s fields bit for bit (Chan's update in the same order),
        without Cyy and summed in place, so a training set costs one new Cxx and Cxy, not one per merge."""
        first = folds[0]
        out, owned = cls(first.n, first.mean_x, first.mean_y, first.cxx, first.cxy), False
        for m in folds[1:]:
            if m.n == 0:
                continue
            if out.n == 0:
                out, owned = cls(m.n, m.mean_x, m.mean_y, m.cxx, m.cxy), False
                continue
            n, dx, dy = out.n + m.n, m.mean_x - out.mean_x, m.mean_y - out.mean_y
            w = out.n * m.n / n
            cxx = out.cxx.add_(m.cxx) if owned else out.cxx + m.cxx
            cxy = out.cxy.add_(m.cxy) if owned else out.cxy + m.cxy
            cxx.add_(torch.outer(dx, dx).mul_(w))
            cxy.add_(torch.outer(dx, dy).mul_(w))
            out, owned = cls(n, out.mean_x + dx * (m.n / n), out.mean_y + dy * (m.n / n), cxx, cxy), True
        return out


Training = Moments | FitSums
"""What a fit is made from: a stream's moments, or the sums of several (:meth:`FitSums.of`)."""


def scales(train: Training) -> tuple[torch.Tensor, torch.Tensor]:
    """Each feature's scale sqrt(Cxx_ii) and its E[x²]/Var[x] (both 1 for a constant feature): the correlation scale
    and the weights of the rounding clause (:mod:`linrec.core.fit`'s module docstring)."""
    variance = train.cxx.diagonal().clamp(min=0)
    scale = torch.where(variance > 0, variance.sqrt(), torch.ones_like(variance))
    second = torch.where(variance > 0, 1 + train.n * train.mean_x**2 / scale**2, torch.ones_like(variance))
    return scale, second


GUESSED_NULL = 8
"""The most null directions :func:`guessed_null` finds (a group with more falls back, and takes the
eigendecomposition's)."""


def guessed_null(train: Training, rcond: float) -> torch.Tensor:
    """The directions the rule would drop, guessed without an eigendecomposition for a group of fits that knows none
    (orthonormal columns in the raw input basis): three steps of inverse iteration on :data:`GUESSED_NULL` vectors
    with a Cholesky factor of C + σI (σ: the worst rounding of a factorisation, so that a singular C still factors),
    then Rayleigh-Ritz with C, keeping what lies below the drop cutoff; none where C + σI cannot be factored. A
    guess only: :func:`cholesky_map` checks it."""
    scale, second = scales(train)
    corr = train.cxx / torch.outer(scale, scale)
    cut, d = _Cutoffs.of(corr, second, rcond), corr.shape[0]
    shift = math.sqrt(d) * cut.slack  # d eps λmax, the bound on the backward error of a Cholesky factorisation
    factor, info = torch.linalg.cholesky_ex(corr.diagonal_scatter(corr.diagonal() + shift))
    start = torch.Generator(device=corr.device).manual_seed(0)
    x = torch.randn(d, min(GUESSED_NULL, d), generator=start, dtype=corr.dtype, device=corr.device)
    if int(info) != 0:
        return x[:, :0]
    for _ in range(3):
        x = torch.linalg.qr(torch.cholesky_solve(x, factor)).Q
    inner = x.T @ (corr @ x)
    theta, y = torch.linalg.eigh((inner + inner.T) / 2)
    return torch.linalg.qr(x @ y[:, theta + cut.slack <= cut.drop] / scale[:, None]).Q


@dataclass(frozen=True)
class _Cutoffs:
    """Where the rule stands on one training correlation matrix C, whatever the direction (module
    docstring): it keeps an eigenvalue above ``keep`` and drops one at most ``drop``; ``slack``: a factorisation's
    rounding."""

    keep: float
    drop: float
    slack: float

    @classmethod
    def of(cls, corr: torch.Tensor, second: torch.Tensor, rcond: float) -> _Cutoffs:
        upper = float(torch.linalg.matrix_norm(corr, ord=math.inf))  # λmax ≤ the largest absolute row sum
        lower = float(corr.diagonal().max())  # λmax ≥ every diagonal element
        slack = math.sqrt(corr.shape[0]) * torch.finfo(torch.float64).eps * upper
        return cls(rcond * min(upper, float(second.max()) / 4), rcond * min(lower, float(second.min()) / 4), slack)


def _drops_null(corr: torch.Tensor, basis: torch.Tensor, cut: _Cutoffs) -> bool:
    """Whether the rule drops m eigenvalues of ``corr`` (m: the columns of ``basis``): the m smallest are at most
    the largest eigenvalue of NᵀCN (Courant–Fischer)."""
    if basis.shape[1] == 0:
        return True
    inner = basis.T @ (corr @ basis)
    return float(torch.linalg.eigvalsh((inner + inner.T) / 2).max()) + cut.slack <= cut.drop


def _deflated_inverse(corr: torch.Tensor, basis: torch.Tensor, cut: _Cutoffs) -> torch.Tensor | None:
    """(C + NNᵀ)⁻¹, N the columns of ``basis``, where its smallest eigenvalue provably exceeds ``cut.keep`` with both
    factorisations' rounding to spare (λmin ≥ 1/‖inverse‖_F, halved for the rounding of the inverse); else None,
    before the inverse is formed where the factor shows it (every pivot is at least λmin)."""
    need = 2 * (cut.keep + 2 * cut.slack)
    factor, info = torch.linalg.cholesky_ex(corr.addmm(basis, basis.T))
    if int(info) != 0 or float(factor.diagonal().min()) ** 2 <= need:
        return None
    inverse = torch.cholesky_inverse(factor)
    return inverse if 1 / float(torch.linalg.matrix_norm(inverse)) > need else None


REFINE_STEPS = 12
"""The most steps :func:`_own_null` takes (a float32 capture's null direction needs one, a bfloat16 one's five)."""


def _own_null(corr: torch.Tensor, basis: torch.Tensor, inverse: torch.Tensor, tol: float) -> torch.Tensor | None:
    """The eigenvectors U of C with its m smallest eigenvalues (m: the columns of ``basis``), refined from ``basis``
    until their residual ‖CU - UΘ‖_F is at most ``tol``, the rounding of an eigendecomposition's own; None where
    :data:`REFINE_STEPS` do not get there. The eigendecomposition drops this training set's null directions, which
    rounding of the rows moves off those of all rows (far enough, in a 16-bit capture, to change R² in the 7th
    digit). Davidson's method: Rayleigh-Ritz on a subspace grown by ``inverse`` = (C + NNᵀ)⁻¹ times the residual."""
    m = basis.shape[1]
    if m == 0:
        return basis
    v, cv = basis, corr @ basis
    for _ in range(REFINE_STEPS):
        inner = v.T @ cv
        theta, y = torch.linalg.eigh((inner + inner.T) / 2)
        u, residual = v @ y[:, :m], cv @ y[:, :m] - v @ (y[:, :m] * theta[:m])
        if float(torch.linalg.matrix_norm(residual)) <= tol:
            return u
        step = inverse @ residual
        for _ in range(2):  # twice, to be orthogonal to v to rounding
            step -= v @ (v.T @ step)
        step = torch.linalg.qr(step).Q
        v, cv = torch.cat([v, step], 1), torch.cat([cv, corr @ step], 1)
    return None


def _null_solve(inverse: torch.Tensor, basis: torch.Tensor, own: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """(I - UUᵀ)(C + UUᵀ)⁻¹ ``rhs`` (U: ``own``), the pseudo-inverse's solution with C's null eigenvectors U dropped,
    from ``inverse`` = (C + NNᵀ)⁻¹ (N: ``basis``) by Woodbury's identity: C + UUᵀ = (C + NNᵀ) + Z S Zᵀ, Z = [U N],
    S = diag(I, -I), at the cost of products with 2m columns."""
    out = inverse @ rhs
    m = basis.shape[1]
    if m:
        z = torch.cat([own, basis], 1)
        y = inverse @ z
        signs = torch.cat([torch.ones(m), -torch.ones(m)]).to(z)
        out -= y @ torch.linalg.solve(torch.diag(signs) + z.T @ y, y.T @ rhs)
        out -= own @ (own.T @ out)
    return out


def cholesky_map(train: Training, rcond: float, null: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int] | None:
    """The least-squares map ŷ = x W + b of ``train`` by Cholesky, its correlation matrix deflated along ``null``
    (orthonormal columns in the raw input basis): (W, b, the number of directions dropped as null), or None where the
    rule might not drop exactly as many directions, nor those (module docstring)."""
    scale, second = scales(train)
    corr = train.cxx / torch.outer(scale, scale)
    basis = torch.linalg.qr(null.to(corr) * scale[:, None]).Q  # the same directions on the correlation scale
    cut = _Cutoffs.of(corr, second, rcond)
    if not _drops_null(corr, basis, cut):
        return None
    inverse = _deflated_inverse(corr, basis, cut)
    own = None if inverse is None else _own_null(corr, basis, inverse, cut.slack)
    if inverse is None or own is None:
        return None
    del corr
    weight = _null_solve(inverse, basis, own, train.cxy / scale[:, None]) / scale[:, None]
    return weight, train.mean_y - train.mean_x @ weight, basis.shape[1]
