"""Shared by the tests of the studies that read chapter 11's costs (gating, tasks, pruning): a tiny profile of local
texts, and its model loaded without the hub or the zoo."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import linrec.experiment.measurement as measurements
import linrec.experiment.pruning as pruning
import linrec.experiment.swaps as swaps
from linrec.experiment.profiles import Profile

TINY = Profile(
    name="tiny",
    description="a test profile",
    models=("affine",),
    corpora=("stdlib-prose",),
    eval_corpus="stdlib-prose",
    rows_per_block=1024,
    seq_len=32,
    folds=4,
    seeds=(0,),
    batch_size=16,
    eval_tokens=512,
    device="cpu",
)
"""One model of 1,024 rows a block on the standard library's prose, 512 tokens scored: a study in seconds."""


def tiny_profile(**changes) -> Profile:
    """:data:`TINY` with ``changes`` (models, corpora, probe, ...)."""
    return dataclasses.replace(TINY, **changes)


def load_instead(study: ModuleType, model, tokenizer, monkeypatch, cache) -> list[str]:
    """Every profile model ``study`` (a module of linrec.experiment), chapter 11's costs, the shared measurement and
    chapter 5's swaps load is ``model`` with ``tokenizer`` (no hub, no zoo), into the cache ``cache``; returns the
    names ``study`` itself loads, as it loads them."""
    calls: list[str] = []

    def loader(record: bool):
        def load(profile, name, checkpoint, progress, before_weights=None):
            calls.extend([name] if record else [])
            if before_weights is not None:
                before_weights(model.config, tokenizer)
            return model.eval(), tokenizer

        return load

    monkeypatch.setenv("LINREC_CACHE", str(cache))
    weights = lambda profile, name, checkpoint: f"planted {name}"  # noqa: E731
    for module in dict.fromkeys((study, pruning, measurements, swaps)):
        monkeypatch.setattr(module, "load_profile_model", loader(module is study))
    for module in dict.fromkeys((study, pruning, measurements)):
        monkeypatch.setattr(module, "profile_weights_id", weights)
    monkeypatch.setattr(measurements, "model_revision", lambda profile, name, checkpoint: None)
    return calls
