"""What a valid profile is: the rules :meth:`linrec.experiment.profiles.Profile.validate` applies, field by field.

Each check raises a :class:`~linrec.LinrecError` that names the profile (``where``), the bad field and what is
valid; the profile applies them in the order below, so the first bad field is the one reported.
"""

from __future__ import annotations

from collections.abc import Mapping

from linrec.core.capture import rows_needed
from linrec.data.corpora import corpus_names
from linrec.data.hub_corpora import PAPER_CORPORA
from linrec.errors import LinrecError
from linrec.experiment.budgets import Budget, ProbeSettings
from linrec.interventions.tasks.suites import HUMANEVAL, parse_tasks
from linrec.models.loading import DTYPES
from linrec.models.packaged import PACKAGED
from linrec.models.shapes import SHAPES
from linrec.models.zoo import ZooSpec


def check_models(where: str, models: tuple[str, ...], shaped: bool, zoo: ZooSpec | None) -> None:
    """At least one model; shaped models are hub ids of a known shape, from no zoo; a zoo's models are its own or
    packaged ones."""
    if not models:
        raise LinrecError(f"{where}: models is empty; name at least one model")
    if shaped:
        unknown = [m for m in models if m not in SHAPES]
        if zoo is not None or unknown:
            raise LinrecError(
                f"{where}: shaped models are hub ids with a known shape ({', '.join(SHAPES)}), not zoo models; "
                f"got {unknown or 'a zoo'}"
            )
    if zoo is not None:
        unknown = [m for m in models if m not in zoo.names() and m not in PACKAGED]
        if unknown:
            raise LinrecError(
                f"{where}: no zoo or packaged model {unknown}; the '{zoo.name}' zoo has "
                f"{', '.join(zoo.names())}, and the packaged models are {', '.join(PACKAGED)}"
            )


def check_corpora(where: str, corpora: tuple[str, ...], eval_corpus: str) -> None:
    """Known corpora, at least one."""
    valid = corpus_names()
    for c in [*corpora, eval_corpus]:
        if c not in valid:
            raise LinrecError(f"{where}: unknown corpus '{c}'; choose from {', '.join(valid)}")
    if not corpora:
        raise LinrecError(f"{where}: corpora is empty; choose from {', '.join(valid)}")


def check_sizes(where: str, sizes: Mapping[str, object], folds: object, seeds: tuple[object, ...]) -> None:
    """Positive integer ``sizes`` (field name -> value), at least two folds (each is held out once), and a
    non-empty list of integer seeds."""
    for attr, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise LinrecError(f"{where}: {attr} must be a positive integer; got {value!r}")
    if not isinstance(folds, int) or folds < 2:
        raise LinrecError(
            f"{where}: folds must be an integer of at least 2 (each fold is held out once); got {folds!r}"
        )
    if not seeds or not all(isinstance(s, int) for s in seeds):
        raise LinrecError(f"{where}: seeds must be a non-empty list of integers; got {seeds!r}")


def check_probe(where: str, probe: ProbeSettings) -> None:
    """Positive integer rank, row sample and steps, and a positive learning rate."""
    for attr in ("rank", "sample_rows", "steps"):
        if not isinstance(getattr(probe, attr), int) or getattr(probe, attr) < 1:
            raise LinrecError(f"{where}: probe.{attr} must be a positive integer; got {getattr(probe, attr)!r}")
    if not probe.lr > 0:
        raise LinrecError(f"{where}: probe.lr must be positive; got {probe.lr!r}")


def check_placement(where: str, device: str | None, device_map: str | None, dtype: str) -> None:
    """A known device or a device map (not both), and a known dtype."""
    if device is not None and device.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise LinrecError(f"{where}: unknown device '{device}'; choose cpu, cuda, cuda:N, mps or None (automatic)")
    if device_map is not None and device is not None:
        raise LinrecError(f"{where}: give device or device_map, not both (device_map places the model itself)")
    if dtype not in DTYPES:
        raise LinrecError(f"{where}: unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}")


def check_memory(where: str, memory: str | None) -> None:
    """A memory budget a capture's plan can read (:func:`linrec.core.plan.parse_memory`), or None."""
    from linrec.core.plan import parse_memory

    try:
        parse_memory(memory)
    except LinrecError as err:
        raise LinrecError(f"{where}: {err}") from err


def check_revisions(
    where: str, revisions: tuple[tuple[str, str], ...], models: tuple[str, ...], corpora: tuple[str, ...]
) -> None:
    """Revisions pinned only for the profile's models and hub corpora."""
    pinnable = [*models, *(c for c in corpora if c in PAPER_CORPORA)]
    for name, _ in revisions:  # (training_checkpoints is a catalogue: models left out are ignored)
        if name not in pinnable:
            raise LinrecError(
                f"{where}: a revision is given for '{name}', which is not one of its models or hub corpora {pinnable}"
            )


def check_budgets(where: str, budgets: tuple[tuple[str, Budget], ...], corpora: tuple[str, ...]) -> None:
    """Budgets of positive integer sizes, each reading one of the profile's corpora."""
    for model, budget in budgets:  # a catalogue, as training_checkpoints: models left out are ignored
        for attr in ("rows_per_block", "eval_tokens", "sample_rows", "every"):
            value = getattr(budget, attr)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise LinrecError(f"{where}: {model}'s budget {attr} must be a positive integer; got {value!r}")
        if budget.corpus is not None and budget.corpus not in corpora:
            raise LinrecError(
                f"{where}: {model}'s budget reads corpus '{budget.corpus}', which is not one of its corpora "
                f"{', '.join(corpora)}"
            )


def check_chapters(where: str, swap_depths: tuple[float, ...] | None, shaped_series: tuple[str, ...]) -> None:
    """Swap depths are relative depths in [0, 1]; a shaped profile's series models (``shaped_series``) have a
    known shape."""
    if swap_depths is not None and not (swap_depths and all(0 <= d <= 1 for d in swap_depths)):
        raise LinrecError(f"{where}: swap_depths must be relative depths in [0, 1]; got {swap_depths!r}")
    if unknown := [m for m in shaped_series if m not in SHAPES]:
        raise LinrecError(f"{where}: the series models {unknown} have no known shape; choose from {', '.join(SHAPES)}")


def check_evaluations(where: str, evaluations: tuple[str, ...]) -> None:
    """Task names as ``linrec evaluate --tasks`` reads them (:func:`linrec.interventions.tasks.suites.parse_tasks`):
    lm-evaluation-harness tasks and the pruning papers' perplexity, not HumanEval, which chapter 12 scores by its own
    setting (whether the harness knows a name is known only where it runs)."""
    if not evaluations:
        return
    try:
        names = parse_tasks(evaluations)
    except LinrecError as err:
        raise LinrecError(f"{where}: evaluations: {err}") from err
    if HUMANEVAL in names:
        raise LinrecError(f"{where}: evaluations: {HUMANEVAL} is chapter 12's own setting (HUMANEVAL_LIMIT); leave it "
                          "out of the profile's evaluations")  # fmt: skip


def check_context(where: str, zoo: ZooSpec | None, models: tuple[str, ...], seq_len: int) -> None:
    """Sequences no longer than the context of every zoo model."""
    if zoo is not None:
        zoo_models = [m for m in models if m not in PACKAGED]
        context = min((zoo.entry(m).seq_len for m in zoo_models), default=seq_len)
        if seq_len > context:
            raise LinrecError(
                f"{where}: seq_len {seq_len} exceeds the zoo models' context of {context}; use {context} or less"
            )


def check_rows(where: str, model: str, width: int | None, rows: int | None, folds: int, seq_len: int) -> None:
    """Enough rows per block for ``model``'s width (where known) in every training split of whole sequences."""
    needed = None if width is None else rows_needed(width, folds, seq_len)
    if needed is not None and rows is not None and rows < needed:
        raise LinrecError(
            f"{where}: {rows} rows per block are too few for {model}'s width {width} with "
            f"{folds} folds of whole {seq_len}-token sequences; use at least {needed}"
        )
