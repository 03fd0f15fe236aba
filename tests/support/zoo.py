"""A tiny zoo built once per test session, for the zoo, its command and its tokenizer."""

from __future__ import annotations

import dataclasses

import pytest

from linrec.data.offline_corpora import offline_corpus
from linrec.models.zoo import (
    ZOOS,
    build_zoo,
)


def tiny_zoo(steps: int = 12, name: str = "tiny"):
    """The smoke zoo (same tokenizer and data) with a few steps per model, for fast tests."""
    smoke = ZOOS["smoke"]
    entries = tuple(
        dataclasses.replace(e, steps=steps, warmup_steps=2, checkpoints=(0, steps // 2, steps)) for e in smoke.entries
    )
    return dataclasses.replace(smoke, name=name, entries=entries)


@pytest.fixture(scope="session")
def built_zoo(tmp_path_factory):
    """A tiny zoo built once in this process into a fresh cache: (cache, spec, table)."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LINREC_CACHE", str(cache))
        offline_corpus.cache_clear()  # corpora read earlier in this process were cached elsewhere: write them here
        spec = tiny_zoo()
        table = build_zoo(spec, workers=1, progress=False)
    offline_corpus.cache_clear()
    return cache, spec, table


@pytest.fixture(scope="module")
def built(built_zoo):
    """The tiny zoo's cache as this module's ``$LINREC_CACHE``: (spec, table)."""
    cache, spec, table = built_zoo
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LINREC_CACHE", str(cache))
        offline_corpus.cache_clear()
        yield spec, table
