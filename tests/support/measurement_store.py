"""A cache of measurements of the smoke and shapes profiles, for the experiment layer's tests."""

from __future__ import annotations

import pytest
import torch

from conftest import measurement_info
from linrec.core.sample import Rows
from linrec.data.corpus import Corpus
from linrec.experiment import measurement as m
from linrec.experiment.profiles import get_profile

SMOKE, SHAPES = get_profile("smoke"), get_profile("shapes")


def _known(blocks: int = 3, width: int = 6, n: int = 400) -> m.ProfileMeasurement:
    g = torch.Generator().manual_seed(0)
    samples = {}
    for b in range(blocks):
        x = torch.randn(n, width, generator=g)
        samples[b] = Rows(
            x, x @ torch.randn(width, width, generator=g) + torch.randn(n, width, generator=g) ** 2, torch.arange(n) % 5
        )
    return m.ProfileMeasurement.assembled(
        measurement_info("zoo-gpt2", corpus="toy"), {b: r.fold_moments(5) for b, r in samples.items()}, samples
    )


@pytest.fixture
def store(tmp_path, monkeypatch):
    """measurement() with its capture replaced by a known one (narrowed to the keep asked for); (known, capture log)."""
    known = _known()
    captures: list[str] = []

    def capture(profile, model, checkpoint, text, keep, revision, progress) -> m.ProfileMeasurement:
        captures.append(keep)
        info = m.MeasurementInfo(**{**m.asdict(known.info), "keep": keep, "checkpoint": checkpoint})
        return m.ProfileMeasurement.assembled(info, known.moments, known.samples if keep == "samples" else {})

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    monkeypatch.setattr(m, "_capture", capture)
    monkeypatch.setattr(m, "profile_corpus", lambda p, name: Corpus("toy", "prose", "fit", "eval", "test"))
    monkeypatch.setattr(m, "zoo_model_path", lambda zoo, model, checkpoint: tmp_path / "weights")
    return known, captures
