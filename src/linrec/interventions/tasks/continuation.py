"""A zero-shot task that runs offline: which of four passages continues a text, written in lm-evaluation-harness's
own task format so that the harness scores it as it scores PIQA or HellaSwag.

The benchmarks the pruning papers report (PIQA, WinoGrande, HellaSwag, ARC) are hub datasets, which an offline build
cannot read. This task is built from a text the build has (a held-out split of a packaged corpus): each item is a few
consecutive sentences (or lines of code) of the text, the one that followed them and three others of about its length
drawn from elsewhere in the text (another paragraph, or one more than ten passages away); the model is right when it
gives the true one the highest log-likelihood (``acc``), or per byte (``acc_norm``, the harness's length normalisation).
It asks what a language model must do to read, and nothing of the world knowledge those benchmarks ask; it is no
stand-in for their numbers, only a second reading of ability beside perplexity that needs no network.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from linrec.errors import LinrecError

UNITS = {"sentence": " ", "line": "\n"}
"""What an item's passages are, each with what joins two of them (the harness's ``target_delimiter``)."""

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_SHORTEST, _LONGEST = 20, 240  # characters of a passage that can be an answer: no fragments, no walls of text
_APART = 10  # passages between an answer and a wrong answer drawn from its own paragraph


def _units(text: str, unit: str) -> list[list[str]]:
    """The text's paragraphs (blank-line separated), each as its passages: sentences, or non-blank lines."""
    paragraphs = re.split(r"\n\s*\n", text)
    if unit == "sentence":
        return [[s.strip() for s in _SENTENCE_END.split(p.replace("\n", " ")) if s.strip()] for p in paragraphs]
    return [[line.rstrip() for line in p.splitlines() if line.strip()] for p in paragraphs]


def continuation_items(
    text: str, *, unit: str = "sentence", items: int = 200, context: int = 2, choices: int = 4, seed: int = 0
) -> list[dict]:
    """``items`` multiple-choice items cut from ``text``: ``context`` (the ``context`` passages before the answer,
    joined by the unit's delimiter), ``choices`` (``choices`` passages, one of them the passage that followed) and
    ``label`` (its index, drawn uniformly); seeded, in the text's order."""
    if unit not in UNITS:
        raise LinrecError(f"unknown unit '{unit}'; choose one of {', '.join(UNITS)}")
    if items < 1 or context < 1 or choices < 2:
        raise LinrecError(f"need items >= 1, context >= 1 and choices >= 2; got {items}, {context}, {choices}")
    paragraphs = _units(text, unit)
    fits = lambda s: _SHORTEST <= len(s) <= _LONGEST  # noqa: E731
    places = [(p, i) for p, units in enumerate(paragraphs) for i in range(context, len(units)) if fits(units[i])]
    pool = sorted({(len(s), s, p, i) for p, units in enumerate(paragraphs) for i, s in enumerate(units) if fits(s)})
    if len(places) < items:
        raise LinrecError(
            f"the text holds {len(places)} places for an item ({unit}s of {_SHORTEST}-{_LONGEST} characters after "
            f"{context} more in one paragraph), fewer than the {items} asked for; give a longer text or fewer items"
        )
    rng = random.Random(seed)
    out = []
    for p, i in sorted(rng.sample(places, items)):
        answer = paragraphs[p][i]
        alike = [
            s
            for n, s, q, j in pool
            if (q != p or abs(j - i) > _APART) and s != answer and 0.5 * len(answer) <= n <= 2 * len(answer)
        ]
        if len(alike) < choices - 1:
            raise LinrecError(f"the text has too few {unit}s of a like length to draw {choices - 1} wrong answers from")
        options = rng.sample(alike, choices - 1)
        label = rng.randrange(choices)
        options.insert(label, answer)
        out.append({"context": UNITS[unit].join(paragraphs[p][i - context : i]), "choices": options, "label": label})
    return out


def write_choice_task(directory: str | Path, name: str, items: list[dict], unit: str = "sentence") -> Path:
    """Write ``items`` (:func:`continuation_items`) as the harness task ``name``: ``name.jsonl`` and ``name.yaml``
    (``dataset_path: json``) in ``directory``, which ``--task-dir`` / ``task_dir=`` then reads; the YAML's path."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise LinrecError(f"a task name is lower-case letters, digits and underscores; got {name!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / f"{name}.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    config = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data.resolve())}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "context",
        "doc_to_choice": "choices",
        "doc_to_target": "label",
        "target_delimiter": UNITS[unit],
        "metric_list": [
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        ],
        "metadata": {"version": 1.0},
    }
    path = directory / f"{name}.yaml"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")  # JSON is YAML
    return path
