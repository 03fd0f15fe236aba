"""Bilinear probes of what the closed-form map leaves over, and correlations with confidence intervals.

Parametrisation (both probes; one module, :class:`PolyProbe`)::

    ŷ = μ_y + s · [ x̃ A + a + g ⊙ P̂ ((Û x̃) ⊙ (V̂ x̃)) ]

* x̃ = (x - μ_x) / σ_x: inputs standardised with the training rows' per-dimension mean and std
  (a constant dimension keeps σ = 1);
* s: the RMS of the training outputs about their mean μ_y (one scalar, so the loss, a mean
  squared error in these units, is the plain MSE up to a constant and R² is unchanged);
* A, a: the linear part in these units; they start at the closed-form map
  ŷ = x W + b of :func:`linrec.core.fit.fit_affine` on the training split, A = diag(σ_x) W / s and
  a = (μ_x W + b - μ_y) / s, so at initialisation the linear part *is* the closed form;
* Û, V̂ ∈ R^{r×d_in}: U and V with each row scaled to unit norm (directions only);
* P̂ = √d_out · P / ‖P‖_F with P ∈ R^{d_out×r} (a fixed overall size: the mean squared entry
  of a row of P̂ is 1/r);
* g: the gate, a plain learned parameter, one scalar (``gate="scalar"``) or one per output
  (``gate="output"``). Because Û, V̂ and P̂ carry no scale, g alone sets the size of the
  bilinear term: with unit-variance products, its RMS is about |g| output RMS units. g can
  reach 0 exactly (the term is "de-recruited") and its sign is immaterial (P̂ → -P̂), so
  |g| is what is reported.

The rank-r term, g ⊙ P̂((Ûx̃) ⊙ (V̂x̃)), spans exactly the degree-2 maps P((Ux) ⊙ (Vx)) of
rank r, composed with the standardisation (its linear and constant parts land in A and a).

* :func:`bilinear_probe` (the paper's "poly" probe of the residual): A stays frozen at the
  closed form; the bilinear term, the gate (then just the term's scale) and the offset a
  are fitted, so the term models the residual y - (xW + b); a absorbs the mean the
  products bring with them.
* :func:`seeded_poly`: A, a, U, V, P and g are all trained jointly, A and a from the closed
  form (at a smaller learning rate, ``lr_linear``), g from ``gate_init``.

Both train with Adam (on ``ProbeConfig.device``: a GPU where the profile has one) on minibatches
of the training split's rows (all folds but the test fold), minus a seeded random ``val_fraction``
of them used for early stopping (validation loss every ``eval_every`` steps from step 0; stop
after ``patience`` checks without improvement; the best state is kept). Scores are on the test
fold's rows. R²_lin for the gain is the closed-form map scored on the same test rows.

:func:`bilinear_probes` repeats the bilinear probe over probe seeds and combines their captured shares.
:func:`probe_table` runs both probes on every block of a :class:`~linrec.core.sample.RowSample` or of
a mapping block -> Rows (``Measurement.samples``); :func:`probe_config` takes a profile's rank
and step budget.

:func:`correlation` gives Pearson's or Spearman's r with a Fisher-z confidence interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import pandas as pd
import torch
from torch import nn

from linrec.core.fit import DEFAULT_RCOND, AffineFit
from linrec.core.moments import Moments
from linrec.core.sample import Rows, Samples, closed_form, minibatches, sample_rows
from linrec.errors import LinrecError, finite
from linrec.progress import progress_bar
from linrec.stats import Correlation, Share, captured_share, correlation, r2

GATES = ("scalar", "output")
_VECTORS = frozenset({"mean_x", "std_x", "mean_y", "scale", "offset", "gate"})
"""A lone probe's one-dimensional tensors (a stacked probe holds them as (probes, 1, width))."""


class PolyProbe(nn.Module):
    """The closed-form map plus a gated rank-r bilinear term (see the module docstring)."""

    # Buffers, registered in __init__.
    mean_x: torch.Tensor
    std_x: torch.Tensor
    mean_y: torch.Tensor
    scale: torch.Tensor

    def __init__(self, fit: AffineFit, train: Rows, rank: int, gate: str, gate_init: float, seed: int) -> None:
        super().__init__()
        if gate not in GATES:
            raise LinrecError(f"unknown gate '{gate}'; choose one of {', '.join(GATES)}")
        if rank < 1:
            raise LinrecError(f"rank must be at least 1; got {rank}")
        x, y = train.x.to(torch.float64), train.y.to(torch.float64)
        mean_x, mean_y = x.mean(0), y.mean(0)
        std_x = x.std(0)
        std_x = torch.where(std_x > 0, std_x, torch.ones_like(std_x))
        scale = ((y - mean_y) ** 2).sum(1).mean().div(y.shape[1]).sqrt()
        if scale <= 0:
            raise LinrecError("the training outputs have no variance; nothing to probe")
        w, b = fit.weight.cpu(), fit.bias.cpu()
        f32 = lambda t: t.to(torch.float32).contiguous()  # noqa: E731
        self.register_buffer("mean_x", f32(mean_x))
        self.register_buffer("std_x", f32(std_x))
        self.register_buffer("mean_y", f32(mean_y))
        self.register_buffer("scale", f32(scale.reshape(1)))
        self.linear = nn.Parameter(f32(std_x[:, None] * w / scale))
        self.offset = nn.Parameter(f32((mean_x @ w + b - mean_y) / scale))
        g = torch.Generator().manual_seed(seed)
        d_in, d_out = w.shape
        self.u = nn.Parameter(torch.randn(rank, d_in, generator=g))
        self.v = nn.Parameter(torch.randn(rank, d_in, generator=g))
        self.p = nn.Parameter(torch.randn(d_out, rank, generator=g))
        self.gate = nn.Parameter(torch.full((1,) if gate == "scalar" else (d_out,), float(gate_init)))

    @classmethod
    def stacked(cls, probes: Sequence[PolyProbe]) -> PolyProbe:
        """One probe whose tensors hold ``probes``' (alike in shape) along a new leading dimension, so that one
        optimiser step trains them all: every operation of the probe acts on the last two dimensions, and each
        slice's arithmetic is the lone probe's (:func:`train_probes`). Copies; :meth:`unstacked` reads one back."""
        if len({tuple(p.u.shape) + tuple(p.p.shape) + tuple(p.gate.shape) for p in probes}) != 1:
            raise LinrecError("probes trained together must share their widths, rank and gate")
        stack = cls.__new__(cls)
        nn.Module.__init__(stack)
        for name, tensor in (*probes[0].named_buffers(), *probes[0].named_parameters()):
            joined = torch.stack([getattr(p, name).detach() for p in probes])
            joined = joined.unsqueeze(1) if name in _VECTORS else joined  # (B, 1, width): broadcasts over rows
            if isinstance(tensor, nn.Parameter):
                setattr(stack, name, nn.Parameter(joined))
            else:
                stack.register_buffer(name, joined)
        return stack

    def unstacked(self, index: int) -> dict[str, torch.Tensor]:
        """The state of probe ``index`` of a :meth:`stacked` probe, in the lone probe's shapes (copies)."""
        return {name: (t[index, 0] if name in _VECTORS else t[index]).clone() for name, t in self.state_dict().items()}

    def bilinear(self, xs: torch.Tensor) -> torch.Tensor:
        """g ⊙ P̂((Ûx̃) ⊙ (V̂x̃)) for standardised inputs ``xs``, in output RMS units."""
        u = self.u / self.u.norm(dim=-1, keepdim=True)
        v = self.v / self.v.norm(dim=-1, keepdim=True)
        p = self.p * (self.p.shape[-2] ** 0.5 / self.p.norm(dim=(-2, -1), keepdim=True))
        return self.gate * (((xs @ u.mT) * (xs @ v.mT)) @ p.mT)

    def standardised(self, x: torch.Tensor) -> torch.Tensor:
        """The bracket x̃A + a + g ⊙ P̂(...): the prediction in output RMS units about μ_y."""
        return self.bracket(self.inputs(x))

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        """x̃, the standardised inputs (fixed while the probe trains, so computed once for all its rows)."""
        return (x.to(self.linear.dtype) - self.mean_x) / self.std_x

    def bracket(self, xs: torch.Tensor, linear: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`standardised` of standardised inputs ``xs``; ``linear``: their x̃A, where it is already known (A
        frozen while the probe trains: computed once for all its rows)."""
        return (xs @ self.linear if linear is None else linear) + self.offset + self.bilinear(xs)

    def target(self, y: torch.Tensor) -> torch.Tensor:
        """``y`` in the units of :meth:`standardised`."""
        return (y.to(self.linear.dtype) - self.mean_y) / self.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.mean_y + self.scale * self.standardised(x)).to(x.dtype)

    @property
    def gate_value(self) -> float:
        """|g| (the mean |g_j| over outputs for a per-output gate)."""
        return float(self.gate.detach().abs().mean())


@dataclass(frozen=True)
class ProbeConfig:
    """Training settings; the defaults take seconds per block at d = 128 on one CPU core."""

    rank: int = 16
    gate: str = "scalar"
    gate_init: float = 0.1
    steps: int = 3000
    lr: float = 1e-2
    lr_linear: float = 1e-4
    batch_size: int = 512
    val_fraction: float = 0.1
    eval_every: int = 25
    patience: int = 8
    seed: int = 0
    device: str | None = None  # where the probe trains (None: where the rows are, the CPU for sampled rows)

    def __post_init__(self) -> None:  # a NaN rate or fraction would train nothing, or on nothing, without a word
        finite("ProbeConfig.gate_init", self.gate_init)
        finite("ProbeConfig.lr", self.lr, low=0, low_open=True)
        finite("ProbeConfig.lr_linear", self.lr_linear, low=0)
        finite("ProbeConfig.val_fraction", self.val_fraction, low=0, low_open=True, high=1)


@dataclass
class ProbeResult:
    """One probe on one block: held-out R² of the probe and of the closed form on the same rows."""

    block: int
    r2_lin: float
    r2_poly: float
    gate: float
    steps: int  # optimiser steps taken
    best_step: int  # step of the kept (best validation) state
    n_train: int
    n_val: int
    n_test: int
    probe: PolyProbe
    captured: Share  # of the closed form's squared error on the test rows, with a bootstrap interval
    best_at_budget: bool  # still improving when the step budget ran out (the kept state is the last one checked)

    @property
    def gain(self) -> float:
        return self.r2_poly - self.r2_lin


def train_probe(probe: PolyProbe, train: Rows, val: Rows, config: ProbeConfig, train_linear: bool) -> tuple[int, int]:
    """Adam on ``train`` with early stopping on ``val``, on ``config.device``; leaves ``probe`` at its best state,
    back on the device it came from. (steps, best step)"""
    return train_probes([probe], [train], [val], config, train_linear)[0]


def train_probes(
    probes: Sequence[PolyProbe], trains: Sequence[Rows], vals: Sequence[Rows], config: ProbeConfig, train_linear: bool
) -> list[tuple[int, int]]:
    """:func:`train_probe` of several probes at once (each on its own rows, all of one length, so that they draw the
    same minibatch indices): their tensors are stacked (:meth:`PolyProbe.stacked`) and one optimiser step trains
    them all, which costs about what one probe's step costs when the probes are small. Each probe's arithmetic is
    the lone probe's, number for number; each stops early on its own validation rows (it trains on in the stack,
    but its best state is what it keeps). (steps, best step) per probe."""
    if len({len(t) for t in trains}) != 1 or not len(probes) == len(trains) == len(vals):
        raise LinrecError("probes trained together need one set of training and validation rows each, of one length")
    home = probes[0].mean_x.device
    device = torch.device(config.device) if config.device is not None else trains[0].x.device
    stack = PolyProbe.stacked(probes).to(device)
    with torch.no_grad():  # every row's standardised inputs and targets, (probes, rows, width), and x̃A if A is frozen
        x, val_x = (stack.inputs(torch.stack([r.x for r in rows]).to(device)) for rows in (trains, vals))
        y, val_y = (stack.target(torch.stack([r.y for r in rows]).to(device)) for rows in (trains, vals))
        fixed, val_fixed = (None, None) if train_linear else (x @ stack.linear, val_x @ stack.linear)
    stack.linear.requires_grad_(train_linear)
    bilinear = [stack.u, stack.v, stack.p, stack.gate]
    offset_lr = config.lr_linear if train_linear else config.lr
    groups = [{"params": bilinear, "lr": config.lr}, {"params": [stack.offset], "lr": offset_lr}]
    if train_linear:
        groups.append({"params": [stack.linear], "lr": config.lr_linear})
    opt = torch.optim.Adam(groups)

    def squared(rows: torch.Tensor | None) -> torch.Tensor:  # of the validation rows, or of the rows ``rows``
        if rows is None:
            return (stack.bracket(val_x, val_fixed) - val_y) ** 2
        linear = None if fixed is None else fixed.index_select(1, rows)
        return (stack.bracket(x.index_select(1, rows), linear) - y.index_select(1, rows)) ** 2

    def val_losses() -> list[float]:
        with torch.no_grad():
            return [float(e.mean()) for e in squared(None)]

    n = len(probes)
    best, best_step, since = val_losses(), [0] * n, [0] * n
    best_state = [stack.unstacked(i) for i in range(n)]
    stopped = [0] * n  # the step a probe stopped at (0: still training)
    step = 0
    batches = minibatches(len(trains[0]), config.batch_size, config.seed + 1, device)
    for step, idx in zip(range(1, config.steps + 1), batches, strict=False):  # the host reads nothing until an eval
        loss = squared(idx).mean(dim=(-2, -1)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % config.eval_every == 0:
            for i, current in enumerate(val_losses()):
                if stopped[i]:
                    continue
                if current < best[i]:
                    best[i], best_step[i], best_state[i], since[i] = current, step, stack.unstacked(i), 0
                else:
                    since[i] += 1
                    stopped[i] = step if since[i] >= config.patience else 0
            if all(stopped):
                break
    for probe, state in zip(probes, best_state, strict=True):
        probe.load_state_dict(state)
        probe.requires_grad_(False)
        probe.to(home)
    return [(stopped[i] or step, best_step[i]) for i in range(n)]


class _Part(NamedTuple):
    """One block's probe and rows (:func:`_probes`)."""

    test: Rows
    fit: AffineFit
    fit_rows: Rows
    val: Rows
    probe: PolyProbe


def _probes(
    rows: Mapping[int, Rows],
    folds: Mapping[int, list[Moments]] | None,
    test_fold: int,
    config: ProbeConfig,
    train_linear: bool,
    rcond: float,
    sequence_rows: int = 1,
) -> dict[int, ProbeResult]:
    """One probe per block of ``rows``, the blocks whose fitting rows are alike in number trained together
    (:func:`train_probes`: each result is the one the block's probe gets alone)."""
    if sequence_rows < 1:
        raise LinrecError(f"sequence_rows must be at least 1; got {sequence_rows}")
    parts = {}
    for block, block_rows in rows.items():
        train, test = block_rows.split(test_fold)
        fit = closed_form(train, None if folds is None else folds[block], test_fold, rcond)
        fit_rows, val = train.holdout(config.val_fraction, config.seed)
        probe = PolyProbe(fit, fit_rows, config.rank, config.gate, config.gate_init, config.seed)
        parts[block] = _Part(test, fit, fit_rows, val, probe)
    trained: dict[int, tuple[int, int]] = {}
    for n in dict.fromkeys(len(part.fit_rows) for part in parts.values()):
        alike = {b: part for b, part in parts.items() if len(part.fit_rows) == n}
        done = train_probes([p.probe for p in alike.values()], [p.fit_rows for p in alike.values()],
                            [p.val for p in alike.values()], config, train_linear)  # fmt: skip
        trained |= dict(zip(alike, done, strict=True))
    out = {}
    for block, (test, fit, fit_rows, val, probe) in parts.items():
        steps, best_step = trained[block]
        with torch.no_grad():
            predicted = probe(test.x)
        y = test.y.to(torch.float64)
        before, after = [((y - p.to(torch.float64)) ** 2).sum(1) for p in (fit(test.x), predicted)]
        out[block] = ProbeResult(
            block,
            r2(test.y, fit(test.x)),
            r2(test.y, predicted),
            probe.gate_value,
            steps,
            best_step,
            len(fit_rows),
            len(val),
            len(test),
            probe,
            captured_share(before, after, seed=config.seed, clusters=torch.arange(len(test)) // sequence_rows),
            steps == config.steps and best_step + config.eval_every > config.steps,
        )
    return out


def _probe(
    block: int,
    rows: Rows,
    folds: list[Moments] | None,
    test_fold: int,
    config: ProbeConfig,
    train_linear: bool,
    rcond: float,
    sequence_rows: int = 1,
) -> ProbeResult:
    return _probes({block: rows}, None if folds is None else {block: folds}, test_fold, config, train_linear, rcond,
                   sequence_rows)[block]  # fmt: skip


def bilinear_probe(
    rows: Rows,
    folds: list[Moments] | None = None,
    test_fold: int = 0,
    config: ProbeConfig = ProbeConfig(),
    block: int = 0,
    rcond: float = DEFAULT_RCOND,
    sequence_rows: int = 1,
) -> ProbeResult:
    """The rank-r bilinear probe of the closed-form residual (linear part frozen).

    ``folds``: the block's captured per-fold moments for the closed form (else the sampled
    training rows' own); see :func:`linrec.core.sample.closed_form`. ``sequence_rows``: how many consecutive
    rows (in stream order, where each sequence's rows are contiguous) make one sequence; the captured share's
    bootstrap resamples runs of that many test rows (1: single rows).
    """
    return _probe(block, rows, folds, test_fold, config, False, rcond, sequence_rows)


def bilinear_probes(
    rows: Rows,
    folds: list[Moments] | None = None,
    test_fold: int = 0,
    config: ProbeConfig = ProbeConfig(),
    block: int = 0,
    rcond: float = DEFAULT_RCOND,
    sequence_rows: int = 1,
    seeds: int = 2,
) -> tuple[list[ProbeResult], Share]:
    """:func:`bilinear_probe` with ``seeds`` probe seeds (``config.seed``, ``config.seed + 1``, ...), and their
    captured shares combined: the mean share, with the interval from the lowest seed's low end to the highest
    seed's high end. The envelope covers both the test sequences (each seed's sequence bootstrap) and the probe's
    own seed (its initialisation, minibatches and validation rows): two seeds' intervals need not overlap."""
    results = [
        bilinear_probe(rows, folds, test_fold, replace(config, seed=config.seed + i), block, rcond, sequence_rows)
        for i in _seeds(seeds)
    ]
    return results, _combined(results)


def _seeds(seeds: int) -> range:
    if seeds < 1:
        raise LinrecError(f"seeds must be at least 1; got {seeds}")
    return range(seeds)


def _combined(results: Sequence[ProbeResult]) -> Share:
    """The captured shares of one block's seeds combined (:func:`bilinear_probes`)."""
    seeds = len(results)
    shares = [r.captured for r in results]
    value = sum(s.value for s in shares) / seeds
    return Share(value, min(s.low for s in shares), max(s.high for s in shares), shares[0].level)


def probes_summary(results: Sequence[ProbeResult], share: Share) -> dict[str, float | int | bool]:
    """What a table row says of one residual probed with several seeds (:func:`bilinear_probes`): ``r2_lin``,
    ``gain`` (mean over seeds), ``captured, captured_low, captured_high`` (the combined share), ``steps`` (most
    taken) and ``at_budget`` (whether any seed was still improving when the budget ran out)."""
    return {
        "r2_lin": results[0].r2_lin,
        "gain": sum(r.gain for r in results) / len(results),
        "captured": share.value,
        "captured_low": share.low,
        "captured_high": share.high,
        "steps": max(r.steps for r in results),
        "at_budget": any(r.best_at_budget for r in results),
    }


def seeded_poly(
    rows: Rows,
    folds: list[Moments] | None = None,
    test_fold: int = 0,
    config: ProbeConfig = ProbeConfig(),
    block: int = 0,
    rcond: float = DEFAULT_RCOND,
) -> ProbeResult:
    """Seeded-poly: linear part from the closed form, trained jointly with the gated bilinear term."""
    return _probe(block, rows, folds, test_fold, config, True, rcond)


def probe_table(
    sample: Samples,
    moments: Mapping[int, list[Moments]] | None = None,
    blocks: Sequence[int] | None = None,
    test_fold: int = 0,
    config: ProbeConfig = ProbeConfig(),
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
    seeded: ProbeConfig | None = None,
    seeds: int = 1,
    sequence_rows: int = 1,
) -> pd.DataFrame:
    """Per block: both probes on the sampled rows, one row each (``seeded``: seeded-poly's own settings, else
    ``config``); the bilinear probe with ``seeds`` probe seeds (:func:`bilinear_probes`).

    Columns: ``block, r2_lin`` (closed form on the test rows), ``r2_poly, gain`` (the probe, means over its
    seeds), ``captured, captured_low, captured_high`` (the share of the closed form's residual the probe
    removes, gain / (1 - R²_lin), with a 95% interval that resamples runs of ``sequence_rows`` test rows and
    spans the seeds), ``steps, at_budget`` (most steps taken; whether any seed was still improving when the
    budget ran out), ``r2_seeded, gain_seeded, gate`` (seeded-poly, one seed, and its |g| after fitting),
    ``seeded_at_budget``, ``n_train, n_val, n_test``.
    """
    rows = sample_rows(sample, blocks)
    trainings = [(replace(config, seed=config.seed + i), False) for i in _seeds(seeds)]
    trainings.append((config if seeded is None else seeded, True))
    runs = [
        _probes(rows, moments, test_fold, c, joint, rcond, 1 if joint else sequence_rows)
        for c, joint in progress_bar(trainings, desc="probes", disable=not progress)
    ]
    out = []
    for b in rows:
        plains, joint = [run[b] for run in runs[:-1]], runs[-1][b]
        plain, share = plains[0], _combined(plains)
        summary = probes_summary(plains, share)
        out.append(
            {
                "block": b,
                "r2_lin": summary["r2_lin"],
                "r2_poly": sum(p.r2_poly for p in plains) / seeds,
                **summary,
                "r2_seeded": joint.r2_poly,
                "gain_seeded": joint.gain,
                "gate": joint.gate,
                "seeded_at_budget": joint.best_at_budget,
                "n_train": plain.n_train,
                "n_val": plain.n_val,
                "n_test": plain.n_test,
            }
        )
    return pd.DataFrame(out)


def gain_correlation(table: pd.DataFrame, gain: str = "gain", level: float = 0.95) -> Correlation:
    """Pearson r across blocks between a probe's gain and the residual nonlinearity 1 - R²_lin."""
    if gain not in table.columns:
        raise LinrecError(f"no column '{gain}' in the table; columns: {', '.join(table.columns)}")
    return correlation(table[gain], 1 - table["r2_lin"], "pearson", level)
