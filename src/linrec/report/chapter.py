"""What every chapter of the book calls first and last: which profile runs, and what ran where.

``start`` is a chapter's first call: it runs :func:`setup`, clears the chapter's ledger and returns
a :class:`Chapter`, through which the chapter records its headline numbers, states its verdict and
prints its provenance, without repeating its name and profile at every call.

``setup`` resolves the profile (an explicit name wins, e.g. the ``PROFILE`` papermill injects;
otherwise ``paper`` on Google Colab, where a GPU and the model hubs are at hand, and ``offline``
everywhere else), seeds torch and numpy, applies the book's plot style, restarts the chapter's wall
clock and prints a header; a profile sized for a GPU that is about to run on the CPU is warned about
there, with the way to switch. ``Chapter.progress`` says whether long cells show progress bars: yes,
unless ``$LINREC_PROGRESS`` is ``0`` (the book's build sets it, so the built pages stay free of bars).
``provenance`` is the line a chapter ends with: profile, models, corpus and its hash, rows, device,
library versions and wall time, so every figure can be traced to a run.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np
import pandas as pd
import torch

from linrec.errors import LinrecError, LinrecWarning
from linrec.experiment.measurement import MeasurementInfo, forget_used, used_measurements
from linrec.experiment.profiles import Profile, get_profile, profile_names
from linrec.models.loading import pick_device
from linrec.report import ledger
from linrec.report.claims import verdict_sentence
from linrec.report.paper import Reported

_LIBRARIES = ("linrec", "torch", "transformers", "numpy", "pandas")
_clock = {"start": time.perf_counter()}
_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def on_colab() -> bool:
    """Whether this runs inside a Google Colab kernel."""
    return "google.colab" in sys.modules


def resolve_profile(profile: str | None) -> str:
    """``profile`` when given, else ``paper`` on Colab and ``offline`` elsewhere; unknown names are an error."""
    if profile is None:
        return "paper" if on_colab() else "offline"
    if profile not in profile_names():
        raise LinrecError(f"unknown profile '{profile}'; choose one of {', '.join(profile_names())}")
    return profile


def progress_bars() -> bool:
    """Whether chapters show progress bars: ``$LINREC_PROGRESS`` as a yes/no, yes when it is unset."""
    value = os.environ.get("LINREC_PROGRESS", "1").strip().lower()
    if value not in _YES + _NO:
        raise LinrecError(f"LINREC_PROGRESS must be one of {', '.join(_YES + _NO)}; got {value!r}")
    return value in _YES


def warn_if_cpu(profile: Profile) -> bool:
    """Warn (a :class:`LinrecWarning` and a printed banner) when ``profile`` wants a GPU but will run on the
    CPU; return whether it did."""
    if not profile.wants_gpu or pick_device(profile.device).type != "cpu":
        return False
    message = (
        f"profile '{profile.name}' is sized for a GPU but will run on the CPU: this chapter will take hours. "
        "Switch to a GPU (on Colab: Runtime → Change runtime type → a GPU, then run again), "
        "or set PROFILE = 'offline' in the parameters cell: small models trained here, sized for a CPU."
    )
    print(f"{'!' * 80}\n!! WARNING: {message}\n{'!' * 80}")
    warnings.warn(message, LinrecWarning, stacklevel=3)
    return True


def setup(profile: str | None = None, seed: int = 0, style: bool = True, **overrides: object) -> str:
    """Resolve the profile, seed torch and numpy, set the plot style, print a header; return the profile.

    ``overrides`` change profile fields as :func:`start` does; setup reads them for the thread count and
    the CPU warning (:func:`warn_if_cpu`).
    """
    resolved = resolve_profile(profile)
    chosen = get_profile(resolved, **overrides)
    if chosen.zoo is not None:
        torch.set_num_threads(1)  # the zoo's small matrices run faster on one thread, and far faster on a busy CPU
    torch.manual_seed(seed)
    np.random.seed(seed)
    pd.set_option("display.max_colwidth", None)  # tables show their text in full, never cut to "..."
    if style:
        try:
            import seaborn as sns
        except ImportError as err:
            raise LinrecError("the book's figures need seaborn: pip install 'linrec[book]'") from err
        sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    _clock["start"] = time.perf_counter()
    chosen_by = "given" if profile is not None else ("default on Colab" if on_colab() else "default off Colab")
    print(f"{provenance(resolved, wall=False)} | profile {chosen_by}, seed {seed}")
    warn_if_cpu(chosen)
    return resolved


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


def versions() -> dict[str, str]:
    """Installed versions of python and the libraries a result depends on."""
    found = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


@dataclass(frozen=True)
class Provenance:
    """What a chapter ran: printed as one line, kept as fields for tables."""

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
        return " | ".join(parts)


def _describe(device: torch.device) -> str:
    if device.type == "cuda" and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def provenance(
    profile: str,
    *,
    models: Sequence[str] = (),
    corpus: str | None = None,
    corpus_hash: str | None = None,
    rows: int | None = None,
    device: str | torch.device | None = None,
    wall: bool = True,
) -> Provenance:
    """The provenance of this chapter's run so far (wall time counts from the last :func:`setup`)."""
    return Provenance(
        profile=profile,
        device=_describe(torch.device(device) if device is not None else pick_device()),
        versions=versions(),
        models=tuple(models),
        corpus=corpus,
        corpus_hash=corpus_hash,
        rows=rows,
        wall_s=time.perf_counter() - _clock["start"] if wall else None,
        inputs=measured_inputs(used_measurements()),
    )


def measured_inputs(infos: Sequence[MeasurementInfo]) -> tuple[str, ...]:
    """Provenance parts for measurements: the commits hub weights and corpora resolved to, and each model's
    first token of a window (its BOS policy), so that a rerun can tell whether it saw the same inputs."""
    commits = [
        f"{i.model}{'' if i.checkpoint == 'final' else ' ' + i.checkpoint}@{i.revision[:12]}"
        for i in infos
        if i.revision
    ]
    corpora = {i.corpus: i.corpus_source.rpartition("commit ")[2][:12] for i in infos if "commit " in i.corpus_source}
    policies: dict[str, list[str]] = {}
    for model, bos in dict.fromkeys((i.model, i.bos) for i in infos):
        policies.setdefault(bos, []).append(model)
    parts = []
    if commits:
        parts.append("weights " + ", ".join(dict.fromkeys(commits)))
    if corpora:
        parts.append("data " + ", ".join(f"{c}@{commit}" for c, commit in corpora.items()))
    if policies:
        parts.append("windows start: " + "; ".join(f"{bos} ({', '.join(models)})" for bos, models in policies.items()))
    return tuple(parts)


@dataclass(frozen=True)
class Chapter:
    """One chapter's run: its name (``NN_topic``), the resolved and validated profile, the seed, and whether
    long cells show progress bars (pass ``progress=ch.progress`` on; see :func:`progress_bars`)."""

    name: str
    profile: Profile
    seed: int
    progress: bool = True

    def record(
        self, quantity: str | Reported, measured: object, *, paper: str = "", unit: str = "", note: str = ""
    ) -> dict:
        """Add a headline number to the ledger the appendix reads (:func:`linrec.report.ledger.record`)."""
        return ledger.record(self.profile.name, self.name, quantity, measured, paper=paper, unit=unit, note=note)

    def recorded(self) -> pd.DataFrame:
        """What this chapter has recorded so far in this run."""
        table = ledger.ledger(self.profile.name)
        return table[table["chapter"] == self.name]

    def verdict(self, claims: pd.DataFrame) -> str:
        """The one-sentence verdict over a claims table (:func:`linrec.report.claims.verdict_sentence`)."""
        return verdict_sentence(self.profile.name, claims)

    def provenance(self, **details: object) -> Provenance:
        """The chapter's provenance line so far (:func:`provenance`, with this profile)."""
        return provenance(self.profile.name, **details)


def start(
    name: str, profile: str | Mapping[str, object] | None = None, seed: int = 0, style: bool = True, **overrides: object
) -> Chapter:
    """Begin chapter ``name``: :func:`setup`, forget its earlier ledger entries, and return its :class:`Chapter`.

    ``profile`` is a profile's name, or a dict ``{"name": <profile>, <field>: <value>, ...}`` that changes some
    of its fields (how a notebook parameter carries a reduced profile, e.g. fewer eval tokens);
    ``overrides`` change fields too (:func:`linrec.experiment.profiles.get_profile`).
    """
    if isinstance(profile, Mapping):
        fields = dict(profile)
        if not isinstance(fields.get("name"), str):
            raise LinrecError(
                "a PROFILE given as a dict needs its profile's name under 'name' "
                f"(one of {', '.join(profile_names())}); got {profile!r}"
            )
        profile = str(fields.pop("name"))
        overrides = {**fields, **overrides}
        get_profile(profile, **overrides)  # a bad field fails here, before anything runs
    resolved = setup(profile, seed=seed, style=style, **overrides)
    if overrides:
        print(f"profile fields changed: {', '.join(f'{k}={v!r}' for k, v in overrides.items())}")
    ledger.start(resolved, name)
    forget_used()
    return Chapter(name, get_profile(resolved, **overrides), seed, progress_bars())
