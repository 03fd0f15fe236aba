"""linrec.interventions.tasks.harness: Zero-shot task accuracy through lm-evaluation-harness, on a model linrec has
already loaded."""

from __future__ import annotations

import functools
import json
import random
from importlib import metadata
from pathlib import Path

import datasets
import pytest
import torch
from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager
from transformers import AutoModelForCausalLM

import linrec.interventions.tasks.harness as harness
from linrec.errors import LinrecError
from linrec.interventions.tasks.harness import LOCAL_TASK_YAML, check_tasks, harness_scores
from support.planted_models import planted_model
from support.tasks import datasets_cache  # noqa: F401  (autouse)

TASK = "my_task"
"""The local task: :data:`LOCAL_TASK_YAML` itself, its data file written by :func:`task_dir`."""

WORDS = "model block layer linear map token input output weight bias norm rank probe gate swap corpus text data".split()


def items(n: int = 40, seed: int = 0) -> list[dict]:
    """``n`` multiple-choice items of the tiny tokenizer's words, three distinct choices each, the label drawn."""
    rng = random.Random(seed)
    drawn = []
    for _ in range(n):
        choices = list(dict.fromkeys(" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(3)))
        drawn.append({"question": " ".join(rng.sample(WORDS, 5)), "choices": choices, "label": rng.randrange(3)})
    return [item for item in drawn if len(item["choices"]) == 3]


ITEMS = items()


def write_task(directory: Path, name: str = TASK, data: str | None = None, **lines: str) -> Path:
    """:data:`LOCAL_TASK_YAML` as task ``name`` in ``directory``, reading ``data`` (:data:`ITEMS` written beside it
    when None), with ``lines`` (key: YAML) replacing or adding top-level keys."""
    directory.mkdir(exist_ok=True)
    if data is None:
        data = str(directory / f"{name}.jsonl")
        Path(data).write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    text = LOCAL_TASK_YAML.replace("task: my_task", f"task: {name}").replace("/data/my_task.jsonl", data)
    kept = [line for line in text.splitlines() if line.split(":")[0] not in lines]
    (directory / f"{name}.yaml").write_text("\n".join(kept + [f"{k}: {v}" for k, v in lines.items()]) + "\n")
    return directory


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return write_task(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def model():
    return planted_model()


@pytest.fixture
def untouchable():
    """The planted model, failing the test if it is run: every error must come before the model."""
    model = planted_model()

    def run(*args, **kwargs):
        raise AssertionError("the model ran before the error")

    model.forward = run
    return model


@pytest.fixture
def local_index_only(monkeypatch):
    """lm_eval's task index of task_dir's YAMLs alone: the 14,000 built-in task YAMLs take 10 to 20 s to index."""
    monkeypatch.setattr(harness, "TaskManager", functools.partial(TaskManager, include_defaults=False))


def by_hand(model, tokenizer, chosen: list[dict]) -> tuple[list[bool], list[bool]]:
    """Per item, whether the choice of highest log-likelihood is the label, and the same with each log-likelihood over
    the choice's length in characters (acc_norm): the sum of the log-probabilities of the continuation's tokens
    (`` choice`` after the prompt, the tokens the whole text has beyond the prompt's), one unpadded forward each."""
    hits, norm_hits = [], []
    for item in chosen:
        context = f"Question: {item['question']}\nAnswer:"
        prompt = len(tokenizer(context).input_ids)
        scores = []
        for choice in item["choices"]:
            ids = tokenizer(f"{context} {choice}").input_ids
            assert len(ids) <= model.config.n_positions  # scored whole, as the harness scores it
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
            scores.append(sum(float(logp[t - 1, ids[t]]) for t in range(prompt, len(ids))))
        hits.append(max(range(3), key=scores.__getitem__) == item["label"])
        norm = [s / len(c) for s, c in zip(scores, item["choices"])]
        norm_hits.append(max(range(3), key=norm.__getitem__) == item["label"])
    return hits, norm_hits


def test_scores_are_lm_evals_own_run_of_the_saved_model(tmp_path, task_dir, tokenizer):
    saved = tmp_path / "model"
    planted_model().save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    # both score the saved weights (the planted Identity activation of block 1 is not saved: GPT-2's config has one)
    ours = harness_scores(AutoModelForCausalLM.from_pretrained(saved).eval(), tokenizer, TASK, task_dir=task_dir)
    theirs = simple_evaluate(
        # the tiny tokenizer has no BOS or EOS, without which lm_eval fails: harness_scores gives HFLM its pad token
        model="hf", model_args=f"pretrained={saved},prefix_token_id={tokenizer.pad_token_id}", device="cpu",
        tasks=[TASK], task_manager=TaskManager(include_path=str(task_dir), include_defaults=False), batch_size=8,
        num_fewshot=0, log_samples=False, random_seed=0, numpy_random_seed=0, torch_random_seed=0,
        fewshot_random_seed=0,
    )  # fmt: skip
    row = theirs["results"][TASK]
    table = ours.table().set_index("metric")
    assert list(table.index) == ["acc", "acc_norm"] and (table.n == len(ITEMS)).all()
    assert table.loc["acc", "value"] == row["acc,none"] and table.loc["acc", "stderr"] == row["acc_stderr,none"]
    assert table.loc["acc_norm", "value"] == row["acc_norm,none"]
    assert table.loc["acc_norm", "stderr"] == row["acc_norm_stderr,none"]
    assert str(theirs["versions"][TASK]) == "1.0" and (table.version == "1.0").all()


def test_accuracy_is_the_share_of_items_whose_likeliest_choice_is_the_label(model, tokenizer, task_dir):
    hits, norm_hits = by_hand(model, tokenizer, ITEMS)
    table = harness_scores(model, tokenizer, TASK, task_dir=task_dir).table().set_index("metric")
    assert table.loc["acc", "value"] == sum(hits) / len(hits)
    assert table.loc["acc_norm", "value"] == sum(norm_hits) / len(norm_hits)
    assert 0 < sum(hits) < len(hits) and hits != norm_hits  # neither all nor none, and the two metrics differ


def test_a_limit_scores_the_first_items_only_and_every_request_advances_one_bar(model, tokenizer, task_dir, capfd):
    hits, _ = by_hand(model, tokenizer, ITEMS[:7])
    table = harness_scores(model, tokenizer, TASK, task_dir=task_dir, limit=7, progress=True).table()
    assert (table.n == 7).all() and table.value[table.metric == "acc"].item() == sum(hits) / 7
    err = capfd.readouterr().err
    assert "task requests: 21/21 request" in err and "Running loglikelihood requests" not in err  # 7 items, 3 choices


def test_tasks_checked_once_are_scored_as_the_names_are_without_a_model(model, tokenizer, task_dir, monkeypatch):
    checked = check_tasks(TASK, task_dir)
    assert checked.names == (TASK,) and [t for t, _ in checked.leaves[TASK]] == [TASK]
    monkeypatch.setattr(harness, "check_tasks", None)  # the checked tasks are used as they are, not looked up again
    again = harness_scores(model, tokenizer, checked, limit=5).table()
    monkeypatch.undo()
    assert again.equals(harness_scores(model, tokenizer, TASK, task_dir=task_dir, limit=5).table())


def test_the_record_holds_the_versions_and_settings_and_is_json(model, tokenizer, tmp_path):
    tasks = write_task(tmp_path / "tasks", metadata="{version: 2.5}")
    result = harness_scores(model, tokenizer, TASK, task_dir=tasks, limit=1, batch_size=2, seed=3)
    record = json.loads(json.dumps(result.record()))
    assert record["lm_eval"] == metadata.version("lm_eval") == "0.4.13"
    assert record["settings"] == {"num_fewshot": 0, "limit": 1, "batch_size": 2, "seed": 3}
    (task,) = record["tasks"]
    assert task["task"] == TASK and task["version"] == "2.5" and task["n"] == 1
    assert set(task["metrics"]) == {"acc", "acc_norm"} and task["metrics"]["acc"]["stderr"] is None  # one item
    assert result.table().stderr.isna().all()


def test_a_group_is_reported_as_its_aggregate_and_a_tag_as_its_tasks(model, tokenizer, tmp_path):
    tasks = write_task(write_task(tmp_path / "tasks"), "my_other_task", tag="my_tag")
    (tasks / "group.yaml").write_text(
        "group: my_group\ntask: [my_task, my_other_task]\naggregate_metric_list: [{metric: acc, weight_by_size: true}]"
    )
    group = harness_scores(model, tokenizer, "my_group", task_dir=tasks, limit=5).table()
    alone = harness_scores(model, tokenizer, "my_task", task_dir=tasks, limit=5).table()
    acc = alone.value[alone.metric == "acc"].item()
    assert group[["task", "metric", "n"]].values.tolist() == [["my_group", "acc", 10]] and group.value.item() == acc
    tagged = harness_scores(model, tokenizer, "my_tag", task_dir=tasks, limit=5).table()
    assert set(tagged.task) == {"my_other_task"}
    with pytest.raises(LinrecError, match=r"more than once.*my_other_task \(in my_group, my_tag\)"):
        harness_scores(model, tokenizer, "my_group,my_tag", task_dir=tasks)


def test_an_unknown_task_is_refused_with_the_names_closest_to_it(untouchable, tokenizer, task_dir, local_index_only):
    with pytest.raises(LinrecError, match=r"(?s)unknown task 'my_tsak' \(did you mean my_task\?\).*dataset_path: json"):
        harness_scores(untouchable, tokenizer, "my_tsak", task_dir=task_dir)


def test_every_task_whose_data_cannot_be_read_is_named_in_one_error(untouchable, tokenizer, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(harness, "hub_reachable", lambda: False)
    tasks = write_task(tmp_path / "tasks", "lost", data=str(tmp_path / "nowhere.jsonl"))
    write_task(tasks, "remote", dataset_path="someone/remote_set")
    write_task(tasks, "cached", dataset_path="someone/CachedSet", dataset_name="main")
    (datasets.config.HF_DATASETS_CACHE / "someone___cached_set" / "main" / "0.0.0" / "abc").mkdir(parents=True)
    with pytest.raises(LinrecError) as raised:
        harness_scores(untouchable, tokenizer, "lost,remote,cached", task_dir=tasks)
    message = str(raised.value)
    assert message.startswith("the data of 2 task(s) cannot be read here: the hub cannot be reached")
    assert f"- lost: no data file {tmp_path / 'nowhere.jsonl'}" in message
    assert "- remote: data on the Hugging Face hub (someone/remote_set)" in message and "cached:" not in message
    assert "dataset_path: json" in message and "include:" in message


def test_the_hub_is_not_asked_when_offline_is_set_nor_when_no_task_needs_it(
    untouchable, tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(harness, "hub_reachable", lambda: pytest.fail("asked the hub"))
    tasks = write_task(tmp_path / "tasks", "remote", dataset_path="someone/remote_set")
    with pytest.raises(LinrecError, match="HF_DATASETS_OFFLINE / HF_HUB_OFFLINE forbid the hub"):
        harness_scores(untouchable, tokenizer, "remote", task_dir=tasks)
    write_task(tasks, "lost", data=str(tmp_path / "nowhere.jsonl"))
    with pytest.raises(LinrecError, match=r"cannot be read here:\n- lost: no data file"):
        harness_scores(untouchable, tokenizer, "lost", task_dir=tasks)


@pytest.mark.parametrize(
    ("options", "message"),
    [({"tasks": "piqa,humaneval"}, "humaneval: scored by linrec itself"),
     ({"limit": 0}, "limit must be an integer of at least 1; got 0"),
     ({"batch_size": 2.0}, "batch_size must be an integer of at least 1"),
     ({"num_fewshot": -1}, "num_fewshot must be an integer of at least 0"),
     ({"task_dir": "/no/such/dir"}, "task_dir '/no/such/dir' is not a directory")],
)  # fmt: skip
def test_settings_that_cannot_work_are_refused_first(untouchable, tokenizer, options, message):
    with pytest.raises(LinrecError, match=message):
        harness_scores(untouchable, tokenizer, **{"tasks": "piqa", **options})


def test_a_model_that_cannot_be_scored_is_refused(tokenizer, task_dir):
    from conftest import tiny_model

    with pytest.raises(LinrecError, match="causal language model with its head; this model's type is 'bert'"):
        harness_scores(tiny_model("bert"), tokenizer, TASK, task_dir=task_dir)
    with pytest.raises(LinrecError, match="training mode"):
        harness_scores(planted_model().train(), tokenizer, TASK, task_dir=task_dir)


@pytest.mark.slow
def test_lm_evals_own_tasks_are_found_and_refused_offline_before_the_model(untouchable, tokenizer, monkeypatch):
    monkeypatch.setattr(harness, "hub_reachable", lambda: False)  # each call indexes lm_eval's tasks: 10 to 20 s
    with pytest.raises(LinrecError, match=r"unknown task 'piqaa' \(did you mean piqa"):
        harness_scores(untouchable, tokenizer, "piqaa")
    with pytest.raises(LinrecError, match="the data of 5 task") as raised:
        harness_scores(untouchable, tokenizer, "zero-shot")
    assert all(
        f"- {task}: data on the Hugging Face hub" in str(raised.value) for task in harness.parse_tasks("zero-shot")
    )


def test_an_answer_longer_than_the_context_is_refused_before_the_model_runs(untouchable, tokenizer, tmp_path):
    """The planted model reads 64 positions; an answer of some hundred tokens is named, not a bare assertion of
    lm_eval's halfway through."""
    long = [{**item, "choices": [" ".join(WORDS * 6), *item["choices"][1:]]} for item in ITEMS[:4]]
    data = tmp_path / "long.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in long))
    tasks = write_task(tmp_path / "tasks", data=str(data))
    with pytest.raises(LinrecError, match=r"1 of 3 answers .* more tokens than the model's context of 64"):
        harness_scores(untouchable, tokenizer, TASK, task_dir=tasks, limit=1)


def test_without_progress_the_harness_draws_no_bars_and_leaves_them_as_they_were(model, tokenizer, tmp_path, capfd):
    """An executed chapter once kept the harness's bars over each task's requests and datasets' over its files as
    stray lines: without ``progress`` nothing is drawn, and both are restored after."""
    import lm_eval.api.task

    build = lm_eval.api.task.tqdm
    tasks = write_task(tmp_path / "fresh")  # its data not yet in this test's datasets cache: datasets reads it here
    capfd.readouterr()
    harness_scores(model, tokenizer, TASK, task_dir=tasks, limit=3)
    err = capfd.readouterr().err
    assert "examples/s" not in err and "it/s" not in err, err
    assert lm_eval.api.task.tqdm is build and datasets.is_progress_bar_enabled()
