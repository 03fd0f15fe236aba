"""linrec.interventions.tasks.request: what linrec evaluate and replace --tasks are asked to score, checked before
torch loads."""

from __future__ import annotations

import pytest

from linrec.errors import LinrecError
from linrec.interventions.tasks.request import TaskRequest
from support.cli import heavy_imports


def test_a_request_reads_suites_and_says_which_scorer_each_task_goes_to(tmp_path):
    request = TaskRequest.of("zero-shot,humaneval,piqa", limit=5, task_dir=tmp_path)
    assert request.tasks == ("piqa", "winogrande", "hellaswag", "arc_easy", "arc_challenge", "humaneval")
    assert request.harness == request.tasks[:5] and request.humaneval and not request.pruning_ppl
    text = tmp_path / "ppl.txt"
    text.write_text("some text", encoding="utf-8")
    alone = TaskRequest.of(["wikitext2-ppl"], ppl_text=text, ppl_seq_len=256)
    assert alone.pruning_ppl and alone.harness == () and alone.ppl_text == text and alone.ppl_seq_len == 256


@pytest.mark.parametrize(
    "options, message",
    [
        ({"limit": 0}, "the limit must be an integer of at least 1; got 0"),
        ({"batch_size": True}, "the batch size must be an integer"),
        ({"ppl_seq_len": 1}, "the ppl window must be an integer of at least 2"),
        ({"timeout": float("inf")}, "timeout must be a number of seconds above 0"),
        ({"task_dir": "/no/such/dir"}, "--task-dir /no/such/dir is not a directory"),
        ({"ppl_text": "/no/such/file.txt"}, "add it to --tasks"),
    ],
)
def test_settings_that_cannot_work_are_refused(options, message):
    with pytest.raises(LinrecError, match=message):
        TaskRequest.of("piqa", **options)


def test_options_no_asked_task_reads_are_refused(tmp_path):
    with pytest.raises(LinrecError, match="--task-dir is read by lm-evaluation-harness tasks, and none is asked for"):
        TaskRequest.of("humaneval", task_dir=tmp_path)
    with pytest.raises(LinrecError, match="cannot read --ppl-text /no/such/file.txt"):
        TaskRequest.of("wikitext2-ppl", ppl_text="/no/such/file.txt")


def test_a_request_is_read_without_torch():
    assert heavy_imports("linrec.interventions.tasks.request") == []
