"""Trained linear baselines: ``nn.Linear`` maps fitted by SGD or Adam, scored against the closed-form ceiling.

The comparison is built so that only the optimiser's handling of the inputs can make a run fall
short of the ceiling:

* **Same rows.** A block's sampled rows are split into test rows (the test fold), validation rows
  (a seeded 20 % of the rest) and fitting rows (the remainder). Every run trains on the fitting
  rows, and the **ceiling** is the closed-form map (``fit_affine``) of those same rows, scored on
  the same test rows; a run "reaches" it at the first logged step within ``tolerance`` (0.01).
* **Standardised targets** (``standardise_targets``, on by default). Runs train on
  (y - ȳ) / s, with ȳ the fitting rows' mean and s their overall RMS about it (one scalar, so the
  loss weights output dimensions exactly as R² does), and the bias starts at 0, i.e. at the mean.
  An output offset or scale then cannot be what the budget fails on; predictions are mapped back
  before scoring.
* **Tuned learning rates.** Each optimiser runs at its base rate times every factor of
  ``lr_factors``; the run with the best final validation R² is the *tuned* one, and verdicts use
  tuned runs only. Base rates: Adam's ``lr_adam``; SGD (momentum β = 0.9) (1 - β) / L with
  L = 2 λ_max(E[x̃x̃ᵀ]) / d_out the largest curvature of the loss (x̃ = (x, 1)).
* **Three input arms.** ``raw`` rows as captured; ``standardised`` (every dimension to unit
  variance) and ``whitened`` (identity covariance on the non-null directions), both with the
  fitting rows' statistics (:mod:`linrec.core.normalise`). The closed form is the same map in any
  of these coordinates, so what whitening closes was the conditioning's doing.

Runs train on ``BaselineConfig.device`` (a GPU where the profile has one). Both optimisers decay
their rate to 0 over the budget on a cosine (``schedule="cosine"``; ``"constant"`` keeps it). Every
``log_every`` steps the held-out R² on the test rows is logged with the cumulative wall time of the
training steps (evaluation not counted; on a GPU, timed after the device has finished them). A
loss that becomes NaN or Inf stops the run at the end of its logging segment, marked ``diverged``,
with no log row for that segment: the host reads the device once per segment, never per step.
:func:`baseline_config` takes a profile's step budget and Adam rate; :func:`baseline_runs` takes a
:class:`~linrec.core.sample.RowSample` or a mapping block -> Rows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from linrec.core.fit import DEFAULT_RCOND, fit_affine
from linrec.core.moments import Moments
from linrec.core.normalise import input_transform
from linrec.core.sample import Rows, Samples, minibatches, sample_rows
from linrec.errors import LinrecError, finite
from linrec.progress import progress_bar
from linrec.stats import r2

OPTIMIZERS = ("sgd", "adam")
INPUTS = ("raw", "standardised", "whitened")
SCHEDULES = ("cosine", "constant")
NOT_WITHIN_BUDGET = "not within budget"
VALIDATION = 0.2
"""Share of the training rows held out to choose the learning rate."""


@dataclass(frozen=True)
class BaselineConfig:
    """Optimiser settings: ``lr_sgd=None`` takes (1 - momentum) / L (see the module docstring); ``lr_factors``
    is the tuning grid, in multiples of each optimiser's base rate."""

    steps: int = 2000
    lr_sgd: float | None = None
    momentum: float = 0.9
    lr_adam: float = 1e-3
    lr_factors: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0, 1000.0)
    standardise_targets: bool = True
    schedule: str = "cosine"
    batch_size: int = 256
    log_every: int = 25
    tolerance: float = 0.01
    seed: int = 0
    device: str | None = None  # where the maps train (None: where the rows are, the CPU for sampled rows)

    def __post_init__(self) -> None:  # a NaN rate would train nothing (or diverge) without a word
        if self.lr_sgd is not None:
            finite("BaselineConfig.lr_sgd", self.lr_sgd, low=0, low_open=True)
        finite("BaselineConfig.momentum", self.momentum, low=0, high=1)
        finite("BaselineConfig.lr_adam", self.lr_adam, low=0, low_open=True)
        finite("BaselineConfig.tolerance", self.tolerance, low=0)
        if not self.lr_factors:
            raise LinrecError("lr_factors must name at least one multiple of the base rate")
        for factor in self.lr_factors:
            finite("BaselineConfig.lr_factors (multiples of the base rate)", factor, low=0, low_open=True)


@dataclass
class BaselineRun:
    """One optimiser at one learning rate on one block: the learning curve and when (if) it came near the ceiling."""

    block: int
    optimizer: str
    inputs: str
    lr: float
    ceiling: float  # closed-form R² of the fitting rows, on the test rows
    log: pd.DataFrame  # step, seconds, r2 (test rows)
    val_r2: float  # final R² on the validation rows (chooses the tuned run)
    steps_to_ceiling: int | None
    seconds_to_ceiling: float | None
    diverged: bool
    tuned: bool = False

    @property
    def status(self) -> str:
        """One of: reached, diverged, not within budget."""
        if self.steps_to_ceiling is not None:
            return "reached"
        return "diverged" if self.diverged else NOT_WITHIN_BUDGET


def largest_curvature(train: Moments) -> float:
    """L = 2 λ_max(E[x̃x̃ᵀ]) / d_out, x̃ = (x, 1): the largest curvature of the MSE of an affine map."""
    second = train.cxx / train.n + torch.outer(train.mean_x, train.mean_x)
    top = torch.cat([second, train.mean_x[:, None]], 1)
    bottom = torch.cat([train.mean_x, torch.ones(1, dtype=torch.float64, device=train.mean_x.device)])[None]
    lam_max = float(torch.linalg.eigvalsh(torch.cat([top, bottom], 0))[-1])
    return 2 * lam_max / train.d_out


def _check(optimizer: str, inputs: str, config: BaselineConfig) -> None:
    for value, allowed, what in (
        (optimizer, OPTIMIZERS, "optimizer"),
        (inputs, INPUTS, "inputs"),
        (config.schedule, SCHEDULES, "schedule"),
    ):
        if value not in allowed:
            raise LinrecError(f"unknown {what} '{value}'; choose one of {', '.join(allowed)}")


@dataclass
class _Split:
    """A block's rows split for one run: fitting, validation and test rows, the inputs in the arm's coordinates."""

    fit: Rows
    val: Rows
    test: Rows
    ceiling: float
    x: dict[str, torch.Tensor]  # "fit" / "val" / "test" -> inputs in the arm's coordinates (float32, on the device)
    moments: Moments  # of the fitting rows, in those coordinates


def _split(rows: Rows, test_fold: int, inputs: str, config: BaselineConfig, rcond: float) -> _Split:
    """The rows of one (block, inputs) for every run of the grid; inputs moved to ``config.device`` once."""
    train, test = rows.split(test_fold)
    fit, val = train.holdout(VALIDATION, config.seed)
    moments = Moments.from_rows(fit.x, fit.y)
    ceiling = r2(test.y, fit_affine(moments, rcond)(test.x))
    x = {"fit": fit.x, "val": val.x, "test": test.x}
    if inputs != "raw":
        kind = "whiten" if inputs == "whitened" else "standardise"
        transform = input_transform(moments, kind, variance=1.0, keep_mean=False, rcond=rcond)
        x = {k: transform(v).float() for k, v in x.items()}
        moments = Moments.from_rows(x["fit"], fit.y)
    return _Split(fit, val, test, ceiling, {k: v.to(config.device or v.device) for k, v in x.items()}, moments)


def base_lr(optimizer: str, moments: Moments, config: BaselineConfig) -> float:
    """The rate the tuning grid multiplies: ``lr_adam``, or SGD's ``lr_sgd`` / (1 - momentum) / L."""
    if optimizer == "adam":
        return config.lr_adam
    return config.lr_sgd if config.lr_sgd is not None else (1 - config.momentum) / largest_curvature(moments)


def train_linear(
    rows: Rows,
    test_fold: int = 0,
    optimizer: str = "adam",
    inputs: str = "raw",
    config: BaselineConfig = BaselineConfig(),
    block: int = 0,
    rcond: float = DEFAULT_RCOND,
    lr: float | None = None,
) -> BaselineRun:
    """Train ``nn.Linear`` on the fitting rows at learning rate ``lr`` (None: the optimiser's base rate);
    log held-out R² against steps and time (see the module docstring)."""
    _check(optimizer, inputs, config)
    return _train(_split(rows, test_fold, inputs, config, rcond), optimizer, inputs, config, block, lr)


def _train(
    split: _Split, optimizer: str, inputs: str, config: BaselineConfig, block: int, lr: float | None
) -> BaselineRun:
    lr = base_lr(optimizer, split.moments, config) if lr is None else lr
    y = split.fit.y
    if config.standardise_targets:
        mean = y.mean(0)
        rms = (y - mean).pow(2).mean().sqrt().clamp(min=torch.finfo(torch.float32).tiny)
    else:
        mean, rms = torch.zeros(y.shape[1]), torch.ones(())
    x = split.x
    device = x["fit"].device
    target = ((y - mean) / rms).to(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = nn.Linear(split.fit.x.shape[1], split.fit.y.shape[1])  # initialised on the CPU: alike everywhere
    model.to(device)
    if config.standardise_targets:
        nn.init.zeros_(model.bias)  # the training mean, in standardised units
    opt: torch.optim.Optimizer
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=config.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, config.steps) if config.schedule == "cosine" else None

    # Scored where the model is (float64 unless MPS, which lacks it): only the R² comes back to the host.
    exact = torch.float32 if device.type == "mps" else torch.float64
    truth = {part: rows.y.to(device, exact) for part, rows in (("test", split.test), ("val", split.val))}

    def score(part: str) -> float:
        with torch.no_grad():
            return r2(truth[part], model(x[part]) * rms.to(device) + mean.to(device))

    def clock() -> float:  # a GPU runs steps asynchronously: wait for them before reading the time
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    # The host reads the device once per logging segment (its time, whether any loss was NaN or Inf, the
    # test R²), never per step, so a GPU is never kept waiting by the loop.
    log = [{"step": 0, "seconds": 0.0, "r2": score("test")}]
    seconds, diverged = 0.0, False
    batches = minibatches(len(split.fit), config.batch_size, config.seed + 1, device)
    non_finite = torch.zeros((), dtype=torch.bool, device=device)
    start = clock()
    for step, idx in zip(range(1, config.steps + 1), batches, strict=False):
        loss = F.mse_loss(model(x["fit"][idx]), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        non_finite |= ~torch.isfinite(loss.detach())
        if step % config.log_every == 0 or step == config.steps:
            seconds += clock() - start
            if non_finite.item():  # the segment's runs after a non-finite loss count for nothing: no log row
                diverged = True
                break
            log.append({"step": step, "seconds": seconds, "r2": score("test")})
            start = clock()
    frame = pd.DataFrame(log)
    near = frame[frame.r2 >= split.ceiling - config.tolerance]
    first = near.iloc[0] if len(near) else None
    return BaselineRun(
        block=block,
        optimizer=optimizer,
        inputs=inputs,
        lr=lr,
        ceiling=split.ceiling,
        log=frame,
        val_r2=float("-inf") if diverged else score("val"),
        steps_to_ceiling=None if first is None else int(first.step),
        seconds_to_ceiling=None if first is None else float(first.seconds),
        diverged=diverged,
    )


def tuned_runs(
    rows: Rows,
    test_fold: int = 0,
    optimizer: str = "adam",
    inputs: str = "raw",
    config: BaselineConfig = BaselineConfig(),
    block: int = 0,
    rcond: float = DEFAULT_RCOND,
) -> list[BaselineRun]:
    """One run per factor of ``config.lr_factors``; the one with the best final validation R² is marked ``tuned``."""
    _check(optimizer, inputs, config)
    split = _split(rows, test_fold, inputs, config, rcond)
    base = base_lr(optimizer, split.moments, config)
    runs = [_train(split, optimizer, inputs, config, block, base * f) for f in config.lr_factors]
    best = max(range(len(runs)), key=lambda i: runs[i].val_r2)
    runs[best] = replace(runs[best], tuned=True)
    return runs


def baseline_runs(
    sample: Samples,
    blocks: Sequence[int] | None = None,
    optimizers: Sequence[str] = OPTIMIZERS,
    inputs: Sequence[str] = INPUTS,
    test_fold: int = 0,
    config: BaselineConfig = BaselineConfig(),
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
) -> list[BaselineRun]:
    """Every (block, optimizer, inputs) combination at every learning rate of the grid, on the sampled rows."""
    rows = sample_rows(sample, blocks)
    combos = [(b, o, i) for b in rows for o in optimizers for i in inputs]
    return [
        run
        for b, o, i in progress_bar(combos, desc="baselines", disable=not progress)
        for run in tuned_runs(rows[b], test_fold, o, i, config, b, rcond)
    ]


def summary(runs: Sequence[BaselineRun]) -> pd.DataFrame:
    """One row per run: ``block, optimizer, inputs, lr, tuned, ceiling, val_r2, r2_final, gap_final`` (ceiling -
    final test R²), ``steps_to_ceiling, seconds_to_ceiling`` (None when not reached) and ``status``."""
    return pd.DataFrame(
        [
            {
                "block": run.block,
                "optimizer": run.optimizer,
                "inputs": run.inputs,
                "lr": run.lr,
                "tuned": run.tuned,
                "ceiling": run.ceiling,
                "val_r2": run.val_r2,
                "r2_final": float(run.log.r2.iloc[-1]),
                "gap_final": run.ceiling - float(run.log.r2.iloc[-1]),
                "steps_to_ceiling": run.steps_to_ceiling,
                "seconds_to_ceiling": run.seconds_to_ceiling,
                "status": run.status,
            }
            for run in runs
        ]
    )


def curves(runs: Sequence[BaselineRun]) -> pd.DataFrame:
    """All learning curves in one long table: ``block, optimizer, inputs, lr, tuned, step, seconds, r2, gap``."""
    return pd.concat(
        [
            run.log.assign(
                block=run.block,
                optimizer=run.optimizer,
                inputs=run.inputs,
                lr=run.lr,
                tuned=run.tuned,
                gap=run.ceiling - run.log.r2,
            )
            for run in runs
        ],
        ignore_index=True,
    )
