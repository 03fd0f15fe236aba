"""linrec.models.zoo.train: Training one zoo model: the data sampler, the held-out loss, the schedule and the training
loop."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from transformers import AutoTokenizer

from linrec.models.zoo import (
    ZOOS,
    TrainJob,
    ZooData,
    prepare_zoo,
    train_entry,
)


@pytest.mark.slow
def test_smoke_model_trained_twice_gives_the_same_loss(built, tmp_path):
    spec = ZOOS["smoke"]
    layout = prepare_zoo(spec, progress=False)  # the tiny zoo's tokenizer and data, reused from the cache
    entry = spec.entry("zoo-gpt2")
    runs = [
        train_entry(TrainJob(spec, entry, layout.tokenizer, layout.data, tmp_path / run, layout.corpora))
        for run in ("a", "b")
    ]
    a, b = (r["checkpoints"][-1]["eval_loss"] for r in runs)
    for corpus in spec.eval_corpora:
        assert abs(a[corpus] - b[corpus]) < 1e-6
    assert np.allclose(runs[0]["train_loss"], runs[1]["train_loss"], rtol=0, atol=1e-6)
    init = runs[0]["checkpoints"][0]["eval_loss"]
    assert all(a[c] < init[c] - 0.5 for c in spec.eval_corpora)  # it learned something
    assert all(
        init[c] == pytest.approx(math.log(len(AutoTokenizer.from_pretrained(str(layout.tokenizer)))), abs=0.3)
        for c in spec.eval_corpora
    )


def test_unigram_baseline_matches_direct_counting(built):
    spec, _ = built
    data = ZooData(prepare_zoo(spec, progress=False).data, spec.train_mix, spec.eval_corpora)
    vocab = ZOOS["smoke"].vocab_size
    windows = data.windows("stdlib-code", 64, 4096)
    weights = np.array([w for _, w in spec.train_mix]) / sum(w for _, w in spec.train_mix)
    probs = np.zeros(vocab)
    for w, stream in zip(weights, data.streams):
        counts = Counter(stream.tolist())
        probs += w * np.array([counts[t] + 1 for t in range(vocab)]) / (stream.numel() + vocab)
    expected = -np.mean([math.log(probs[t]) for t in windows[:, 1:].reshape(-1).tolist()])
    assert data.unigram_loss(windows, vocab) == pytest.approx(expected, rel=1e-9)


def test_train_job_travels_as_json(tmp_path):
    spec = ZOOS["smoke"]
    job = TrainJob(
        spec,
        spec.entries[1],
        tmp_path / "tok",
        tmp_path / "data.safetensors",
        tmp_path / "out",
        {"stdlib-prose": "ab" * 32},
        force=True,
    )
    text = job.to_json()
    assert json.loads(text)["entry"]["name"] == "zoo-neox"  # plain JSON: nothing to unpickle
    assert TrainJob.from_json(text) == job
