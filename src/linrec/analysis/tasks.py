"""What the smaller model can still do: the walks of :func:`linrec.experiment.tasks.task_study` read against each
other, perplexity beside the tasks.

* :func:`steps_table`: one row per model, kind, step and task scored along the walk: the joint ΔPPL (and its share of
  perplexity), what the perplexity budget says of the step (:data:`BUDGET`, as ``linrec replace --max-ppl-increase
  5%`` reads it), the task's change with its interval and what it says (:data:`DROP`, as ``--max-accuracy-drop
  0.02`` reads it), and whether the two part ways (:func:`parting`).
* :func:`deepest_within`: per model and kind, the most blocks a step drops within the perplexity budget.
* :func:`correlations`: Spearman's ρ of each step's ΔPPL with each task's change, within each model, both kinds
  together, combined over the models (:func:`linrec.stats.bootstrap_correlation`).
* :func:`example_items`: the first item of each task, its context and its choices, the true one named.
* :func:`walk_note`: the sentence that says whether this build scored the tasks along the walk, and what it would
  cost where it did not; :func:`recorded_note`: what the chapter says of the last recorded run of the full walk.
* :func:`task_claims`: the claims, each verdict by a rule fixed before any number was computed (:data:`RULE`).

The paper reports no task scores, so nothing here is set beside a reported figure.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import pandas as pd

from linrec.analysis._tables import require_columns
from linrec.interventions.tasks.evaluate import LOWER_IS_BETTER
from linrec.report.claims import Claim
from linrec.stats import bootstrap_correlation

BUDGET = 0.05
"""A step is within the perplexity budget when its joint ΔPPL is at most this share of the model's perplexity."""

DROP = 0.02
"""A task keeps a step's accuracy when it falls by at most this much (two points of accuracy, or of pass@1)."""

MIN_STEPS = 4
"""The fewest scored steps of one model whose rank correlation enters (an interval needs four)."""

NOT_IN_PAPER = "not in the paper"
"""The paper's side of every claim here: it reports no task scores."""

RULE = (
    f"A step is within the perplexity budget when its joint ΔPPL is at most {BUDGET:.0%} of the model's perplexity "
    f"(`linrec replace --max-ppl-increase {BUDGET:.0%}`); a task keeps it when its accuracy falls by at most "
    f"{DROP:g} (`--max-accuracy-drop {DROP:g}`), both read from the point estimates as those budgets read them. "
    "Perplexity and a task part ways at a step where the two disagree beyond the task's 95 % interval: a step within "
    f"the budget whose change's interval lies wholly below 0 (the task loses what perplexity keeps), or a step over "
    f"it whose change's interval lies wholly above −{DROP:g} (the task keeps what perplexity rejects). "
    "Perplexity's budget keeps the tasks when no step within it loses a task's accuracy that way, untestable "
    "without such a step; what it rejects, the tasks do not keep, when no step over it keeps every task's accuracy "
    "that way, untestable without such a step. Perplexity orders the steps as a task does when the within-model "
    "Spearman ρ of ΔPPL with the task's change, both kinds of step together and combined over the models, has its "
    f"95 % interval below 0; untestable without a model of {MIN_STEPS} scored steps."
)
"""How the chapter reads its numbers, written before they were computed."""

UNITS = {"pass@1": "problems", "ppl": "windows"}
"""What a score's ``n`` counts, by metric (else items)."""

KEPT, LOST, UNRESOLVED = "kept", "lost", "unresolved"
"""What a task's change says of a step: kept within :data:`DROP` beyond its interval, lost beyond it, neither."""


_require = functools.partial(require_columns, study="task_study")
"""The columns a table of :func:`~linrec.experiment.tasks.task_study` must have."""


def task_reading(change_low: float, change_high: float) -> str:
    """What a task's change says of a step, from its 95 % interval: :data:`LOST` when the interval lies below 0,
    :data:`KEPT` when it lies above −:data:`DROP`, :data:`UNRESOLVED` otherwise (it reaches both)."""
    if change_high < 0:
        return LOST
    if change_low > -DROP:
        return KEPT
    return UNRESOLVED


def parting(within: bool, reading: str) -> str:
    """How perplexity's budget (``within``) and a task's ``reading`` (:func:`task_reading`) of one step part ways:
    ``"the task loses what perplexity keeps"``, ``"the task keeps what perplexity rejects"``, or ``""``."""
    if within and reading == LOST:
        return "the task loses what perplexity keeps"
    if not within and reading == KEPT:
        return "the task keeps what perplexity rejects"
    return ""


def steps_table(walks: Sequence[pd.DataFrame], changes: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row per model, kind, step (above 0) and task scored along the walk, from the ``walk`` and ``changes`` of
    each model's :func:`~linrec.experiment.tasks.task_study`: the step's ``blocks``, ``delta_ppl`` with its interval,
    ``relative`` (ΔPPL / PPL), ``within`` (the budget), the task's ``before, after, change, change_low,
    change_high``, ``reading`` and ``parting``. A step no task was scored on has one row, its task columns empty; a
    score where less is better (the pruning papers' perplexity) is shown with no reading: the budgets read
    accuracies."""
    walk = pd.concat(list(walks), ignore_index=True)
    moved = pd.concat(list(changes), ignore_index=True) if changes else pd.DataFrame()
    _require(walk, ["model", "mechanism", "kind", "step", "blocks", "base_ppl", "delta_ppl", "delta_ppl_low",
                    "delta_ppl_high"], "the walk")  # fmt: skip
    steps = walk[walk.step > 0].assign(relative=lambda t: t.delta_ppl / t.base_ppl)
    steps = steps.assign(within=steps.delta_ppl <= BUDGET * steps.base_ppl)
    keys = ["model", "mechanism", "step"]
    if moved.empty:
        moved = pd.DataFrame(columns=[*keys, "task", "metric", "before", "after", "change", "change_low",
                                      "change_high"])  # fmt: skip
    _require(moved, [*keys, "task", "metric", "before", "after", "change", "change_low", "change_high"], "the changes")
    out = steps.merge(moved.drop(columns=["kind"], errors="ignore"), on=keys, how="left")
    scored = out.task.notna()
    read = scored & ~out.metric.isin(LOWER_IS_BETTER)
    readings = [task_reading(lo, hi) if r else "" for r, lo, hi in zip(read, out.change_low, out.change_high,
                                                                       strict=True)]  # fmt: skip
    out["reading"] = readings
    out["parting"] = [parting(bool(w), r) if r else "" for w, r in zip(out.within, readings, strict=True)]
    columns = [
        "model",
        "kind",
        "step",
        "blocks",
        "delta_ppl",
        "delta_ppl_low",
        "delta_ppl_high",
        "relative",
        "within",
        "task",
        "metric",
        "before",
        "after",
        "change",
        "change_low",
        "change_high",
        "reading",
        "parting",
    ]
    return out[columns].reset_index(drop=True)  # fmt: skip


def deepest_within(walks: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per model and kind, the most blocks a step drops within the perplexity budget (0 where none is), its blocks
    and its ΔPPL, and the first step over it (``over``, NaN where every step is within)."""
    walk = pd.concat(list(walks), ignore_index=True)
    rows = []
    for (model, kind), part in walk.groupby(["model", "kind"], sort=False):
        part = part.sort_values("step")
        within = part[part.delta_ppl <= BUDGET * part.base_ppl]
        best = within.iloc[-1]
        over = part[(part.delta_ppl > BUDGET * part.base_ppl)]
        rows.append({"model": model, "kind": kind, "budget": BUDGET * float(best.base_ppl), "step": int(best.step),
                     "blocks": best.blocks, "delta_ppl": float(best.delta_ppl),
                     "over": float(over.step.iloc[0]) if len(over) else math.nan})  # fmt: skip
    return pd.DataFrame(rows, columns=["model", "kind", "budget", "step", "blocks", "delta_ppl", "over"])


def correlations(table: pd.DataFrame, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """Spearman's ρ of ΔPPL with each task's change over the scored steps of :func:`steps_table`, within each model
    (both kinds together), combined over the models with a bootstrap interval over steps: ``task, models, steps,
    rho, low, high``; a task none of whose models has :data:`MIN_STEPS` scored steps, with two values of each, has
    no row."""
    rows = []
    scored = table[table.reading != ""]
    for task, part in scored.groupby("task", sort=False):
        enough = part.groupby("model").filter(
            lambda m: len(m) >= MIN_STEPS and m.delta_ppl.nunique() > 1 and m.change.nunique() > 1
        )
        if enough.empty:
            continue
        rho = bootstrap_correlation(enough.delta_ppl, enough.change, enough.model, level, seed=seed)
        rows.append({"task": task, "models": enough.model.nunique(), "steps": rho.n, "rho": rho.r, "low": rho.low,
                     "high": rho.high})  # fmt: skip
    return pd.DataFrame(rows, columns=["task", "models", "steps", "rho", "low", "high"])


def example_items(items: pd.DataFrame, per_task: int = 1) -> pd.DataFrame:
    """The first ``per_task`` items of each task of ``items`` (a study's, one row an item: ``task, item, context,
    choices, label``) for a reader: a row for the context and one per choice, ``passage`` saying which is which
    (the true continuation named)."""
    _require(items, ["task", "item", "context", "choices", "label"], "the items")
    rows = []
    for item in items.groupby("task", sort=False).head(per_task).to_dict("records"):
        number = int(item["item"])
        rows.append({"task": item["task"], "item": number, "passage": "context", "text": item["context"]})
        for i, text in enumerate(item["choices"]):
            said = "the true continuation" if i == int(item["label"]) else f"choice {i + 1}"
            rows.append({"task": item["task"], "item": number, "passage": said, "text": text})
    return pd.DataFrame(rows, columns=["task", "item", "passage", "text"])


def walk_note(table: pd.DataFrame, runs: Sequence[pd.DataFrame], setting: str) -> str:
    """Whether this build scored the tasks along the walk (``table``: :func:`steps_table`), and where it did not,
    what the model itself took on the tasks here (``runs``: each study's ``run``), so what the walk would take, and
    the chapter's ``setting`` (the parameter and value) that scores them there."""
    if table.task.notna().any() and (table.task != "").any():
        return "This build scored the tasks on each model itself and at every step of the walk."
    run = pd.concat(list(runs), ignore_index=True)
    steps = table.groupby("model").size()
    costs = [
        f"{m}: {float(s):.0f} s for the tasks, some {float(s) * steps[m] / 60:.0f} minutes of one core for its "
        f"{int(steps[m])} steps"
        for m, s in zip(run.model, run.tasks_seconds, strict=True)
        if m in steps
    ]
    return (
        "This build scored the tasks on each model itself only, not along the walk: "
        + "; ".join(costs)
        + f". Set {setting} to score them at every step."
    )


def recorded_note(recorded_label: str | None, walked: bool, command: str) -> str:
    """What the chapter says of the recorded run of the full walk (:mod:`linrec.experiment.task_record`; its
    ``recorded_label``, None where none is recorded, else naming the command that made it): shown below where this
    build did not score the walk itself (``walked``); ``command`` records one."""
    if walked:
        return (f"This build scored the tasks along the walk itself, so its figures above are the ones to read; "
                f"`{command}` records them for the builds that cannot afford it.")  # fmt: skip
    if recorded_label is None:
        return (
            f"No run of the full walk is recorded yet, so there are no figures of one to show; `{command}` records one."
        )
    return (f"The figures below are those of {recorded_label}, recorded, not computed by this build: read them as that "
            "run's.")  # fmt: skip


def _interval(low: float, high: float) -> str:
    return f"[{low:+.3f}, {high:+.3f}]"


def task_claims(
    table: pd.DataFrame, scores: Sequence[pd.DataFrame], walks: Sequence[pd.DataFrame], seed: int = 0
) -> list[Claim]:
    """The chapter's claims (:data:`RULE`): per model, whether perplexity's budget keeps the tasks and whether what
    it rejects the tasks do not keep (both from ``table``, :func:`steps_table`); over the models, per task, whether
    perplexity orders the steps as the task does (:func:`correlations`); and as headline numbers each model's own
    scores (``scores``: each study's) and the deepest step within the budget of each kind (``walks``)."""
    claims: list[Claim] = []
    base = pd.concat(list(scores), ignore_index=True)
    _require(base, ["model", "task", "metric", "value", "low", "high", "n"], "the scores")
    for row in base.to_dict("records"):
        known = math.isfinite(row["low"]) and math.isfinite(row["high"])
        counted = f"on {int(row['n'])} {UNITS.get(row['metric'], 'items')}"
        claims.append(Claim.measure(
            f"{row['task']} {row['metric']} of the model itself",
            f"{row['value']:.3f} [{row['low']:.3f}, {row['high']:.3f}] {counted}" if known
            else f"{row['value']:.3f} {counted}",
            interval=(float(row["low"]), float(row["high"])) if known else None, note=NOT_IN_PAPER,
        ).of(str(row["model"])))  # fmt: skip
    for row in deepest_within(walks).to_dict("records"):
        claims.append(Claim.measure(
            f"most blocks {row['kind']} within {BUDGET:.0%} of perplexity, cheapest first",
            f"{row['step']} (blocks {row['blocks'] or 'none'}; ΔPPL {row['delta_ppl']:+.3g}, "
            f"budget {row['budget']:.3g})",
        ).of(str(row["model"])))  # fmt: skip
    scored = table[table.reading != ""]
    keeps = (f"yes when no step within {BUDGET:.0%} of perplexity has a task whose change's 95 % interval lies "
             "wholly below 0; no where one does; untestable without a scored step within the budget")  # fmt: skip
    rejects = (f"yes when no step over {BUDGET:.0%} of perplexity has every task's change's 95 % interval wholly above "
               f"−{DROP:g}; no where one does; untestable without a scored step over the budget")  # fmt: skip
    for model in dict.fromkeys(table.model):
        mine = scored[scored.model == model]
        inside, outside = mine[mine.within], mine[~mine.within]
        lost = inside[inside.reading == LOST]
        kept = outside.groupby(["kind", "step"]).filter(lambda s: (s.reading == KEPT).all())
        claims.append(Claim.check(
            "perplexity's budget keeps the tasks' accuracy", NOT_IN_PAPER,
            _said(lost, inside, "within the budget", "loses"), None if inside.empty else lost.empty, rule=keeps,
        ).of(str(model)))  # fmt: skip
        claims.append(Claim.check(
            "what perplexity's budget rejects, the tasks do not keep", NOT_IN_PAPER,
            _said(kept, outside, "over the budget", "keeps"), None if outside.empty else kept.empty, rule=rejects,
        ).of(str(model)))  # fmt: skip
    rho = correlations(table, seed=seed)
    order = (f"yes when the within-model Spearman ρ of ΔPPL with the task's change, over the scored steps of both "
             f"kinds, combined over the models, has its 95 % interval below 0; untestable without a model of "
             f"{MIN_STEPS} scored steps")  # fmt: skip
    for task in dict.fromkeys(scored.task):
        found = rho[rho.task == task]
        if found.empty:
            claims.append(Claim.check(f"perplexity orders the steps as {task} does", NOT_IN_PAPER,
                                      "too few scored steps", None, rule=order))  # fmt: skip
            continue
        r = found.iloc[0]
        claims.append(Claim.check(
            f"perplexity orders the steps as {task} does", NOT_IN_PAPER,
            f"ρ = {r.rho:+.2f} [{r.low:+.2f}, {r.high:+.2f}] over {int(r.steps)} steps of {int(r.models)} model(s)",
            bool(r.high < 0), value=float(r.rho), interval=(float(r.low), float(r.high)), rule=order,
        ))  # fmt: skip
    return claims


def _said(found: pd.DataFrame, among: pd.DataFrame, where: str, verb: str) -> str:
    """The measured side of a parting claim: the steps and tasks that part ways (``found``) of those scored
    ``where`` (``among``)."""
    if among.empty:
        return f"no scored step {where}"
    if found.empty:
        return f"none of {among.groupby(['kind', 'step']).ngroups} scored steps {where} {verb} a task's accuracy"
    return "; ".join(
        f"{r['kind']} {int(r['step'])} ({r['task']} {r['change']:+.3f} {_interval(r['change_low'], r['change_high'])}, "
        f"ΔPPL {r['delta_ppl']:+.3g})"
        for r in found.to_dict("records")
    )
