"""The measurements the chapters will ask for, captured before they start, on every core.

Chapters share measurements through the cache (:func:`linrec.experiment.measurement.measurement`): the first
to ask for one captures it, and another that asks meanwhile waits for it. Run side by side, chapters would wait
minutes for each other's captures with a core idle. So a build first captures what the chapters it runs are
known to ask for (:func:`planned`), ``jobs`` worker processes at a time, costliest first, one line of log each,
and each model's affine swaps that chapters 2, 5 and 11 share (:func:`planned_swaps`: perplexity passes that read
its measurement), handed out right after its measurements (:func:`in_order`): chapters 5 and 11, started side by
side, would otherwise wait on each other's cache lock for them, as chapter 12 waited on chapter 11's costs in the
cold build of 2026-12-03. The chapters then read them. The plan is an optimisation, never a contract: a chapter
that asks for something else computes it itself, and nothing planned changes a result.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bookbuild.layout import BookError
from linrec.progress import heartbeat, no_library_bars

if TYPE_CHECKING:
    from linrec.experiment.profiles import Profile

EVERY_CHAPTER = "*"
SERIES_CHAPTER = "10_scale"
SWAP_CHAPTERS = ("02_heterogeneity", "05_compression", "11_pruning")
"""The chapters that read each model's affine swaps, every block on a quarter of its evaluation tokens
(:func:`linrec.experiment.swaps.affine_swaps`, cached: chapter 2's table, chapter 5's safety signal, chapter 11's
costs)."""
SWAPS = "swaps"
"""A plan's ``keep`` for a model's affine swaps (:func:`planned_swaps`), made once its measurement is."""
"""The chapter that measures a profile's scale series (:meth:`~linrec.experiment.profiles.Profile.series_profile`)
rather than its models, where the profile names one."""


@dataclass(frozen=True)
class Planned:
    """One measurement a build captures up front, and the chapters that ask for it (``*``: all of them)."""

    model: str
    checkpoint: str
    corpus: str
    keep: str
    chapters: tuple[str, ...] = (EVERY_CHAPTER,)
    not_by: tuple[str, ...] = ()  # chapters that ``*`` leaves out
    series: bool = False  # measured under the profile's series profile, not the profile itself

    def __str__(self) -> str:
        what = "the affine swaps of " if self.keep == SWAPS else ""
        return f"{what}{self.model} ({self.checkpoint}) on {self.corpus}"

    def wanted_by(self, stems: Collection[str]) -> bool:
        return any((EVERY_CHAPTER in self.chapters or s in self.chapters) and s not in self.not_by for s in stems)


def planned(profile: Profile, control_seeds: Sequence[int]) -> list[Planned]:
    """What the chapters of ``profile`` ask for at their default parameters, the costliest first:
    each model's final weights on its main text with its row sample (every chapter), its initialisation where it
    has checkpoints along training (chapters 1 and 3), its shuffled-weight controls at ``control_seeds`` (chapter
    3), its final weights on every other corpus (chapter 7) and its other training checkpoints (chapter 8). Where
    the profile has a scale series, the scale chapter asks for the series' models instead of the profile's (the
    larger ones too where CUDA is present, as the chapter does)."""
    from linrec.analysis.depth import training_checkpoints

    out: list[Planned] = []
    if profile.series:
        series = profile.series_profile()
        texts = {m: series.budget(m).corpus or series.corpora[0] for m in series.models}
        out += [Planned(m, "final", texts[m], "samples", (SERIES_CHAPTER,), series=True) for m in reversed(texts)]
    not_by = (SERIES_CHAPTER,) if profile.series else ()
    for model in sorted(profile.models, key=lambda m: m not in profile.packaged):  # stable: profile order within
        main = profile.budget(model).corpus or profile.corpora[0]
        checkpoints = [name for name, _ in training_checkpoints(profile, model)]
        out.append(Planned(model, "final", main, "samples", not_by=not_by))
        if "init" in checkpoints:
            out.append(Planned(model, "init", main, "table", ("01_method", "03_activation", "08_training")))
        out += [Planned(model, f"permuted@{s}", main, "table", ("03_activation",)) for s in control_seeds]
        out += [Planned(model, "final", c, "table", ("07_corpora",)) for c in profile.corpora if c != main]
        if model not in profile.packaged:
            along = [c for c in checkpoints if c not in ("init", "final")]
            out += [Planned(model, c, main, "table", ("08_training",)) for c in along]
    return out


def planned_swaps(profile: Profile) -> list[Planned]:
    """Each model's affine swaps as :data:`SWAP_CHAPTERS` ask for them (every block of its final weights, fitted on
    its main text, scored on a quarter of its evaluation tokens), real models first; none where a model's budget has
    no evaluation tokens (a chapter then says how many it scores)."""
    out = []
    for model in sorted(profile.models, key=lambda m: m not in profile.packaged):
        budget = profile.budget(model)
        if budget.eval_tokens:
            out.append(Planned(model, "final", str(budget.corpus or profile.corpora[0]), SWAPS, SWAP_CHAPTERS))
    return out


def _measure(args: tuple[Profile, Planned]) -> tuple[Planned, float]:
    """Capture one planned measurement in a worker (or score one model's planned affine swaps, from its
    measurement), on as many threads as a chapter of the profile computes on (one for a zoo's profile,
    :func:`linrec.notebook.chapter.setup`); its wall time. Either takes minutes, so a line says it is running every
    30 s; transformers' loading bars stay out of the log."""
    import torch

    from linrec.experiment.measurement import measurement
    from linrec.experiment.swaps import affine_swaps

    profile, plan = args
    if plan.series:
        profile = profile.series_profile()
    if profile.zoo is not None:
        torch.set_num_threads(1)
    start = time.perf_counter()
    with heartbeat(f"[book] {'scoring' if plan.keep == SWAPS else 'measuring'} {plan}"), no_library_bars():
        if plan.keep == SWAPS:  # the call of chapters 2, 5 and 11, so the same cache entry
            tokens = int(profile.budget(plan.model).eval_tokens or 0) // 4
            affine_swaps(profile, [measurement(profile, plan.model, progress=False)], max_tokens=tokens,
                         progress=False, cache=True)  # fmt: skip
        else:
            measurement(profile, plan.model, checkpoint=plan.checkpoint, corpus=plan.corpus,
                        keep=plan.keep, progress=False)  # fmt: skip
    return plan, time.perf_counter() - start


def in_order(plans: Sequence[Planned]) -> list[Planned]:
    """``plans`` in the order they are handed to the workers: the measurements as planned, each model's swaps (kept
    as :data:`SWAPS`) right after its last measurement, where they fill a core while the others are measured (they
    read its main measurement, made first, long done by then; a worker there before it would wait for it)."""
    swaps = {p.model: p for p in plans if p.keep == SWAPS}
    measures = [p for p in plans if p.keep != SWAPS]
    last = {p.model: i for i, p in enumerate(measures)}
    out: list[Planned] = []
    for i, plan in enumerate(measures):
        out.append(plan)
        if last[plan.model] == i and plan.model in swaps:
            out.append(swaps.pop(plan.model))
    return out + list(swaps.values())


def prepare_measurements(profile: Profile, plans: Sequence[Planned], jobs: int) -> None:
    """Capture ``plans`` of ``profile`` and score its planned swaps (:func:`in_order`), ``jobs`` at a time in worker
    processes, printing a line for each with its own time; whatever is cached already takes a moment."""
    start = time.perf_counter()
    work = [(profile, p) for p in in_order(plans)]
    pool = mp.get_context("spawn").Pool(max(1, min(jobs, len(work))))
    try:
        for plan, seconds in pool.imap_unordered(_measure, work):
            print(f"[book] {'scored' if plan.keep == SWAPS else 'measured'} {plan} in {seconds:.1f} s", flush=True)
        pool.close()
    except Exception as err:  # the chapter that needs it would fail the same way: say so now
        pool.terminate()
        raise BookError(f"measuring up front failed: {err}") from err
    except BaseException:  # Ctrl-C, SIGTERM: stop the workers too
        pool.terminate()
        raise
    finally:
        pool.join()
    print(f"[book] measurements ready in {time.perf_counter() - start:.1f} s", flush=True)
