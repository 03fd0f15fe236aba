"""What one model of a profile is measured with: the trained probes' settings, and a model's own budget (rows,
main corpus, evaluation tokens, row sample, and which blocks the costly trained steps cover) where its sizes differ
from its profile's, as a real model's do: 64 rows per input dimension of its width. Fixed before any result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from linrec.errors import LinrecError
from linrec.models.packaged import PACKAGED


@dataclass(frozen=True)
class ProbeSettings:
    """The trained probes (bilinear, seeded-poly, Adam/SGD linear baselines): rank of the bilinear term,
    rows sampled per block to train on, optimiser steps and learning rate."""

    rank: int = 16
    sample_rows: int = 8192
    steps: int = 500
    lr: float = 1e-3


@dataclass(frozen=True)
class Budget:
    """What one model of a profile is measured with, where it differs from the profile's own sizes.

    A real model is wider than the zoo and reads another text, so it gets its own rows (64 per input dimension,
    where held-out R²_lin has settled), main corpus (fit and evaluation text alike), evaluation tokens and row
    sample; ``every`` fixes, before any result, which blocks are sampled for the costly steps that train on rows
    (probes, trained baselines, normalised inputs): :meth:`sampled`. Swaps and closed-form fits cover every block.
    None keeps the profile's value (:meth:`~linrec.experiment.profiles.Profile.budget` fills them in).
    """

    rows_per_block: int | None = None
    corpus: str | None = None
    eval_tokens: int | None = None
    sample_rows: int | None = None
    every: int = 1

    def sampled(self, n_blocks: int) -> list[int]:
        """The blocks whose rows a measurement samples, of a model of ``n_blocks``: every ``every``-th from the
        first, and the last, a rule fixed by depth alone so that no result can steer it."""
        if self.every < 1 or n_blocks < 1:
            raise LinrecError(f"every and n_blocks must be positive; got every={self.every}, n_blocks={n_blocks}")
        return sorted({*range(0, n_blocks, self.every), n_blocks - 1})


SERIES_SAMPLE = Budget(sample_rows=1024, every=10**6)
"""The row sample of a model measured only for the scale chapter (the scale profile's, a profile's series):
1,024 rows of its first and last block (:meth:`Budget.sampled`), the chapter training no probe."""


def series_sampled(budget: Budget) -> Budget:
    """``budget`` with the row sample of :data:`SERIES_SAMPLE`: 1,024 rows of the first and last block only."""
    return dataclasses.replace(budget, sample_rows=SERIES_SAMPLE.sample_rows, every=SERIES_SAMPLE.every)


ROWS_PER_DIMENSION = 64
"""Rows per block per input dimension a model is measured with when nothing else says (the real models' budgets,
``linrec measure`` and ``linrec replace`` without --max-rows): where held-out R²_lin has settled. On SmolLM2-135M,
against one fixed held-out set, the median over its blocks is 0.04 below its converged value at 14 rows per
dimension and 0.005 below at 64, and moves by at most 0.003 beyond about 90."""


def rows_to_ask(width: int, given: int | None = None) -> tuple[int, bool]:
    """The rows per block to cut from a text for a ``width``-wide model: ``given`` (--max-rows, or a profile's budget),
    else :data:`ROWS_PER_DIMENSION` per input dimension; and whether that default is what is asked, of which a shorter
    text may give fewer (``make_batches(..., at_most=True)``, with a warning)."""
    return (given, False) if given else (ROWS_PER_DIMENSION * width, True)


def real_budget(model: str, every: int) -> Budget:
    """A packaged real model's budget in the offline profile: English prose (the King James Bible), 64 rows per
    input dimension, 8,192 of them sampled for the probes, 8,192 evaluation tokens (a pass costs about as much
    as the whole zoo's: the swaps of every block score a quarter of them each), and its costly trained steps on
    every ``every``-th block."""
    rows = ROWS_PER_DIMENSION * PACKAGED[model].width
    return Budget(rows_per_block=rows, corpus="kjv-bible", eval_tokens=8192, sample_rows=8192, every=every)


def scale_budget(model: str) -> Budget:
    """A real model's budget in the scale profile: 64 rows per input dimension, its row sample only of the first
    and last block (no chapter of the profile trains probes), 8,192 evaluation tokens."""
    rows = ROWS_PER_DIMENSION * PACKAGED[model].width
    return dataclasses.replace(SERIES_SAMPLE, rows_per_block=rows, eval_tokens=8192)
