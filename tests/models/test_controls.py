"""linrec.models.controls: Weights with the learned structure taken out: the controls that tell a learned property from
an architectural one."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_model
from linrec.models.controls import apply_control, parse_control


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma3_text"])
def test_permuted_control_keeps_each_matrix_values_and_ties(family):
    trained = tiny_model(family)
    shuffled = apply_control(tiny_model(family), "permuted", seed=3)
    again = apply_control(tiny_model(family), "permuted", seed=3)
    for (name, before), (_, after), (_, repeat) in zip(
        trained.named_parameters(), shuffled.named_parameters(), again.named_parameters(), strict=True
    ):
        assert torch.equal(after, repeat), name  # seeded
        assert torch.equal(before.flatten().sort().values, after.flatten().sort().values), name  # same values
        assert torch.equal(before, after) == (before.dim() < 2), name  # matrices shuffled, vectors kept
    if shuffled.config.tie_word_embeddings:  # the head still reads the (shuffled) embedding matrix
        assert torch.equal(shuffled.get_input_embeddings().weight, shuffled.get_output_embeddings().weight)


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_init_control_is_a_seeded_fresh_model(family):
    trained = tiny_model(family, seed=5)
    first, second = (apply_control(trained, "init", seed=1) for _ in range(2))
    other = apply_control(trained, "init", seed=2)
    weight = lambda m: m.model.layers[0].mlp.up_proj.weight  # noqa: E731
    assert torch.equal(weight(first), weight(second)) and not torch.equal(weight(first), weight(other))
    assert not torch.equal(weight(first), weight(trained)) and not first.training
    assert type(first) is type(trained) and torch.isfinite(first(torch.arange(8)[None]).logits).all()
    assert parse_control("final") is None and parse_control("permuted@4") == ("permuted", 4)
