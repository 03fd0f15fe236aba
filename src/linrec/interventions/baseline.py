"""Trained linear baselines: ``nn.Linear`` maps fitted by SGD or Adam, scored against the closed-form ceiling.

An ``nn.Linear`` starts from PyTorch's usual initialisation (seeded) and is trained on a
block's sampled training rows (all folds but the test fold) to minimise the mean squared error
over rows and outputs. Every ``log_every`` steps its held-out R² on the test fold's rows is
logged with the cumulative wall time of the training steps (evaluation not counted). The
ceiling is the closed-form map (``recover.fit_affine`` on the training moments) scored on the
same test rows; a run "reaches" it at the first logged step within ``tolerance`` (0.01).

* SGD: momentum β = 0.9 and by default lr = (1 - β) / L, with L = 2 λ_max(E[x̃x̃ᵀ]) / d_out the
  largest curvature of the loss (x̃ = (x, 1)): an effective step lr / (1 - β) of 1/L, the
  classical safe step for an L-smooth loss and, for that loss, as large as the stiffest
  direction allows (minibatches stay stable). A lag therefore comes from the conditioning:
  a direction of curvature λ converges at a rate λ / L per step.
* Adam: the usual lr 1e-3.
* Both decay their learning rate to 0 over the budget on a cosine (``schedule="cosine"``, the
  usual practice; ``"constant"`` keeps it): with a constant step, minibatch noise leaves a floor
  under the error of a noisy target that would hide the effect of conditioning.
* ``whiten=True``: the same optimisers on inputs whitened with the training covariance
  (``crossfeed.input_transform(kind="whiten")``: centred, identity covariance on the non-null
  directions). The closed-form ceiling is the same map in other coordinates, so whatever gap
  closes is the conditioning's doing.

A loss that becomes NaN or Inf stops the run, marked ``diverged``. :func:`baseline_config` takes
a profile's step budget and Adam learning rate; :func:`baseline_runs` takes a
:class:`~linrec.core.sample.RowSample` or a mapping block -> Rows (``Measurement.samples``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from linrec.core.fit import DEFAULT_RCOND, fit_affine
from linrec.core.moments import BlockMoments, Moments
from linrec.core.normalise import input_transform
from linrec.core.sample import Rows, Samples, minibatches, sample_rows, train_moments
from linrec.errors import LinrecError
from linrec.stats import r2

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("cosine", "constant")
NOT_WITHIN_BUDGET = "not within budget"


@dataclass(frozen=True)
class BaselineConfig:
    """Optimiser settings: ``lr_sgd=None`` takes (1 - momentum) / L (see the module docstring)."""

    steps: int = 2000
    lr_sgd: float | None = None
    momentum: float = 0.9
    lr_adam: float = 1e-3
    schedule: str = "cosine"
    batch_size: int = 256
    log_every: int = 25
    tolerance: float = 0.01
    seed: int = 0


@dataclass
class BaselineRun:
    """One optimiser on one block: the learning curve and when (if) it came near the ceiling."""

    block: int
    optimizer: str
    whitened: bool
    ceiling: float  # closed-form R² on the test rows
    log: pd.DataFrame  # step, seconds, r2
    steps_to_ceiling: int | None
    seconds_to_ceiling: float | None
    diverged: bool

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


def train_linear(
    rows: Rows,
    folds: list[Moments] | None = None,
    test_fold: int = 0,
    optimizer: str = "adam",
    whiten: bool = False,
    config: BaselineConfig = BaselineConfig(),
    block: int = 0,
    rcond: float = DEFAULT_RCOND,
) -> BaselineRun:
    """Train ``nn.Linear`` on the training rows with ``optimizer``; log held-out R² against steps and time.

    ``folds``: the block's captured per-fold moments, for the ceiling and the whitening (else the
    sampled training rows' own moments).
    """
    if optimizer not in OPTIMIZERS:
        raise LinrecError(f"unknown optimizer '{optimizer}'; choose one of {', '.join(OPTIMIZERS)}")
    if config.schedule not in SCHEDULES:
        raise LinrecError(f"unknown schedule '{config.schedule}'; choose one of {', '.join(SCHEDULES)}")
    train, test = rows.split(test_fold)
    moments = train_moments(train, folds, test_fold)
    ceiling = r2(test.y, fit_affine(moments, rcond)(test.x))
    x_train, x_test = train.x, test.x
    if whiten:
        transform = input_transform(moments, "whiten", variance=1.0, keep_mean=False, rcond=rcond)
        x_train, x_test = transform(train.x).float(), transform(test.x).float()
        moments = Moments.from_rows(x_train, train.y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = nn.Linear(rows.x.shape[1], rows.y.shape[1])
    if optimizer == "sgd":
        lr = config.lr_sgd if config.lr_sgd is not None else (1 - config.momentum) / largest_curvature(moments)
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=config.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=config.lr_adam)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, config.steps) if config.schedule == "cosine" else None

    def score() -> float:
        with torch.no_grad():
            return r2(test.y, model(x_test))

    log = [{"step": 0, "seconds": 0.0, "r2": score()}]
    seconds, diverged = 0.0, False
    for step, idx in zip(
        range(1, config.steps + 1), minibatches(len(train), config.batch_size, config.seed + 1), strict=False
    ):
        start = time.perf_counter()
        loss = F.mse_loss(model(x_train[idx]), train.y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        seconds += time.perf_counter() - start
        if not torch.isfinite(loss):
            diverged = True
            break
        if step % config.log_every == 0 or step == config.steps:
            log.append({"step": step, "seconds": seconds, "r2": score()})
    frame = pd.DataFrame(log)
    near = frame[frame.r2 >= ceiling - config.tolerance]
    first = near.iloc[0] if len(near) else None
    return BaselineRun(
        block,
        optimizer,
        whiten,
        ceiling,
        frame,
        None if first is None else int(first.step),
        None if first is None else float(first.seconds),
        diverged,
    )


def baseline_runs(
    sample: Samples,
    moments: BlockMoments | None = None,
    blocks: Sequence[int] | None = None,
    optimizers: Sequence[str] = OPTIMIZERS,
    whiten: Sequence[bool] = (False, True),
    test_fold: int = 0,
    config: BaselineConfig = BaselineConfig(),
    rcond: float = DEFAULT_RCOND,
    progress: bool = True,
) -> list[BaselineRun]:
    """Every (block, optimizer, whitened) combination, on the sampled rows."""
    rows = sample_rows(sample, blocks)
    combos = [(b, o, w) for b in rows for o in optimizers for w in whiten]
    return [
        train_linear(rows[b], None if moments is None else moments[b], test_fold, o, w, config, b, rcond)
        for b, o, w in tqdm(combos, desc="baselines", disable=not progress)
    ]


def summary(runs: Sequence[BaselineRun]) -> pd.DataFrame:
    """One row per run: ``block, optimizer, whitened, ceiling, r2_final, gap_final`` (ceiling - final R²),
    ``steps_to_ceiling, seconds_to_ceiling`` (None when not reached) and ``status``."""
    return pd.DataFrame(
        [
            {
                "block": run.block,
                "optimizer": run.optimizer,
                "whitened": run.whitened,
                "ceiling": run.ceiling,
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
    """All learning curves in one long table: ``block, optimizer, whitened, step, seconds, r2, gap``."""
    return pd.concat(
        [
            run.log.assign(
                block=run.block, optimizer=run.optimizer, whitened=run.whitened, gap=run.ceiling - run.log.r2
            )
            for run in runs
        ],
        ignore_index=True,
    )
