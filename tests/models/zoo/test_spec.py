"""linrec.models.zoo.spec: What the zoo is: its models (:class:`ZooEntry`), the zoos of the profiles (:data:`ZOOS`) and
their configs."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from linrec import LinrecError
from linrec.models.zoo import (
    FAMILIES,
    ZOOS,
    ZooEntry,
    get_zoo,
    zoo_model_path,
)


def test_zoo_configurations_meet_the_brief():
    offline = ZOOS["offline"]
    assert 4000 <= offline.vocab_size <= 8192
    assert {e.family for e in offline.entries} == set(FAMILIES)
    shapes = {(e.width, e.depth, e.heads, e.ffn, e.seq_len) for e in offline.entries}
    assert len(shapes) == 1 and next(iter(shapes))[1] >= 6
    seeds = Counter(e.family for e in offline.entries)
    assert max(seeds.values()) >= 2  # a second seed of one family
    assert all(len(e.checkpoints) >= 5 for e in offline.entries)  # init, >= 3 intermediate, final
    assert [e.name for e in ZOOS["smoke"].entries] == [e.name for e in offline.entries]
    with pytest.raises(LinrecError, match="gpt2, gpt_neox, llama"):
        dataclasses.replace(offline.entries[0], family="bert")
    with pytest.raises(LinrecError, match="checkpoints"):
        dataclasses.replace(offline.entries[0], checkpoints=(0, 10))


def test_names_and_checkpoints_are_checked(built):
    spec, _ = built
    entry = spec.entries[0]
    assert zoo_model_path(spec, entry.name, "init").name == "step0"
    assert zoo_model_path(spec, entry.name, "final").name == f"step{entry.steps}"
    with pytest.raises(LinrecError, match="step0, step6, step12"):
        zoo_model_path(spec, entry.name, "step3")
    with pytest.raises(LinrecError, match="zoo-gpt2, zoo-neox"):
        spec.entry("zoo-bert")
    with pytest.raises(LinrecError, match="offline, smoke"):
        get_zoo("paper")


def test_entry_validation():
    with pytest.raises(LinrecError, match="divisible"):
        ZooEntry(
            "x",
            "gpt2",
            width=30,
            depth=1,
            heads=4,
            ffn=8,
            seed=0,
            steps=2,
            batch_size=1,
            seq_len=8,
            lr=1e-3,
            warmup_steps=1,
            checkpoints=(0, 2),
        )
