"""linrec.experiment.sizes: How many parameters a profile's model has: the x axis of the scale chapter, counted once and
cached."""

from __future__ import annotations

from conftest import tiny_model
from linrec.experiment import sizes
from linrec.experiment.profiles import PROFILES


def test_a_parameter_count_loads_the_model_once_and_counts_tied_weights_once(monkeypatch):
    loads = []

    def load(profile, model, checkpoint="final", progress=False):
        loads.append(model)
        return tiny_model("gpt2"), None  # GPT-2 ties its embedding and its head

    monkeypatch.setattr(sizes, "load_profile_model", load)
    net = tiny_model("gpt2")
    expected = sum(p.numel() for p in net.parameters())
    assert net.lm_head.weight is net.transformer.wte.weight
    profile = PROFILES["paper"]
    assert sizes.parameter_count(profile, "openai-community/gpt2") == expected
    assert sizes.parameter_count(profile, "openai-community/gpt2") == expected and len(loads) == 1  # cached
