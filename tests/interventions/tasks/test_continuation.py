"""linrec.interventions.tasks.continuation: an offline multiple-choice task in the harness's format."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from linrec import LinrecError
from linrec.interventions.tasks.continuation import continuation_items, write_choice_task


def _text(paragraphs: int = 60) -> str:
    return "\n\n".join(
        " ".join(f"Paragraph {p} says thing number {s} about the matter at hand." for s in range(6))
        for p in range(paragraphs)
    )


def test_each_item_holds_the_passage_that_followed_its_context_and_others_from_elsewhere():
    text = _text()
    items = continuation_items(text, items=100, seed=3)
    for item in items:
        answer = item["choices"][item["label"]]
        assert f"{item['context']} {answer}" in text  # the true continuation, joined as the text joins them
        paragraph = answer.split(" says")[0]
        assert item["context"].startswith(paragraph) and len(item["choices"]) == 4
        assert all(not c.startswith(paragraph + " ") for i, c in enumerate(item["choices"]) if i != item["label"])
    labels = Counter(item["label"] for item in items)
    assert set(labels) == {0, 1, 2, 3} and max(labels.values()) < 45  # drawn, not always one place
    assert continuation_items(text, items=100, seed=3) == items and continuation_items(text, items=100) != items


def test_lines_keep_their_indentation_and_join_with_a_line_break():
    code = "\n\n".join(
        "\n".join([f"def function_{f}(argument):", *(f"    value_{i} = argument * {i} + {f}" for i in range(5))])
        for f in range(40)
    )
    items = continuation_items(code, unit="line", items=30, context=2)
    for item in items:
        assert item["context"] + "\n" + item["choices"][item["label"]] in code
        assert all(c.startswith("    ") or c.startswith("def ") for c in item["choices"])


def test_too_short_a_text_or_bad_settings_are_refused_before_any_work():
    with pytest.raises(LinrecError, match="fewer than the 500 asked for"):
        continuation_items(_text(10), items=500)
    with pytest.raises(LinrecError, match="unknown unit 'word'"):
        continuation_items(_text(), unit="word")
    with pytest.raises(LinrecError, match="choices >= 2"):
        continuation_items(_text(), choices=1)


def test_the_task_is_written_as_a_harness_yaml_beside_its_data(tmp_path):
    items = continuation_items(_text(), items=10)
    path = write_choice_task(tmp_path / "tasks", "linrec_demo", items)
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert config["task"] == "linrec_demo" and config["dataset_path"] == "json"
    data = config["dataset_kwargs"]["data_files"]["test"]
    assert [json.loads(line) for line in open(data, encoding="utf-8")] == items
    assert config["target_delimiter"] == " " and {m["metric"] for m in config["metric_list"]} == {"acc", "acc_norm"}
    with pytest.raises(LinrecError, match="lower-case letters"):
        write_choice_task(tmp_path, "Bad Name", items)
