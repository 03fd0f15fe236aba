"""linrec.interventions.tasks.suites: The zero-shot tasks the layer-pruning papers report, as named suites, and a task
list as a user writes it read into task names."""

from __future__ import annotations

import pytest

from linrec.errors import LinrecError
from linrec.interventions.tasks.suites import HUMANEVAL, PRUNING_PPL, SUITES, harness_tasks, parse_tasks
from support.cli import heavy_imports


def test_names_are_split_at_commas_suites_expanded_and_each_kept_once_where_it_first_appears():
    assert parse_tasks(" piqa, arc_easy ") == ("piqa", "arc_easy")
    assert parse_tasks("boolq,zero-shot,piqa,boolq") == ("boolq", *SUITES["zero-shot"])
    assert parse_tasks(["mmlu", "piqa,mmlu", "zero-shot-wide"]) == ("mmlu", "piqa", *SUITES["zero-shot-wide"][1:-1])
    assert parse_tasks("zero-shot") == ("piqa", "winogrande", "hellaswag", "arc_easy", "arc_challenge")
    assert set(SUITES["zero-shot"]) < set(SUITES["zero-shot-wide"]) and len(SUITES["zero-shot-wide"]) == 12


def test_linrecs_own_tasks_are_kept_by_the_parser_and_left_out_for_the_harness():
    names = parse_tasks(f"piqa,{HUMANEVAL},{PRUNING_PPL},hellaswag")
    assert names == ("piqa", "humaneval", "wikitext2-ppl", "hellaswag")
    assert harness_tasks(names) == ("piqa", "hellaswag") and harness_tasks([HUMANEVAL]) == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "no task names"), (" , ", "no task names"), ([], "no task names"), ("piqa,,arc_easy", "an empty task name"),
     ("piqa,", "an empty task name"), ("piqa arc_easy", "cannot contain spaces: \\['piqa arc_easy'\\]")],
)  # fmt: skip
def test_a_list_that_cannot_be_read_is_refused_naming_what_is_wrong(text, message):
    with pytest.raises(LinrecError, match=message):
        parse_tasks(text)


def test_task_lists_are_read_without_torch():
    assert heavy_imports("linrec.interventions.tasks.suites") == []


@pytest.mark.slow
def test_every_suite_task_is_a_name_lm_eval_registers():
    from lm_eval.tasks import TaskManager

    registered = set(TaskManager().all_tasks)  # indexes lm_eval's 14,000 task YAMLs: 10 to 20 s
    assert {task for tasks in SUITES.values() for task in tasks} <= registered
