"""linrec.interventions.tasks.evaluate: a model's task scores as one table and one record, and the task budget."""

from __future__ import annotations

import json
import math

import pytest

import linrec
import linrec.interventions.tasks.humaneval as humaneval_module
from linrec.errors import LinrecError
from linrec.interventions.tasks.continuation import continuation_items, write_choice_task
from linrec.interventions.tasks.evaluate import COLUMNS, Evaluation, TaskBudget, Z, changes, evaluate, prepare
from linrec.interventions.tasks.harness import harness_scores
from linrec.interventions.tasks.humaneval import HumanEvalScore
from linrec.interventions.tasks.pruning_ppl import pruning_perplexity
from linrec.interventions.tasks.request import TaskRequest
from support.planted_models import planted_model
from support.tasks import datasets_cache  # noqa: F401  (autouse)

TASK = "linrec_lines"


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory, text):
    directory = tmp_path_factory.mktemp("tasks")
    write_choice_task(directory, TASK, continuation_items(text, items=24, context=1, seed=1))
    return directory


@pytest.fixture(scope="module")
def model():
    return planted_model()


def _row(task, metric, value, stderr):
    return {"task": task, "metric": metric, "value": value, "stderr": stderr, "low": math.nan, "high": math.nan,
            "n": 10, "version": "1"}  # fmt: skip


def test_the_table_holds_each_scorers_numbers_with_their_intervals(model, tokenizer, text, task_dir, tmp_path):
    ppl_text = tmp_path / "held.txt"
    ppl_text.write_text(text[:8_000], encoding="utf-8")
    request = TaskRequest.of(f"{TASK},wikitext2-ppl", task_dir=task_dir, ppl_text=ppl_text, ppl_seq_len=32)
    scored = evaluate(model, tokenizer, request)
    table = scored.table().set_index(["task", "metric"])
    assert list(scored.table().columns) == COLUMNS
    alone = harness_scores(model, tokenizer, TASK, task_dir=task_dir).table().set_index("metric")
    acc = table.loc[(TASK, "acc")]
    assert acc.value == alone.value["acc"] and acc.stderr == alone.stderr["acc"] and acc.n == 24
    assert acc.low == pytest.approx(max(0.0, acc.value - Z * acc.stderr)) and acc.high <= 1.0
    ppl = table.loc[("wikitext2-ppl", "ppl")]
    expected = pruning_perplexity(model, tokenizer, text[:8_000], seq_len=32)
    assert ppl.value == expected.ppl and ppl.n == expected.windows and math.isnan(ppl.stderr)
    record = json.loads(json.dumps(scored.record()))  # JSON as it is written, NaN as null
    assert record["harness"]["lm_eval"] and record["wikitext2-ppl"]["seq_len"] == 32 and "versions" in record
    assert {r["task"] for r in record["scores"]} == {TASK, "wikitext2-ppl"}
    assert scored.headline()[TASK]["metric"] == "acc" and scored.headline()["wikitext2-ppl"]["metric"] == "ppl"


def test_humaneval_joins_the_table_as_pass_at_1(model, tokenizer, monkeypatch):
    def planted(*args, **kwargs):
        return HumanEvalScore(0.25, 0.1, 8, (), (), kwargs["limit"], kwargs["max_new_tokens"], kwargs["timeout"])

    monkeypatch.setattr(humaneval_module, "humaneval", planted)
    scored = evaluate(model, tokenizer, "humaneval", limit=8, max_new_tokens=16)
    [row] = scored.rows
    assert (row["metric"], row["value"], row["n"]) == ("pass@1", 0.25, 8)
    assert row["low"] == pytest.approx(0.25 - Z * 0.1) and scored.records["humaneval"]["settings"]["limit"] == 8


def test_linrec_evaluate_is_the_public_name_and_options_go_with_names_only(model, tokenizer, task_dir):
    assert linrec.evaluate is evaluate
    prepared = prepare(TaskRequest.of(TASK, task_dir=task_dir))
    with pytest.raises(LinrecError, match="options \\['limit'\\] are a request's"):
        evaluate(model, tokenizer, prepared, limit=3)


def test_changes_give_each_tasks_headline_before_and_after_with_an_unpaired_interval():
    before = Evaluation(
        (_row("a", "acc_norm", 0.5, 0.03), _row("a", "acc", 0.6, 0.03), _row("p", "ppl", 9.0, math.nan))
    )
    after = Evaluation(
        (_row("a", "acc_norm", 0.4, 0.03), _row("a", "acc", 0.5, 0.04), _row("p", "ppl", 11.0, math.nan))
    )
    table = changes(before, after).set_index("task")
    assert table.metric["a"] == "acc" and table.change["a"] == pytest.approx(-0.1)
    assert table.change_high["a"] - table.change["a"] == pytest.approx(Z * 0.05)
    assert table.change["p"] == 2.0 and math.isnan(table.change_low["p"])


def test_a_task_budget_keeps_a_step_only_where_each_accuracy_falls_by_at_most_the_budget(model, tokenizer, task_dir):
    prepared = prepare(TaskRequest.of(TASK, task_dir=task_dir))
    scored = evaluate(model, tokenizer, prepared)
    acc = scored.headline()[TASK]["value"]
    base = lambda value: Evaluation((_row(TASK, "acc", value, 0.05),))  # noqa: E731
    columns, within = TaskBudget(prepared, tokenizer, base(acc + 0.01), "0.02")(model, frozenset({1}))
    assert columns == {f"{TASK} acc": acc} and within
    budget = TaskBudget(prepared, tokenizer, base(acc + 0.05), "0.02")
    assert budget.limits() == {TASK: pytest.approx(acc + 0.03)} and not budget(model, frozenset({1}))[1]
    assert budget.scored[frozenset({1})].rows == scored.rows  # what each step scored, kept
    assert TaskBudget(prepared, tokenizer, base(1.0), None)(model, frozenset({1}))[1]  # scored, not budgeted
    assert TaskBudget(prepared, tokenizer, base(0.99), "0.02")(model, frozenset()) == ({f"{TASK} acc": 0.99}, True)
    relative = TaskBudget(prepared, tokenizer, base(0.5), "10%")
    assert relative.limits() == {TASK: pytest.approx(0.45)}
