"""The measurements the chapters will ask for, captured before they start, on every core.

Chapters share measurements through the cache (:func:`linrec.experiment.measurement.measurement`): the first
to ask for one captures it, and another that asks meanwhile waits for it. Run side by side, chapters would wait
minutes for each other's captures with a core idle. So a build first captures what the chapters it runs are
known to ask for (:func:`planned`), ``jobs`` worker processes at a time, costliest first, one line of log each,
each model's affine swaps that chapters 2, 5 and 11 share (:func:`planned_swaps`: perplexity passes that read
its measurement) and chapter 11's study of it (:func:`planned_gating`), handed out soon after its main measurement
(:func:`in_order`): chapters 5 and 11, started side by side, would otherwise wait on each other's cache lock for the
swaps, as chapter 12 waited on chapter 11's costs in the cold build of 2026-12-03, and chapter 11 would hold its
lane alone for half an hour. The chapters then read them. The plan is an optimisation, never a contract: a chapter
that asks for something else computes it itself, and nothing planned changes a result.
"""

from __future__ import annotations

import dataclasses
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
"""The chapter that measures a profile's scale series (:meth:`~linrec.experiment.profiles.Profile.series_profile`)
rather than its models, where the profile names one."""
SWAP_CHAPTERS = ("02_heterogeneity", "05_compression", "11_pruning")
"""The chapters that read each model's affine swaps, every block on a quarter of its evaluation tokens
(:func:`linrec.experiment.swaps.affine_swaps`, cached: chapter 2's table, chapter 5's safety signal, chapter 11's
costs)."""
SWAPS = "swaps"
"""A plan's ``keep`` for a model's affine swaps (:func:`planned_swaps`), made once its measurement is."""
GATING_CHAPTER = "11_pruning"
"""The chapter whose study of each model (its pruning costs and gated blocks) a build runs up front."""
GATING = "gating"
"""A plan's ``keep`` for a model's study in :data:`GATING_CHAPTER` (:func:`planned_gating`)."""


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
    shares: tuple[float, ...] = ()  # a GATING study's gated shares, as the chapter calls it
    budget: str = ""  # ... and the budget its orders are walked under

    @property
    def scores(self) -> bool:
        """Whether it scores perplexity passes (:data:`SWAPS`, :data:`GATING`) from a measurement, not captures one."""
        return self.keep in (SWAPS, GATING)

    def __str__(self) -> str:
        what = {SWAPS: "the affine swaps of ", GATING: "chapter 11's pruning costs and gated blocks of "}.get(
            self.keep, ""
        )
        return f"{what}{self.model} ({self.checkpoint}) on {self.corpus}"

    def wanted_by(self, stems: Collection[str]) -> bool:
        return any((EVERY_CHAPTER in self.chapters or s in self.chapters) and s not in self.not_by for s in stems)


def planned(profile: Profile, control_seeds: Sequence[int]) -> list[Planned]:
    """What the chapters of ``profile`` ask for at their default parameters, the costliest first:
    each model's final weights on its main text with its row sample (every chapter), its initialisation where it
    has checkpoints along training (chapters 1 and 3), its shuffled-weight controls at ``control_seeds`` (chapter
    3) and its final weights on every other corpus (chapter 7), unless the profile measures it on its main text only
    (:attr:`~linrec.experiment.profiles.Profile.main_text_only`), and its other training checkpoints (chapter 8). Where
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
        if model in profile.measured_again():
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


def planned_gating(profile: Profile, shares: Sequence[float], budget: str) -> list[Planned]:
    """Chapter 11's study of each model it scores at its default parameters (:meth:`Profile.scored`; the gated
    blocks at ``shares``, each order walked under ``budget``), real models first: its costs of dropping each block
    and its gated passes (:func:`linrec.experiment.gating.gating_study`, which reads its pruning costs and affine
    swaps), some 25 minutes of a core for SmolLM2 that would otherwise run in the chapter's lane alone."""
    scored, rates = profile.scored(), tuple(float(s) for s in shares)
    return [dataclasses.replace(p, keep=GATING, chapters=(GATING_CHAPTER,), shares=rates, budget=budget)
            for p in planned_swaps(profile) if p.model in scored]  # fmt: skip


def _measure(args: tuple[Profile, Planned]) -> tuple[Planned, float]:
    """Capture one planned measurement in a worker (or score one model's planned affine swaps, from its
    measurement), on as many threads as a chapter of the profile computes on (one for a zoo's profile,
    :func:`linrec.notebook.chapter.setup`); its wall time. Either takes minutes, so a line says it is running every
    30 s; transformers' loading bars stay out of the log."""
    import torch

    from linrec.experiment.gating import gating_study
    from linrec.experiment.measurement import measurement
    from linrec.experiment.swaps import affine_swaps

    profile, plan = args
    if plan.series:
        profile = profile.series_profile()
    if profile.zoo is not None:
        torch.set_num_threads(1)
    start = time.perf_counter()
    tokens = int(profile.budget(plan.model).eval_tokens or 0) // 4  # what the chapters score passes on
    with heartbeat(f"[book] {'scoring' if plan.scores else 'measuring'} {plan}"), no_library_bars():
        if plan.keep == GATING:  # chapter 11's call, so the same cache entry
            gating_study(profile, plan.model, shares=plan.shares, eval_tokens=tokens, budget=plan.budget,
                         progress=False)  # fmt: skip
        elif plan.keep == SWAPS:  # the call of chapters 2, 5 and 11, so the same cache entry
            affine_swaps(profile, [measurement(profile, plan.model, progress=False)], max_tokens=tokens,
                         progress=False, cache=True)  # fmt: skip
        else:
            measurement(profile, plan.model, checkpoint=plan.checkpoint, corpus=plan.corpus,
                        keep=plan.keep, progress=False)  # fmt: skip
    return plan, time.perf_counter() - start


def in_order(plans: Sequence[Planned], jobs: int) -> list[Planned]:
    """``plans`` in the order they are handed to ``jobs`` workers: the measurements as planned (the costliest first),
    and each model's follow-up, its chapter 11 study where one is planned (:data:`GATING`, which scores its affine
    swaps too: the same cache entry, so its swaps plan is dropped) else its swaps, ``jobs`` places after its main
    measurement, which it reads: a worker there first would wait for it, and the longest items go early, where the
    others fill the cores around them, not at the end with a core idle."""
    studies = {p.model: p for p in plans if p.keep == GATING}
    follow = {**{p.model: p for p in plans if p.keep == SWAPS and p.model not in studies}, **studies}
    measures = [p for p in plans if not p.scores]
    main: dict[str, int] = {}
    for i, plan in enumerate(measures):
        main.setdefault(plan.model, i)
    out: list[Planned] = []
    for i, plan in enumerate(measures):
        out.append(plan)
        out += [follow.pop(m) for m, at in main.items() if m in follow and at + max(1, jobs) - 1 == i]
    return out + list(follow.values())


def prepare_measurements(profile: Profile, plans: Sequence[Planned], jobs: int) -> None:
    """Capture ``plans`` of ``profile`` and score its planned swaps (:func:`in_order`), ``jobs`` at a time in worker
    processes, printing a line for each with its own time; whatever is cached already takes a moment."""
    start = time.perf_counter()
    work = [(profile, p) for p in in_order(plans, jobs)]
    pool = mp.get_context("spawn").Pool(max(1, min(jobs, len(work))))
    try:
        for plan, seconds in pool.imap_unordered(_measure, work):
            print(f"[book] {'scored' if plan.scores else 'measured'} {plan} in {seconds:.1f} s", flush=True)
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
