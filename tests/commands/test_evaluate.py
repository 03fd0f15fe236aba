"""linrec evaluate: a model's task scores printed and written, every option, text and task checked before the model
loads."""

from __future__ import annotations

import json

import pytest

from linrec.cli import main
from linrec.interventions.tasks.continuation import continuation_items, write_choice_task
from support.cli import _fails
from support.tasks import datasets_cache  # noqa: F401  (autouse)

TASK = "linrec_lines"


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory, text):
    directory = tmp_path_factory.mktemp("tasks")
    write_choice_task(directory, TASK, continuation_items(text, items=12, context=1))
    return directory


def test_the_scores_are_printed_and_the_record_written(model_dirs, task_dir, text_file, tmp_path, capsys):
    out = tmp_path / "scores.json"
    args = ["evaluate", "--model", str(model_dirs["gpt2"]), "--tasks", f"{TASK},wikitext2-ppl", "--task-dir",
            str(task_dir), "--ppl-text", str(text_file), "--ppl-seq-len", "32", "--limit", "4", "--out", str(out),
            "--no-progress"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert f"{TASK}      acc" in printed and "wikitext2-ppl      ppl" in printed and f"wrote {out}" in printed
    record = json.loads(out.read_text())
    assert record["model"] == str(model_dirs["gpt2"]) and record["harness"]["settings"]["limit"] == 4
    assert {(s["task"], s["n"]) for s in record["scores"]} >= {(TASK, 4), ("wikitext2-ppl", 4)}


@pytest.mark.parametrize(
    "options, message",
    [
        (["--tasks", "piqa,,arc_easy"], "an empty task name"),
        (["--tasks", "humaneval", "--task-dir", "/no/such"], "--task-dir /no/such is not a directory"),
        (["--tasks", "humaneval", "--ppl-text", "/no/such.txt"], "add it to --tasks"),
        (["--tasks", "humaneval", "--out", "scores.csv"], "--out must end in .json"),
        (["--tasks", "humaneval", "--test-timeout", "0"], "timeout must be a number of seconds above 0"),
        (["--tasks", "my_tsak", "--task-dir", "TASKS"], "unknown task 'my_tsak'"),
    ],
)
def test_bad_input_is_one_line_before_the_model_loads(options, message, model_dirs, task_dir, capsys, no_weights):
    options = [str(task_dir) if o == "TASKS" else o for o in options]
    _fails(["evaluate", "--model", str(model_dirs["gpt2"]), *options], capsys, message)


@pytest.mark.slow  # (lm-evaluation-harness indexes its 14,000 task files: 10-20 s)
def test_a_harness_task_without_its_data_offline_is_named_before_the_model(model_dirs, capsys, no_weights, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    _fails(["evaluate", "--model", str(model_dirs["gpt2"]), "--tasks", "arc_easy"], capsys,
           "the data of 1 task(s) cannot be read here", "arc_easy", "--task-dir")  # fmt: skip
