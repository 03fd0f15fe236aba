"""What ran where: the provenance line every chapter ends with, so each figure can be traced to a run.

:func:`provenance` names the profile, models, corpus and its hash, rows, device, library versions and wall
time (counted from the last :func:`restart_clock`, which a chapter's start calls), and, for cached
measurements, the commits hub weights and corpora resolved to and what each window starts with.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from linrec.experiment.measurement import MeasurementInfo, used_measurements
from linrec.models.loading import pick_device
from linrec.models.packaged import PACKAGED
from linrec.versions import LIBRARIES, versions

_LIBRARIES = ("python", *LIBRARIES, "numpy", "pandas")
"""What a chapter's provenance line names: the interpreter, the libraries a measurement records, numpy and pandas."""
_clock = {"start": time.perf_counter()}


def on_colab() -> bool:
    """Whether this runs inside a Google Colab kernel."""
    return "google.colab" in sys.modules


def restart_clock() -> None:
    """Count a chapter's wall time from now (its start calls this)."""
    _clock["start"] = time.perf_counter()


def digest(data: str | bytes | torch.Tensor | np.ndarray) -> str:
    """A short, stable hash of a text, bytes or an array's values (its dtype and shape included)."""
    if isinstance(data, str):
        raw = data.encode("utf-8")
    elif isinstance(data, bytes):
        raw = data
    else:
        array = data.detach().cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)
        array = np.ascontiguousarray(array)
        raw = f"{array.dtype.str}{array.shape}".encode() + array.tobytes()
    return hashlib.sha256(raw).hexdigest()[:12]


@dataclass(frozen=True)
class ChapterProvenance:
    """What a chapter ran: printed as one line, shown in a notebook as a wrapped paragraph, kept as fields for
    tables."""

    profile: str
    device: str
    versions: dict[str, str]
    models: tuple[str, ...] = ()
    corpus: str | None = None
    corpus_hash: str | None = None
    rows: int | None = None
    wall_s: float | None = None
    colab: bool = field(default_factory=on_colab)
    inputs: tuple[str, ...] = ()  # what the measurements ran on: resolved commits, what each window starts with

    def __str__(self) -> str:
        return " | ".join(self.parts())

    def _repr_markdown_(self) -> str:
        """As the last expression of a notebook cell: a wrapped paragraph, where a printed line would be clipped."""
        return "**Provenance.** " + "; ".join(self.parts()) + "."

    def parts(self) -> list[str]:
        """The provenance, item by item: profile, models, corpus, rows, inputs, device, versions, wall time."""
        parts = [f"profile {self.profile}"]
        if self.models:
            parts.append("models " + ", ".join(self.models))
        if self.corpus is not None:
            parts.append(f"corpus {self.corpus}" + (f" (sha256 {self.corpus_hash})" if self.corpus_hash else ""))
        if self.rows is not None:
            parts.append(f"{self.rows:,} rows")
        parts.extend(self.inputs)
        parts.append(f"device {self.device}" + (" on Colab" if self.colab else ""))
        parts.append(" ".join(f"{k} {v}" for k, v in self.versions.items()))
        if self.wall_s is not None:
            parts.append(f"wall {self.wall_s:.1f} s")
        return parts


def _describe(device: torch.device) -> str:
    if device.type == "cuda" and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def provenance(profile: str, *, wall: bool = True) -> ChapterProvenance:
    """The provenance of this chapter's run so far, read from the measurements it used
    (:func:`~linrec.experiment.measurement.used_measurements`): models and checkpoints, corpora and their
    hashes, rows per block, the capture device (the default device when none was used), and the wall time
    since the last :func:`restart_clock`."""
    infos = used_measurements()
    checkpoints: dict[str, dict[str, None]] = {}
    for info in infos:
        checkpoints.setdefault(info.model, {})[info.checkpoint] = None
    models = tuple(_model_label(model, list(names)) for model, names in checkpoints.items())
    devices = list(dict.fromkeys(info.device for info in infos))
    rows = {info.rows for info in infos}
    return ChapterProvenance(
        profile=profile,
        device=_describe(torch.device(devices[0]) if len(devices) == 1 else pick_device()),
        versions=versions(_LIBRARIES),
        models=models,
        corpus=", ".join(dict.fromkeys(info.corpus for info in infos)) or None,
        corpus_hash=", ".join(dict.fromkeys(info.corpus_sha256[:12] for info in infos if info.corpus_sha256)) or None,
        rows=rows.pop() if len(rows) == 1 else None,
        wall_s=time.perf_counter() - _clock["start"] if wall else None,
        inputs=measured_inputs(infos),
    )


def _model_label(model: str, checkpoints: list[str]) -> str:
    if checkpoints == ["final"]:
        return model
    return f"{model} {checkpoints[0]}" if len(checkpoints) == 1 else f"{model} ({len(checkpoints)} checkpoints)"


def measured_inputs(infos: Sequence[MeasurementInfo]) -> tuple[str, ...]:
    """Provenance parts for measurements: the commits hub weights and corpora resolved to, the file hash of a
    packaged model's weights, and each model's first token of a window (its BOS policy), so that a rerun can
    tell whether it saw the same inputs."""
    commits = [
        f"{i.model}{'' if i.checkpoint == 'final' else ' ' + i.checkpoint}@{i.revision[:12]}"
        for i in infos
        if i.revision
    ]
    corpora = {i.corpus: i.corpus_source.rpartition("commit ")[2][:12] for i in infos if "commit " in i.corpus_source}
    packaged = [
        f"{i.model}@sha256:{i.weights.partition('sha256:')[2][:12]} ({PACKAGED[i.model].quantisation} GGUF from "
        f"{i.weights.partition(' ')[0]}, dequantised to float32)"
        for i in infos
        if i.model in PACKAGED and i.weights and i.checkpoint == "final"
    ]
    policies: dict[str, list[str]] = {}
    for model, bos in dict.fromkeys((i.model, i.bos) for i in infos):
        policies.setdefault(bos, []).append(model)
    parts = []
    if commits or packaged:
        parts.append("weights " + ", ".join(dict.fromkeys(commits + packaged)))
    if corpora:
        parts.append("data " + ", ".join(f"{c}@{commit}" for c, commit in corpora.items()))
    if policies:
        parts.append("windows start: " + "; ".join(f"{bos} ({', '.join(models)})" for bos, models in policies.items()))
    return tuple(parts)
