"""Capture once, analyse many: the cached measurement of one (profile, model, checkpoint, corpus).

Chapters share one forward pass per (profile, model, checkpoint, corpus): :func:`measurement`
captures the per-fold float64 moments and a seeded row sample (for the probes that train by
gradient) and stores them under the cache directory, keyed by everything that determines them
(the profile's settings, the model and checkpoint, the corpus hash and the format). A second call,
from this chapter or another, loads them instead of running the model. Entries are written
atomically, so an interrupted capture is simply redone.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from linrec.cache import build_entry, cache_dir, cache_key
from linrec.core.fit import DEFAULT_RCOND, AffineFit, fit_affine, recoverability, report_table
from linrec.core.moments import BlockMoments, load_moments, merge_folds, save_moments
from linrec.core.sample import Rows, capture_with_sample
from linrec.data.corpora import Corpus
from linrec.experiment.profiles import Profile, get_profile
from linrec.experiment.resolve import load_profile_model, profile_batches, profile_corpus
from linrec.models.zoo import zoo_model_path

FORMAT = 1


@dataclass(frozen=True)
class MeasurementInfo:
    """What a measurement is of and how it was taken: stored beside it as ``info.json``."""

    profile: str
    model: str
    checkpoint: str
    corpus: str
    corpus_sha256: str
    rows: int
    seq_len: int
    folds: int
    seed: int
    sample_rows: int
    dtype: str
    device: str
    capture_s: float
    torch: str

    @property
    def rows_per_fold(self) -> int:
        """Rows in each held-out fold, roughly (folds are whole sequences)."""
        return self.rows // self.folds


@dataclass
class Measurement:
    """Moments and row samples of every FFN block of one model on one corpus, with provenance."""

    info: MeasurementInfo
    moments: BlockMoments
    samples: dict[int, Rows]

    @property
    def blocks(self) -> list[int]:
        return sorted(self.moments)

    def table(self, rcond: float = DEFAULT_RCOND) -> pd.DataFrame:
        """The k-fold recoverability table (:func:`linrec.core.fit.report_table`), labelled with model and corpus."""
        table = report_table(recoverability(self.moments, rcond))
        for column in ("model", "checkpoint", "corpus"):
            table.insert(0, column, getattr(self.info, column))
        return table

    def fits(self, rcond: float = DEFAULT_RCOND) -> dict[int, AffineFit]:
        """The closed-form map of each block, fitted on all captured rows (for surgery)."""
        return {b: fit_affine(merge_folds(self.moments[b]), rcond) for b in self.blocks}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def measurement(
    profile: str | Profile,
    model: str,
    *,
    checkpoint: str = "final",
    corpus: str | None = None,
    progress: bool = True,
    refresh: bool = False,
) -> Measurement:
    """The cached measurement of ``model`` at ``checkpoint`` on ``corpus`` (the profile's main one by default).

    A damaged entry is reported and captured again; of two processes that want the same missing
    measurement, one captures it and the other waits and loads it (:func:`linrec.cache.build_entry`).
    """
    profile = get_profile(profile)
    text = profile_corpus(profile, corpus)
    weights = str(zoo_model_path(profile.zoo, model, checkpoint)) if profile.zoo is not None else None
    key = cache_key(
        {
            "format": FORMAT,
            "profile": repr(profile),
            "model": model,
            "checkpoint": checkpoint,
            "weights": weights,
            "corpus": text.sha256,
        }
    )  # a zoo path carries its training key
    path = (
        cache_dir()
        / "measurements"
        / f"{_slug(profile.name)}-{_slug(model)}-{_slug(checkpoint)}-{_slug(text.name)}-{key}"
    )
    captured: list[Measurement] = []

    def capture(tmp: Path) -> None:
        captured.append(_capture(profile, model, checkpoint, text, progress))
        _save(captured[0], tmp)

    if build_entry(path, capture, refresh=refresh):
        return captured[0]
    return _load(path)


def _capture(profile: Profile, model: str, checkpoint: str, text: Corpus, progress: bool) -> Measurement:
    start = time.perf_counter()
    net, tokenizer = load_profile_model(profile, model, checkpoint, progress=progress)
    batches = profile_batches(profile, tokenizer, text, model=net)
    moments, sample = capture_with_sample(
        net, batches, profile.probe.sample_rows, folds=profile.folds, seed=profile.seeds[0], progress=progress
    )
    info = MeasurementInfo(
        profile=profile.name,
        model=model,
        checkpoint=checkpoint,
        corpus=text.name,
        corpus_sha256=text.sha256,
        rows=batches.n_rows,
        seq_len=profile.seq_len,
        folds=profile.folds,
        seed=profile.seeds[0],
        sample_rows=profile.probe.sample_rows,
        dtype=str(next(net.parameters()).dtype),
        device=str(next(net.parameters()).device),
        capture_s=time.perf_counter() - start,
        torch=torch.__version__,
    )
    return Measurement(info, moments, {b: sample.rows(b) for b in sample.blocks})


def _save(result: Measurement, directory: Path) -> None:
    save_moments(result.moments, directory / "moments.safetensors")
    save_file(
        {f"{b}.{k}": getattr(r, k).contiguous() for b, r in result.samples.items() for k in ("x", "y", "fold")},
        str(directory / "samples.safetensors"),
    )
    (directory / "info.json").write_text(json.dumps(asdict(result.info), indent=1))


def _load(path: Path) -> Measurement:
    info = MeasurementInfo(**json.loads((path / "info.json").read_text()))
    tensors = load_file(str(path / "samples.safetensors"))
    blocks = sorted({int(k.split(".")[0]) for k in tensors})
    samples = {b: Rows(tensors[f"{b}.x"], tensors[f"{b}.y"], tensors[f"{b}.fold"]) for b in blocks}
    return Measurement(info, load_moments(path / "moments.safetensors"), samples)
