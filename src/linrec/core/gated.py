"""Gated replacement: each row goes through the block's affine map or through its own FFN, as a gate decides.

A block that one affine map cannot carry may still be linear on most of its rows: a few rows (the attention sink,
the first delimiters, other rows of huge activations) hold most of its nonlinearity. A gate scores every row of the
FFN's input; rows scoring at most a threshold go through the affine map, fitted in closed form on exactly those rows
(:mod:`linrec.core.routed`), and the others through the block's own FFN. The threshold is set so that a chosen share
of the fit rows goes to the map. Gates, each a score per row where a higher score means "keep the FFN":

* :class:`NormGate` (rule ``norm``): the row's Euclidean norm, so the rows of the largest FFN input go to the FFN;
  nothing to train, no number stored.
* :class:`LogisticGate` (rule ``logistic``): a logistic classifier of d + 1 numbers trained on the fit rows to tell
  the rows the all-rows affine map gets most wrong (:func:`fit_logistic_gate`), the gate of arXiv 2603.03459; its
  score is the classifier's logit.

The first position (rule ``first``) is :class:`linrec.core.replacements.FirstApartFFN` with the block's own output
there (``first-apart:own``): it routes by position, not by a score.

A gated block saves FFN compute only where a kernel skips the routed rows: :class:`GatedFFN` runs the FFN on the
gathered rows that need it, which on a CPU in eager mode is less work, while a fused GPU kernel may run the whole
FFN anyway; measured decoding speed is what says (:mod:`linrec.interventions.latency`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from linrec.core.kinds import GATE_RULES
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle


class NormGate(nn.Module):
    """A row's score is its Euclidean norm, in float32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(x.to(torch.float32), dim=-1)


class LogisticGate(nn.Module):
    """A row's score is the logit x·w + b of a logistic classifier (d + 1 numbers), in float32."""

    weight: torch.Tensor
    bias: torch.Tensor

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight", weight.detach().to(torch.float32).clone())
        self.register_buffer("bias", bias.detach().to(torch.float32).reshape(()).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32) @ self.weight + self.bias


def gate_of(rule: str, d_in: int) -> nn.Module:
    """An empty gate of ``rule`` for inputs of width ``d_in`` (what a saved ``state_dict`` is loaded into)."""
    if rule == "norm":
        return NormGate()
    if rule == "logistic":
        return LogisticGate(torch.zeros(d_in), torch.zeros(()))
    raise LinrecError(f"unknown gate '{rule}'; choose one of {', '.join(GATE_RULES)}")


def fit_logistic(
    x: torch.Tensor, target: torch.Tensor, c: float = 1.0, tol: float = 1e-10, max_iter: int = 100
) -> tuple[torch.Tensor, torch.Tensor]:
    """(w, b) minimising ½‖w‖² + c Σᵢ log(1 + exp(-sᵢ (xᵢ·w + b))), sᵢ = ±1 from ``target`` (bool), b unpenalised:
    scikit-learn's ``LogisticRegression(C=c)`` objective, solved by Newton's method in float64 (the objective is
    strictly convex, so the minimum is unique and the iteration converges to it quadratically)."""
    if x.shape[0] != target.shape[0] or x.shape[0] == 0:
        raise LinrecError(f"a logistic gate needs rows and one target per row; got {x.shape[0]} and {target.shape[0]}")
    if bool(target.all()) or not bool(target.any()):
        raise LinrecError("a logistic gate needs rows of both classes; every row has the same target")
    z = torch.cat([x.to(torch.float64), torch.ones(x.shape[0], 1, dtype=torch.float64)], 1)
    t = target.to(torch.float64)
    ridge = torch.ones(z.shape[1], dtype=torch.float64)
    ridge[-1] = 0  # the intercept is not penalised
    theta = torch.zeros(z.shape[1], dtype=torch.float64)
    for _ in range(max_iter):
        p = torch.sigmoid(z @ theta)
        grad = c * (z.T @ (p - t)) + ridge * theta
        hess = c * (z.T * (p * (1 - p))) @ z + torch.diag(ridge)
        step = torch.linalg.solve(hess, grad)
        theta = theta - step
        if float(step.abs().max()) <= tol * (1 + float(theta.abs().max())):
            break
    else:
        raise LinrecError(f"the logistic gate did not converge in {max_iter} Newton steps")
    return theta[:-1], theta[-1]


def fit_logistic_gate(x: torch.Tensor, needs_ffn: torch.Tensor, c: float = 1.0) -> LogisticGate:
    """The logistic gate of rows ``x`` (n, d) labelled ``needs_ffn`` (bool, n): fitted on standardised inputs
    (:func:`fit_logistic`; a feature of no spread is left unscaled), its weights folded back to raw inputs."""
    x = x.to(torch.float64)
    mean, std = x.mean(0), x.std(0)
    std = torch.where(std > 0, std, torch.ones_like(std))
    w, b = fit_logistic((x - mean) / std, needs_ffn, c)
    raw = w / std
    return LogisticGate(raw, b - mean @ raw)


def threshold_for(scores: torch.Tensor, share: float) -> float:
    """The threshold that sends a ``share`` of rows of these ``scores`` to the map (score at most the threshold):
    the share's empirical quantile, -inf for none and +inf for all."""
    if not 0 <= share <= 1:
        raise LinrecError(f"the share of rows routed to the map must lie in [0, 1]; got {share}")
    if share == 0:
        return -math.inf
    if share == 1:
        return math.inf
    if not len(scores):
        raise LinrecError("no scores to read a threshold from")
    ordered = scores.to(torch.float64).sort().values
    routed = math.ceil(round(share * len(ordered), 9))  # (0.07 x 100 is 7.000000000000001 in floating point)
    return float(ordered[max(0, routed - 1)])


class GatedFFN(nn.Module):
    """ŷ = x W + b (``linear``, an :class:`linrec.core.replacements.AffineFFN`) where ``gate(x) <= threshold``, the
    block's own FFN elsewhere (given at placement, :meth:`attach`; it stays the base model's, out of this module's
    ``state_dict``). Rows all on one side skip the other path; mixed rows run the FFN on the gathered rows that
    need it."""

    threshold: torch.Tensor

    def __init__(self, linear: nn.Module, gate: nn.Module, threshold: float) -> None:
        super().__init__()
        self.linear, self.gate = linear, gate
        self.register_buffer("threshold", torch.tensor(threshold, dtype=torch.float32))
        self.__dict__["own"] = None  # the block's FFN, unregistered: its weights stay the base model's

    @property
    def borrowed(self) -> nn.Module | None:
        """The base model's FFN this replacement runs on the rows its gate keeps, or None before placement."""
        return self.__dict__["own"]

    def attach(self, model: nn.Module, original: nn.Module) -> RemovableHandle | None:
        """Put in place instead of ``original`` (the block's FFN), which runs the rows the gate keeps; nothing to
        watch in ``model``."""
        self.__dict__["own"] = original
        return None

    def routed(self, x: torch.Tensor) -> torch.Tensor:
        """Which rows of ``x`` (..., d) go to the map (bool, ...)."""
        return self.gate(x) <= self.threshold.to(x.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ffn = self.borrowed
        if ffn is None:
            raise LinrecError(
                "a gated replacement runs the block's own FFN on the rows its gate keeps: put it in a model "
                "(linrec.swapped, linrec.install), which hands it that FFN"
            )
        route = self.routed(x)
        if bool(route.all()):
            return self.linear(x)
        if not bool(route.any()):
            return ffn(x)
        flat, keep = x.reshape(-1, x.shape[-1]), route.reshape(-1)
        out = torch.empty_like(flat)
        out[keep] = self.linear(flat[keep])
        out[~keep] = ffn(flat[~keep][None])[0].to(out.dtype)
        return out.reshape(x.shape)
