"""The closed-form affine map and its held-out R², from moments alone.

Fit. On training moments, W = Cxx⁺ Cxy and b = ȳ - x̄ W (so ŷ = x W + b). The pseudo-inverse is
rank-revealing: Cxx is first scaled to a correlation matrix (so a handful of huge residual-stream
dimensions do not set the scale), then eigendecomposed, and eigendirections that are numerically
null are dropped. A LayerNorm-fed block has one such direction per LayerNorm (its normalised
features sum to zero), so a plain inverse would be wrong.

Which directions are null. ``rcond`` is the squared relative precision the captured rows are trusted
to (√rcond per element). A direction u is dropped when its eigenvalue λ is at most ``rcond`` times the
largest *and* at most the variance that errors of √rcond/2 of each element (independent, as rounding
errors nearly are) could give it on their own: (rcond/4) Σᵢ uᵢ² E[xᵢ²]/Var[xᵢ]. The second clause keeps
small but real directions of strongly anisotropic inputs that a relative cutoff alone would drop; a
direction the rows never move along holds rounding only and falls under both. The rule never drops a
direction the relative cutoff alone would keep.

Solve. A fit that is only scored (``condition=False``: every held-out fit of :func:`kfold`, :func:`held_out_r2`)
gets this map from a Cholesky factorisation wherever that provably gives the same map: :mod:`linrec.core.solve`.

Score. On test moments, with r = y - ŷ the sum of squared errors per output dimension j is
``Cyy[j,j] - 2 (WᵀCxy)[j,j] + (WᵀCxxW)[j,j] + n δ_j²``, where δ is the error of the prediction at
the test means. R² compares it with the test sum of squares about the test mean, as
``sklearn.metrics.r2_score`` does; the global R² weights dimensions by their variance
(``multioutput="variance_weighted"``). Held-out R² can be negative; it is never clipped.

Effective ranks are participation ratios, PR(λ) = (Σλ)² / Σλ², of an eigenvalue spectrum: of the
output covariance (``effective_rank_out``) and of the covariance of the fitted map's predictions,
WᵀCxxW (``effective_rank_map``). PR is 1 when one direction carries all variance and d when all
directions carry equal variance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import torch

from linrec.core import solve
from linrec.core.columns import COLUMNS
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.core.scores import score_columns
from linrec.core.solve import FitSums, Training
from linrec.core.tails import Tails
from linrec.errors import LinrecError, finite
from linrec.models.loading import parse_dtype
from linrec.progress import progress_bar
from linrec.stats import participation_ratio

DEFAULT_RCOND = 1e-10
"""The null-direction cutoff for float32 and float64 rows: relative to the largest eigenvalue of the input
correlation matrix (float32 activations put an exact LayerNorm null direction near 1e-14; genuine directions of
trained models sit far above 1e-10), and as a squared precision in the rounding clause (module docstring)."""

HALF_PRECISION = (torch.float16, torch.bfloat16)


def rcond_for(dtype: torch.dtype | str) -> float:
    """The null-direction cutoff for inputs captured in ``dtype``: :data:`DEFAULT_RCOND`, or eps(dtype)² when
    that is larger (16-bit captures): rows trusted to the format's precision (see the module docstring).

    Rounding a LayerNorm's output to a format with machine epsilon eps (unit roundoff eps/2) leaves its null
    direction an eigenvalue of about eps²/20 on the correlation scale (measured: 1.2e-6 of the largest for
    bfloat16, 2e-8 for float16, on tiny GPT-2 and NeoX models), far above 1e-10, so the float32 cutoff would
    keep it and report a condition number set by rounding. Rounding bounds each element's error by eps/2, so
    the direction also sits below the rounding clause (rcond/4) Σᵢ uᵢ² E[xᵢ²]/Var[xᵢ], and is dropped; a real
    direction whose variance exceeds what rounding alone could produce is kept, however small it is next to
    the largest.
    """
    return max(DEFAULT_RCOND, torch.finfo(parse_dtype(dtype)).eps ** 2)


def half_precision_note(dtype: torch.dtype | str) -> str | None:
    """What a 16-bit capture means for conditioning (None for 32 and 64 bits): said wherever it is used."""
    dtype = parse_dtype(dtype)
    if dtype not in HALF_PRECISION:
        return None
    return (
        f"the activations were captured in {str(dtype).removeprefix('torch.')}: input directions whose variance "
        "is no larger than rounding to this format could produce are dropped as null (rcond_for), so very "
        "small real directions are lost with the LayerNorm's null direction, which changes the fitted map and "
        "R²_lin slightly and caps the input condition numbers it can show; blocks chosen or compared by "
        "conditioning or by small differences in R²_lin are better measured from a float32 capture (--dtype float32)"
    )


@dataclass
class AffineFit:
    """ŷ = x @ weight + bias, with what the rank-revealing solve found about the inputs."""

    weight: torch.Tensor  # (d_in, d_out), float64
    bias: torch.Tensor  # (d_out,), float64
    null_dims: int  # input directions dropped as numerically null
    input_condition: float  # λ_max / λ_min of the input covariance over its non-null spectrum
    rcond: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.weight.dtype) @ self.weight + self.bias


@dataclass
class InputSpectrum:
    """The non-null eigenpairs of the input correlation matrix D⁻¹CxxD⁻¹ (D = per-feature scale)."""

    scale: torch.Tensor  # sqrt(diag Cxx), 1 for constant features
    eigenvalues: torch.Tensor  # kept eigenvalues (above rcond × the largest or the rounding clause)
    eigenvectors: torch.Tensor  # (d_in, kept)
    null_dims: int  # directions dropped as numerically null
    dropped: torch.Tensor  # (d_in, null_dims): the dropped eigenvectors, on the correlation scale

    def null_basis(self) -> torch.Tensor:
        """Orthonormal columns spanning the dropped directions in the raw input basis (u ↦ D⁻¹u): the
        directions every input row keeps constant, such as a LayerNorm's 1/γ."""
        q, _ = torch.linalg.qr(self.dropped / self.scale[:, None])
        return q


def check_rcond(rcond: float) -> float:
    """``rcond``, or a LinrecError when it is no finite number of at least 0: every comparison with NaN is false,
    so a NaN cutoff would drop every input direction and report R² near 0 without a word."""
    return finite("rcond (the null-direction cutoff; None: the capture dtype's)", rcond, low=0)


Solver = Literal["cholesky", "eigh"]
"""How a fit that is only scored is solved: by Cholesky wherever that provably gives the eigendecomposition's map,
else by the eigendecomposition (``"cholesky"``), or always by the eigendecomposition (``"eigh"``, the reference)."""


def input_spectrum(moments: Training, rcond: float = DEFAULT_RCOND) -> InputSpectrum:
    """Rank-revealing eigendecomposition of the centred input sums of ``moments``, on the correlation scale: a
    direction is null when its eigenvalue is small both next to the largest and next to what errors of √rcond/2
    per element could produce (see the module docstring)."""
    rcond = check_rcond(rcond)
    scale, second = solve.scales(moments)
    lam, vec = torch.linalg.eigh(moments.cxx / torch.outer(scale, scale))
    rounding = rcond / 4 * (vec.pow(2) * second[:, None]).sum(0)  # E[x²]/Var[x] per feature, along each direction
    keep = (lam > rcond * lam.max().clamp(min=torch.finfo(torch.float64).tiny)) | (lam > rounding)
    return InputSpectrum(scale, lam[keep], vec[:, keep], int((~keep).sum()), vec[:, ~keep])


def _check_rows(n: int, d_in: int) -> None:
    """A LinrecError unless ``n`` training rows are enough for an affine fit of input width ``d_in``."""
    if n < d_in + 1:
        raise LinrecError(
            f"{n} training rows for an input width of {d_in}: the affine fit needs at least "
            f"{d_in + 1} (width + 1). Raise --max-rows (the rows per block) or use fewer folds."
        )


def fit_affine(
    train: Training,
    rcond: float = DEFAULT_RCOND,
    *,
    condition: bool = True,
    null: torch.Tensor | None = None,
    solver: Solver = "cholesky",
) -> AffineFit:
    """The least-squares affine map of the training moments (minimum-norm on null directions).

    ``condition=False`` leaves ``input_condition`` NaN and skips the second eigendecomposition it costs (for fits
    that are only scored); such a fit is solved by Cholesky, deflated along ``null`` (orthonormal columns in the raw
    input basis, :meth:`InputSpectrum.null_basis`; None: none known), wherever that provably gives the
    eigendecomposition's map, else by the eigendecomposition (:mod:`linrec.core.solve`; ``solver``:
    :data:`Solver`)."""
    _check_rows(train.n, train.d_in)
    if condition:
        return _eigh_fit(train, input_spectrum(train, rcond), rcond, condition=True)
    return _scoring_fit(train, rcond, null, solver)[0]


def _eigh_fit(train: Training, spec: InputSpectrum, rcond: float, condition: bool) -> AffineFit:
    """The map through ``spec``, the eigendecomposition of ``train``'s inputs (the pseudo-inverse on its kept
    directions): the reference solve and the fall-back of the Cholesky one; ``condition``: with the input condition
    number (one more eigendecomposition)."""
    vk, scale = spec.eigenvectors, spec.scale
    pinv = (vk / spec.eigenvalues) @ vk.T
    weight = (pinv @ (train.cxy / scale[:, None])) / scale[:, None]
    bias = train.mean_y - train.mean_x @ weight
    if not condition:
        return AffineFit(weight, bias, spec.null_dims, float("nan"), rcond)
    cov_lam = torch.linalg.eigvalsh(train.cxx / train.n).flip(0)[: train.d_in - spec.null_dims]
    ratio = float(cov_lam[0] / cov_lam[-1]) if cov_lam.numel() and cov_lam[-1] > 0 else float("inf")
    return AffineFit(weight, bias, spec.null_dims, ratio, rcond)


def _scoring_fit(
    train: Training, rcond: float, null: torch.Tensor | None, solver: Solver
) -> tuple[AffineFit, torch.Tensor]:
    """A fit that is only scored, and the null directions for the next fit of its group: those it deflated (``null``,
    or a guess where None) where the Cholesky solve held, else those its eigendecomposition dropped
    (:mod:`linrec.core.solve`)."""
    rcond = check_rcond(rcond)
    if solver == "cholesky":
        basis = solve.guessed_null(train, rcond) if null is None else null
        solved = solve.cholesky_map(train, rcond, basis)
        if solved is not None:
            return AffineFit(*solved, math.nan, rcond), basis
    spec = input_spectrum(train, rcond)
    return _eigh_fit(train, spec, rcond, condition=False), spec.null_basis()


@dataclass
class HeldOut:
    """Per-output-dimension squared error and total sum of squares on test rows."""

    sse: torch.Tensor  # (d_out,)
    sst: torch.Tensor  # (d_out,)

    @property
    def r2(self) -> float:
        """Variance-weighted R² over output dimensions."""
        return float(1 - self.sse.sum() / self.sst.sum())

    @property
    def r2_per_feature(self) -> torch.Tensor:
        """R² of each output dimension; a constant dimension scores 1 if predicted exactly, else 0
        (scikit-learn's convention)."""
        r2 = 1 - self.sse / torch.where(self.sst > 0, self.sst, torch.ones_like(self.sst))
        exact = torch.where(self.sse <= 0, torch.ones_like(r2), torch.zeros_like(r2))
        return torch.where(self.sst > 0, r2, exact)


def held_out(fit: AffineFit, test: Moments) -> HeldOut:
    """Squared errors of ``fit`` on the rows summarised by ``test``, without those rows."""
    w = fit.weight.to(test.cxx.device)
    delta = test.mean_y - (test.mean_x @ w + fit.bias.to(w.device))
    sse = test.output_ss - 2 * (w * test.cxy).sum(0) + ((test.cxx @ w) * w).sum(0) + test.n * delta**2
    return HeldOut(sse.clamp(min=0), test.output_ss.clone())


@dataclass
class BlockReport:
    """k-fold recoverability of one block (see the module docstring for the definitions)."""

    block: int
    r2_lin: float
    r2_lin_std: float
    r2_per_feature: torch.Tensor
    effective_rank_out: float
    effective_rank_map: float
    input_condition: float
    null_dims: int
    n_train: int
    n_test: int
    d_in: int
    d_out: int
    r2_lin_folds: tuple[float, ...] = ()
    r2_lin_half_rows: float = float("nan")
    first_position_share: float = float("nan")  # unknown unless the first positions' moments were kept apart
    r2_lin_after_first: float = float("nan")
    r2_lin_after_first_std: float = float("nan")
    r2_lin_after_first_folds: tuple[float, ...] = ()
    top_rows_share: float = float("nan")  # unknown unless the capture kept each block's largest rows
    top_rows_share_after_first: float = float("nan")
    input_rms: float = float("nan")  # the inputs' statistics (input_statistics)
    effective_rank_in: float = float("nan")
    outlier_ratio: float = float("nan")
    scores: dict[str, float] = field(default_factory=lambda: score_columns(None, math.nan))  # linrec.core.scores

    @property
    def r2_feature_median(self) -> float:
        """The median of the per-feature R² (for an even width, the mean of the two middle values, as
        ``numpy.median``; ``torch.median`` would return the lower one)."""
        return float(np.median(self.r2_per_feature.to(torch.float64).numpy()))

    def row(self) -> dict:
        """The table's row: the columns of :data:`COLUMNS`, in its order."""
        values = {
            **vars(self),
            **self.scores,
            "r2_feature_median": self.r2_feature_median,
            "r2_lin_folds": list(self.r2_lin_folds),
            "r2_lin_after_first_folds": list(self.r2_lin_after_first_folds),
        }
        return {column: values[column] for column in COLUMNS}


def _checked_folds(block: int, folds: list[Moments]) -> None:
    if len(folds) < 2:
        raise LinrecError(f"k-fold recovery needs at least 2 folds; got {len(folds)}")
    empty = [f for f, m in enumerate(folds) if m.n == 0]
    if empty:
        raise LinrecError(
            f"block {block}: folds {empty} received no rows; use more sequences (--max-rows) or fewer folds"
        )


def held_out_r2(
    folds: list[Moments],
    training: list[list[int]],
    rcond: float,
    *,
    null: torch.Tensor | None = None,
    solver: Solver = "cholesky",
) -> list[float] | None:
    """Held-out R² of each fold f, its map fitted on the folds ``training[f]``; None when one of those training
    sets holds too few rows for the width (the fit needs width + 1). Each training set is merged when its fold is
    scored, so one of them is held at a time. ``null``, ``solver``: as :func:`fit_affine`'s; a fit that falls back
    hands its null directions to the next (:func:`_held_out_scores`)."""
    if any(sum(folds[g].n for g in used) < folds[0].d_in + 1 for used in training):
        return None
    return [score.r2 for score in _held_out_scores(folds, training, rcond, null, solver)]


def _held_out_scores(
    folds: list[Moments], training: list[list[int]], rcond: float, null: torch.Tensor | None, solver: Solver
) -> list[HeldOut]:
    """The scores of each fold f, its map fitted on the folds ``training[f]`` (merged as its fold is scored) and
    solved as :func:`fit_affine` solves a fit that is only scored, deflated along ``null`` at first and then along
    the null directions of the latest fit that fell back (:mod:`linrec.core.solve`)."""
    scores = []
    basis = null
    for used, test in zip(training, folds, strict=True):
        fit, basis = _scoring_fit(FitSums.of([folds[g] for g in used]), rcond, basis, solver)
        scores.append(held_out(fit, test))
    return scores


def leave_one_out(k: int) -> list[list[int]]:
    """For each held-out fold f of k, every other fold: the training folds of k-fold cross-validation."""
    return [[g for g in range(k) if g != f] for f in range(k)]


def half_training(k: int) -> list[list[int]]:
    """For each held-out fold f of k, the (k-1)//2 training folds that follow it (cyclically): about half of its
    training rows, for the convergence column ``r2_lin_half_rows`` (empty lists when k < 3)."""
    return [[(f + 1 + i) % k for i in range((k - 1) // 2)] for f in range(k)]


def variance_share(part: Moments, total: Moments) -> float:
    """The share of ``total``'s output sum of squares, about its own mean, that the rows of ``part`` (a subset of
    them) carry: a part far from the rest counts fully, not only its spread about its own mean."""
    inside = part.output_ss.sum() + part.n * (part.mean_y - total.mean_y).pow(2).sum()
    return float(inside / total.output_ss.sum())


def input_statistics(total: Moments) -> dict[str, float]:
    """The inputs' scale and shape from their moments: ``input_rms``, ``effective_rank_in``, ``outlier_ratio``
    (:data:`COLUMNS`), kept in the table so that no caller needs the moments for them."""
    cov = total.cxx / total.n
    var = cov.diagonal().clamp(min=0)
    median = float(var.median())
    return {
        "input_rms": float(var.mean().sqrt()),
        "effective_rank_in": participation_ratio(torch.linalg.eigvalsh(cov)),
        "outlier_ratio": float(var.max()) / median if median > 0 else math.inf,
    }


def _all_rows_fit(total: Moments, rcond: float) -> tuple[int, float, float, torch.Tensor]:
    """``null_dims``, ``input_condition`` and ``effective_rank_map`` of the fit on all rows, and the directions it
    dropped (orthonormal, raw input basis): made before the held-out fits, which deflate them, and holding none of
    its d x d matrices beside those fits."""
    spec = input_spectrum(total, rcond)
    full = _eigh_fit(total, spec, rcond, condition=True)
    predicted_cov = full.weight.T @ total.cxx @ full.weight
    rank = participation_ratio(torch.linalg.eigvalsh((predicted_cov + predicted_cov.T) / 2))
    return full.null_dims, full.input_condition, rank, spec.null_basis()


def kfold(
    block: int, folds: list[Moments], rcond: float = DEFAULT_RCOND, *, solver: Solver = "cholesky"
) -> BlockReport:
    """Fit on all folds but one, score on that one, for each fold; report the mean and spread.

    R² and per-feature R² are averaged over folds (std with ddof=1); conditioning, null
    directions and the map's effective rank come from the fit on all rows. ``r2_lin_half_rows`` repeats the
    held-out R² with each map fitted on about half its training folds (:func:`half_training`). The fit on all rows
    comes first: the held-out fits deflate the directions it dropped (:mod:`linrec.core.solve`; ``solver``: as
    :func:`fit_affine`'s).
    """
    _checked_folds(block, folds)
    for used in leave_one_out(len(folds)):
        _check_rows(sum(folds[g].n for g in used), folds[0].d_in)
    total = merge_folds(folds)
    null_dims, input_condition, effective_rank_map, null = _all_rows_fit(total, rcond)
    scores = _held_out_scores(folds, leave_one_out(len(folds)), rcond, null, solver)
    r2s, per_feature = [s.r2 for s in scores], [s.r2_per_feature for s in scores]
    half = held_out_r2(folds, half_training(len(folds)), rcond, null=null, solver=solver) if len(folds) > 2 else None
    n_test = round(np.mean([m.n for m in folds]))
    inputs = input_statistics(total)
    return BlockReport(
        block=block,
        r2_lin=float(np.mean(r2s)),
        r2_lin_std=float(np.std(r2s, ddof=1)),
        r2_per_feature=torch.stack(per_feature).mean(0).cpu(),
        effective_rank_out=participation_ratio(torch.linalg.eigvalsh(total.cyy)) if total.full_output else math.nan,
        effective_rank_map=effective_rank_map,
        input_condition=input_condition,
        input_rms=inputs["input_rms"],
        effective_rank_in=inputs["effective_rank_in"],
        outlier_ratio=inputs["outlier_ratio"],
        null_dims=null_dims,
        n_train=total.n - n_test,
        n_test=n_test,
        d_in=total.d_in,
        d_out=total.d_out,
        r2_lin_folds=tuple(r2s),
        r2_lin_half_rows=float("nan") if half is None else float(np.mean(half)),
    )


def _later_columns(
    later: list[Moments], tails: Tails | None, rcond: float, solver: Solver = "cholesky"
) -> dict[str, Any]:
    """The columns of a block's report that need only the later rows' moments (:func:`_positions_report`): R²_lin
    with the first captured position of each window left out of fit and test (mean, std and each fold's; NaN and ()
    when the later rows are too few for the width), and the share of their output variance the largest of them carry
    (NaN where ``tails`` are unknown). ``solver``: as :func:`fit_affine`'s."""
    r2 = None if any(m.n == 0 for m in later) else held_out_r2(later, leave_one_out(len(later)), rcond, solver=solver)
    return {
        "r2_lin_after_first": math.nan if r2 is None else float(np.mean(r2)),
        "r2_lin_after_first_std": math.nan if r2 is None else float(np.std(r2, ddof=1)),
        "r2_lin_after_first_folds": () if r2 is None else tuple(r2),
        "top_rows_share_after_first": math.nan if tails is None else top_share(tails.later.top_ss, merge_folds(later)),
    }


def _positions_report(
    block: int,
    split: PositionMoments,
    rcond: float,
    consume: bool,
    device: torch.device | None,
    solver: Solver = "cholesky",
) -> BlockReport:
    """:func:`kfold` of every row of ``block`` with what its first captured position does: that position's share of
    the output variance, :func:`_later_columns`, and the share of the largest rows (where ``split`` has them,
    :mod:`linrec.core.tails`). It holds as few d x d matrices at once as the arithmetic allows: the later rows'
    columns first, then each fold's first and later rows merged as the first rows' moments are made
    (:meth:`PositionMoments.first_folds`), with ``consume`` each later fold let go once merged; the numbers are
    those of merging every fold at once, bit for bit (the same sums in the same order). ``solver``: as
    :func:`fit_affine`'s."""
    later = [_on(m, device) for m in (cast(dict, split.later).pop(block) if consume else split.later[block])]
    tails = split.tails.get(block)
    apart = _later_columns(later, tails, rcond, solver)
    merged: list[Moments] = []
    first: Moments | None = None
    for part in (_on(m, device) for m in split.first_folds(block)):
        merged.append(part + (later.pop(0) if consume else later[len(merged)]))
        first = part if first is None else first + part
    del later
    assert first is not None
    report = kfold(block, merged, rcond, solver=solver)
    total = merge_folds(merged)
    return replace(
        report,
        first_position_share=variance_share(first, total),
        top_rows_share=math.nan if tails is None else top_share(tails.every.top_ss, total),
        **apart,
    )


def top_share(top_ss: float, total: Moments) -> float:
    """The share of ``total``'s output sum of squares about its mean that ``top_ss`` is (NaN for no variance)."""
    ss = float(total.output_ss.sum())
    return top_ss / ss if ss > 0 else math.nan


def _on(m: Moments, device: torch.device | None) -> Moments:
    return m if device is None or m.cxx.device == device else m.to(device)


def recoverability(
    moments: Mapping[int, list[Moments]] | PositionMoments,
    rcond: float = DEFAULT_RCOND,
    *,
    consume: bool = False,
    device: torch.device | str | None = None,
    progress: bool = False,
) -> list[BlockReport]:
    """One :class:`BlockReport` per block, in block order; from :class:`PositionMoments` (the first captured
    position of each window kept apart) with what that position does (:func:`_positions_report`) for each block whose
    first position was kept apart. ``consume``: take each block's later moments out of ``moments`` (a dict) as its
    report is made, so that a caller who needs only the table holds one block's work beside them, not two.
    ``device``: where each block's fits run, its moments moved there as it is reached (a GPU's float64 solvers
    for a wide model; the same arithmetic to rounding, not bit for bit, as another device's). ``progress``: a bar
    over the blocks (a width-4,096 block's fits, one eigendecomposition and 15 Cholesky solves, take about 67 s on two
    CPU cores; 140 s with an eigendecomposition each)."""
    device = None if device is None else torch.device(device)
    blocks = progress_bar(sorted(moments.later if isinstance(moments, PositionMoments) else moments), desc="fit",
                          unit="block", disable=not progress)  # fmt: skip
    if not isinstance(moments, PositionMoments):
        return [kfold(block, [_on(m, device) for m in moments[block]], rcond) for block in blocks]
    if consume and not isinstance(moments.later, dict):
        raise LinrecError("consume=True takes the moments out of a dict; these are read from elsewhere")
    reports = (
        _positions_report(block, moments, rcond, consume, device)
        if block in moments.first
        else kfold(
            block,
            [_on(m, device) for m in (cast(dict, moments.later).pop(block) if consume else moments.merged(block))],
            rcond,
        )
        for block in blocks
    )
    return [replace(r, scores=score_columns(moments.scores.get(r.block), r.r2_lin)) for r in reports]


def report_table(reports: list[BlockReport]) -> pd.DataFrame:
    """The tidy table: one row per block (columns as in :meth:`BlockReport.row`)."""
    return pd.DataFrame([r.row() for r in reports])
