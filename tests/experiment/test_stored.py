"""linrec.experiment.stored: How a cache entry is read back: its tables from JSON that keeps every bit, and its moments
and row samples from disk one block at a time, never held."""

from __future__ import annotations

import gc

import pytest
import torch

from linrec.data.corpus import Corpus
from linrec.experiment import measurement as m
from support.measurement_store import SMOKE, _known


def _tensor_bytes(obj: object, seen: set[int] | None = None) -> int:
    """Bytes of every tensor reachable from ``obj`` through attributes and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    children = gc.get_referents(obj) if isinstance(obj, (dict, list, tuple, set)) else []
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = [vars(obj)]
    return sum(_tensor_bytes(c, seen) for c in children)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_a_handle_holds_no_tensors_after_use(store):
    known, _ = store
    assert _tensor_bytes(known) > 0  # the walk does find tensors where there are some
    lazy = m.measurement(SMOKE, "zoo-gpt2")
    lazy.table()
    lazy.fits()
    [lazy.samples[b] for b in lazy.samples]
    assert _tensor_bytes(lazy) == 0


@pytest.mark.slow
@pytest.mark.skipif(not __import__("pathlib").Path("/proc/self/statm").exists(), reason="needs /proc (Linux)")
def test_holding_many_measurements_costs_no_more_memory_than_one(tmp_path, monkeypatch):
    """Four 80 MB entries held at once, each read block by block: resident memory grows by less than one entry."""
    big = _known(blocks=4, width=400, n=3000)  # moments 4 blocks x 5 folds x 3 x 400^2 x 8 B = 77 MB
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    monkeypatch.setattr(m, "profile_corpus", lambda p, name: Corpus(name, "prose", name, "eval", "test"))
    monkeypatch.setattr(m, "zoo_model_path", lambda zoo, model, checkpoint: tmp_path / "weights")
    monkeypatch.setattr(m, "_capture", lambda *args: big)
    corpora = ["stdlib-prose", "stdlib-code", "unicode-records"]
    for c in corpora:
        m.measurement(SMOKE, "zoo-gpt2", corpus=c)
    entry = 4 * 5 * 3 * 400 * 400 * 8
    big = None  # the entries are on disk; drop the capture held here
    gc.collect()
    before = _rss()
    held = [m.measurement(SMOKE, "zoo-gpt2", corpus=c) for c in corpora]
    tables = [h.fits() for h in held]  # every block's moments read once
    gc.collect()
    assert len(tables) == 3 and _rss() - before < entry
