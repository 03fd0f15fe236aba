"""The measurement a practitioner keeps: one capture's per-fold moments with their provenance, and what they give.

:meth:`Measurement.capture` runs the model once (:func:`linrec.core.capture.capture_positions`, the first position
of each window kept apart) and keeps the float64 moments of every block and fold. From them, without running the
model again: the k-fold table (:meth:`Measurement.table`), the closed-form maps (:meth:`Measurement.fits`), the
blocks worth trying (:meth:`Measurement.candidates`) and replacements of any kind
(:meth:`Measurement.replacements`), all at one null-direction cutoff, the capture dtype's
(:func:`linrec.core.fit.rcond_for`) unless another was asked for: the maps installed are the maps scored.
It saves to a directory (safetensors and JSON, no pickle) and loads back bit for bit. :func:`measure` is the
one-call table.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from linrec.cache import hash_file
from linrec.core.capture import CaptureOptions, capture_positions, input_device
from linrec.core.extras import parse_extras
from linrec.core.fit import (
    AffineFit,
    check_rcond,
    fit_affine,
    half_precision_note,
    rcond_for,
    recoverability,
    report_table,
)
from linrec.core.moment_files import load_moments, save_moments
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.core.plan import CapturePlan, parse_memory
from linrec.core.planned import announce, capture_groups, capture_to_disk, estimate, plan_for
from linrec.core.replacements import Kind, first_apart_replacements, fit_replacements
from linrec.core.rows import RowSink
from linrec.core.schemes import FLOAT64, parse_products
from linrec.core.scores import StreamScores
from linrec.core.tails import Tail, Tails
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError, LinrecWarning
from linrec.files import new_directory
from linrec.models.arch import Spec
from linrec.models.weights_identity import weights_id
from linrec.versions import versions

FORMAT = 4
"""The version of what :meth:`Measurement.save` writes (``measurement.json``'s ``format``). 2: ``tails.json``;
3: ``scores.json``; 4: the provenance's ``extras`` and ``products``, and Cyy saved as its diagonal where the capture
summed no more.
A measurement of format 2 still loads, its scores unknown."""

FILES = ("measurement.json", "moments-first.safetensors", "moments-later.safetensors", "tails.json", "scores.json")
"""What a saved measurement's directory holds: the provenance, the first position's moments, the later rows',
each block's largest rows (:class:`linrec.core.tails.Tails`) and its residual-stream scores
(:class:`linrec.core.scores.StreamScores`; format 3 on)."""

DIGESTS = "files.json"
"""The sha256 of each of :data:`FILES`, written last: a measurement saved with it refuses to load a file that changed
since (a directory saved before it existed loads unchecked)."""


@dataclass(frozen=True)
class Provenance:
    """What a measurement is of and how it was taken."""

    model: str  # as given (a hub id, path or packaged name), or the model's config._name_or_path
    weights: str | None  # which weights by content (linrec.models.weights_identity.weights_id); None: unknown
    tokens_sha256: str  # of the captured token ids and mask (TokenBatches.sha256)
    rows: int  # token rows per block
    seq_len: int
    folds: int
    seed: int  # of the fold assignment
    skip_first: int  # positions of each window left out of the capture
    dtype: str  # the model's dtype in the forward pass, e.g. "float32"
    rcond: float  # the null-direction cutoff of every table, fit and replacement
    text: str | None = None  # the text as the caller names it (a corpus name, a file path)
    text_sha256: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    extras: tuple[str, ...] = ()  # what the capture computed beyond the fit's needs (linrec.core.extras)
    products: str = FLOAT64  # how the capture multiplied its rows (linrec.core.schemes)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extras", tuple(self.extras))  # (a list, as JSON reads it back)


def replacement_candidates(table: pd.DataFrame, min_r2: float = 0.95, max_std: float = 0.02) -> pd.DataFrame:
    """The table sorted by R²_lin, with a ``candidate`` flag and the reason for it.

    A block is a candidate for an affine replacement when its held-out R²_lin reaches ``min_r2``
    and the folds agree (``r2_lin_std`` at most ``max_std``). A candidate is only a hypothesis:
    on a real model R²_lin need not rank what a swap costs, so perplexity after the swap
    (``linrec.interventions.perplexity.swap_deltas``, or ``linrec replace``) is the test.
    """
    missing = {"block", "r2_lin", "r2_lin_std"} - set(table.columns)
    if missing:
        raise LinrecError(f"the table lacks columns {sorted(missing)}; pass the output of linrec.measure")
    if not 0 < min_r2 <= 1 or not max_std >= 0:
        raise LinrecError(f"need 0 < min_r2 <= 1 and max_std >= 0; got min_r2={min_r2}, max_std={max_std}")
    out = table.sort_values("r2_lin", ascending=False).copy()
    high = out.r2_lin >= min_r2
    stable = out.r2_lin_std <= max_std
    out["candidate"] = high & stable
    out["reason"] = [
        "R² high, folds agree" if h and s else (f"R² below {min_r2}" if not h else f"folds disagree (std > {max_std})")
        for h, s in zip(high, stable)
    ]
    return out


def _model_dtype(model: nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


@dataclass
class Measurement:
    """Per-block, per-fold float64 moments of one capture (the first position of each window apart) and their
    :class:`Provenance`; see the module docstring."""

    positions: PositionMoments
    provenance: Provenance

    @classmethod
    def capture(
        cls,
        model: nn.Module,
        batches: TokenBatches,
        *,
        blocks: Sequence[int] | None = None,
        folds: int = 5,
        seed: int = 0,
        rcond: float | None = None,
        spec: Spec = None,
        skip_first: int = 0,
        progress: bool = True,
        name: str | None = None,
        weights: str | None = None,
        text: str | None = None,
        text_sha256: str | None = None,
        extra_sinks: Sequence[RowSink] = (),
        spill: str | Path | None = None,
        memory: int | str | CapturePlan | None = None,
        extras: str | Iterable[str] | None = None,
        products: str = FLOAT64,
    ) -> Measurement:
        """Run ``model`` over ``batches`` once and keep the moments of every FFN block (or of ``blocks``).

        ``skip_first``: leave the first ``skip_first`` positions of every window out of the capture (the forward
        pass is unchanged: every token still attends to the whole window). ``rcond``: the null-direction cutoff of
        every table and fit (:func:`linrec.core.fit.fit_affine`); None follows the model's dtype
        (:func:`linrec.core.fit.rcond_for`), and a 16-bit model draws a warning
        (:func:`linrec.core.fit.half_precision_note`); a NaN, infinite or negative one is refused.
        A model in training mode is refused (call ``model.eval()``): its dropout would lower R² at random.
        ``name``, ``weights``, ``text``, ``text_sha256``: provenance as the caller knows it; the model's name and
        weights default to what its config says it was loaded from (:func:`linrec.models.weights_identity.weights_id`
        for a local directory, the hub commit otherwise). ``extra_sinks`` see the same rows in the same pass (for
        example a :class:`linrec.core.sample.RowSample` of them). ``spill``: a directory under which each fold's
        finished moments wait on disk instead of in memory (a temporary directory, removed with the measurement), for a
        model whose moments of every block exceed memory: fold by fold, about 2 d² float64 per block (the same
        numbers). ``memory``: the most bytes the capture may hold in host memory and on the GPU that accumulates
        (``"12GB"``; None: what is free there now), or a plan made before the model loaded, run as it is
        (:func:`linrec.core.planned.plan_before_loading`, ``saved=True``). The plan and an estimate of the work's time
        are printed first (with ``progress``, unless the plan was given). Where every block's moments do not fit, the
        blocks are measured in groups that do (:mod:`linrec.core.plan`), each group's moments then waiting on disk
        under ``spill`` (the system's temporary directory by default): the same numbers, bit for bit, for about one
        forward pass. ``extras``: what to compute beyond what the fit needs (:mod:`linrec.core.extras`:
        ``"output-covariance"`` for ``effective_rank_out``, ``"scores"`` for the residual-stream scores, ``"all"``;
        NaN in the table without them). ``products``: how each chunk of rows is multiplied into the float64 sums
        (:mod:`linrec.core.schemes`: ``"float64"``, exact, by default; ``"float32"`` or ``"ozaki:S"`` where float64
        is slow, within the errors said there).
        """
        setup = _set_up(model, batches, blocks, folds, seed, rcond, spec, skip_first, progress, spill, memory, extras,
                        extra_sinks, saved=True, products=products)  # fmt: skip
        plan, options = setup.plan, setup.options
        if plan is not None and progress and not isinstance(memory, CapturePlan):  # (else printed by the caller)
            work = estimate(model.config, batches, plan, setup.dtype, input_device(model), torch.device("cpu"))
            announce(plan, True, work)  # (the fits come later, from the moments on the host)
        if plan is None or len(plan.groups) == 1:
            split = capture_positions(model, batches, blocks, options)
        else:
            split = capture_to_disk(model, batches, plan, options)
        source = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")
        provenance = Provenance(
            model=name or source or type(model).__name__,
            weights=model_weights(model) if weights is None else weights,
            tokens_sha256=batches.sha256,
            rows=batches.n_rows,
            seq_len=batches.seq_len,
            folds=folds,
            seed=seed,
            skip_first=skip_first,
            dtype=str(setup.dtype).removeprefix("torch."),
            rcond=setup.rcond,
            text=text,
            text_sha256=text_sha256,
            versions=versions(),
            extras=tuple(sorted(options.extras)),
            products=options.products,
        )
        return cls(split, provenance)

    @property
    def blocks(self) -> list[int]:
        """The measured blocks, in depth order."""
        return sorted(self.positions.later)

    @property
    def rcond(self) -> float:
        """The null-direction cutoff of every table, fit and replacement of this measurement."""
        return self.provenance.rcond

    @property
    def moments(self) -> Mapping[int, list[Moments]]:
        """The moments of every row, per block and fold (both parts merged when a block is read)."""
        return self.positions.every()

    def table(self, progress: bool = False) -> pd.DataFrame:
        """The k-fold recoverability table, one row per block (:data:`linrec.core.fit.COLUMNS`); ``progress``: a bar
        over the blocks' fits."""
        return report_table(recoverability(self.positions, self.rcond, progress=progress))

    def fits(self, blocks: Sequence[int] | None = None) -> dict[int, AffineFit]:
        """The closed-form map of each block (or of ``blocks``), fitted on all captured rows at the measurement's
        cutoff: the maps whose held-out R² the table reports."""
        chosen = self.blocks if blocks is None else self._known(blocks)
        return {b: fit_affine(merge_folds(self.moments[b]), self.rcond) for b in chosen}

    def candidates(self, min_r2: float = 0.95, max_std: float = 0.02) -> pd.DataFrame:
        """The table sorted by R²_lin with a ``candidate`` flag and its reason (:func:`replacement_candidates`)."""
        return replacement_candidates(self.table(), min_r2, max_std)

    def replacements(self, kind: str, blocks: Sequence[int] | None = None) -> dict[int, nn.Module]:
        """A replacement of ``kind`` (``affine``, ``lowrank:K``, ``mean``, ``zero``, ``first-apart:mean`` or ``:own``:
        :mod:`linrec.core.replacements`) for each block (or each of ``blocks``), fitted on all captured rows at the
        measurement's cutoff; swap them in with :func:`linrec.swapped`."""
        parsed = Kind.parse(kind)
        if parsed.rule is not None:
            raise LinrecError(
                f"{kind} is fitted on the rows its gate routes, which a measurement does not keep apart: fit it with "
                "linrec.gated_replacements(model, batches, kind, blocks), or use linrec replace, which does"
            )
        if parsed.share is not None:
            raise LinrecError(
                f"{kind} chooses a rank from the FFN's own numbers, which a measurement does not hold: give the rank "
                "(Kind.parse(kind).within(ffn_numbers, d_in, d_out) finds it), or use linrec replace, which does"
            )
        chosen = self.blocks if blocks is None else self._known(blocks)
        for b in chosen:
            parsed.check_width(self.positions.later[b][0].d_in)  # (self.moments would merge every fold to read it)
        if parsed.first is not None:
            if self.provenance.skip_first:
                raise LinrecError(
                    f"{kind} needs each sequence's first position, which this capture left out (skip_first="
                    f"{self.provenance.skip_first}); measure again without --skip-first"
                )
            return first_apart_replacements(self.positions, parsed.first, chosen, self.rcond)
        return fit_replacements(self.moments, parsed.name, parsed.rank, chosen, rcond=self.rcond)

    def _known(self, blocks: Sequence[int]) -> list[int]:
        missing = sorted(set(blocks) - set(self.blocks))
        if missing:
            raise LinrecError(f"blocks {missing} were not measured; this measurement holds blocks {self.blocks}")
        return list(blocks)

    def save(self, directory: str | Path, force: bool = False) -> Path:
        """Write the measurement to ``directory`` (absent or empty, else ``force``), whole or not at all:
        :data:`FILES`, safetensors and JSON. :meth:`load` reads it back bit for bit."""
        directory = Path(directory)
        with new_directory(directory, "the measurement directory", force) as tmp:
            self.write(tmp)
        return directory

    def write(self, directory: Path) -> None:
        """Write :data:`FILES` into the existing ``directory`` (what :meth:`save` does in its temporary one)."""
        write_provenance(self.provenance, directory / FILES[0])
        save_moments(self.positions.first, directory / FILES[1])
        save_moments(self.positions.later, directory / FILES[2])
        tails = {str(b): asdict(t) for b, t in self.positions.tails.items()}
        (directory / FILES[3]).write_text(json.dumps(tails, indent=1) + "\n")
        scores = {str(b): asdict(t) for b, t in self.positions.scores.items()}
        (directory / FILES[4]).write_text(json.dumps(scores, indent=1) + "\n")
        digests = {name: hash_file(directory / name) for name in FILES}
        (directory / DIGESTS).write_text(json.dumps(digests, indent=1) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> Measurement:
        """The measurement :meth:`save` wrote to ``directory``; a missing or damaged file is a LinrecError naming it."""
        from safetensors import SafetensorError

        directory = Path(directory)
        missing = [name for name in FILES[:4] if not (directory / name).is_file()]
        if missing:
            raise LinrecError(
                f"{directory} is no saved measurement: it lacks {', '.join(missing)}; save one with Measurement.save"
            )
        check_digests(directory)
        provenance = read_provenance(directory / FILES[0])
        tails = read_record(directory / FILES[3], "largest rows", "measure again and save it")
        old = read_record(directory / FILES[0], "measurement", "measure again and save it")["format"] < 3
        scores = {} if old else read_record(directory / FILES[4], "scores", "measure again and save it")
        try:
            first, later = (load_moments(directory / name) for name in FILES[1:3])
            tails = {int(b): Tails(Tail(**t["every"]), Tail(**t["later"])) for b, t in tails.items()}
            scores = {int(b): StreamScores(**t) for b, t in scores.items()}
        except (TypeError, SafetensorError, OSError, KeyError, ValueError) as err:
            raise LinrecError(f"the measurement in {directory} is damaged ({err}); measure again and save it") from err
        if (first and sorted(first) != sorted(later)) or any(
            len(f) != provenance.folds for f in [*first.values(), *later.values()]
        ):
            raise LinrecError(
                f"the moments in {directory} do not match its {FILES[0]} ({provenance.folds} folds for every block); "
                "measure again and save it"
            )
        return cls(PositionMoments(first, later, tails, scores), provenance)


def model_weights(model: nn.Module) -> str | None:
    """What a loaded model's weights are by content, from what its config says it was loaded from: the local
    directory's or file's :func:`linrec.models.weights_identity.weights_id`, the hub commit (``hub NAME@COMMIT``),
    or None."""
    config = getattr(model, "config", None)
    source, commit = str(getattr(config, "_name_or_path", "") or ""), getattr(config, "_commit_hash", None)
    if source and Path(source).expanduser().exists():
        return weights_id(source)
    return f"hub {source}@{commit}" if commit else None


def check_digests(directory: Path) -> None:
    """Refuse a file of the measurement in ``directory`` whose sha256 is not the one its :data:`DIGESTS` holds,
    naming it (nothing is checked where the directory has no such record: saved before it existed)."""
    if not (directory / DIGESTS).is_file():
        return
    digests = read_record(directory / DIGESTS, "measurement files", "measure again and save it")
    for name, expected in digests.items():
        path = directory / name
        if not path.is_file() or hash_file(path) != expected:
            raise LinrecError(
                f"{path} is damaged or missing: its sha256 is not the one {DIGESTS} records; measure again and save it"
            )


def write_provenance(provenance: Provenance, path: Path) -> None:
    """Write ``provenance`` as the JSON record :func:`read_provenance` reads (:data:`FILES`' first)."""
    path.write_text(json.dumps({"format": FORMAT, **asdict(provenance)}, indent=1) + "\n")


READS = (2, 3, FORMAT)
"""The formats :meth:`Measurement.load` reads."""


def read_provenance(path: Path) -> Provenance:
    """The :class:`Provenance` :func:`write_provenance` wrote to ``path`` in one of the formats :data:`READS`; a
    LinrecError naming the file otherwise."""
    record = read_record(path, "measurement", "measure again and save it")
    version = record.pop("format", None)
    if version not in READS:
        raise LinrecError(
            f"{path} is of format {version}, not {' or '.join(map(str, READS))}; measure again and save it"
        )
    try:
        return Provenance(**record)
    except TypeError as err:
        raise LinrecError(f"the measurement record {path} is damaged ({err}); measure again and save it") from err


def read_record(path: Path, what: str, fix: str) -> dict:
    """The JSON object in ``path`` (a ``what``'s record), or a LinrecError naming the file and ``fix``."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LinrecError(f"cannot read the {what} record {path} ({err}); {fix}") from err
    if not isinstance(record, dict):
        raise LinrecError(f"the {what} record {path} holds no JSON object; {fix}")
    return record


def _checked_options(rcond: float | None, skip_first: int, seq_len: int, dtype: torch.dtype) -> slice | None:
    """Refuse a bad ``rcond`` or ``skip_first`` before the capture and warn of a 16-bit model's precision; the
    window positions captured (None: all)."""
    if rcond is not None:
        check_rcond(rcond)
    check_skip_first(skip_first, seq_len)
    note = half_precision_note(dtype)
    if note is not None and rcond is None:
        warnings.warn(note, LinrecWarning, stacklevel=3)
    return slice(skip_first, None) if skip_first else None


def measure(
    model: nn.Module,
    batches: TokenBatches,
    *,
    blocks: Sequence[int] | None = None,
    folds: int = 5,
    seed: int = 0,
    rcond: float | None = None,
    spec: Spec = None,
    skip_first: int = 0,
    progress: bool = True,
    spill: str | Path | None = None,
    memory: int | str | CapturePlan | None = None,
    extras: str | Iterable[str] | None = None,
    products: str = FLOAT64,
) -> pd.DataFrame:
    """Per-block linear recoverability of ``model`` on ``batches``: one row per FFN block, the table of
    :meth:`Measurement.capture` (whose docstring says what each argument does). Only the table is kept: where the
    capture runs in groups (``memory``), each group's rows are made as it ends and its moments let go, so nothing
    goes to disk. On a GPU the fits run there too, in float64 (the same arithmetic as :meth:`Measurement.table`'s on
    the host, to rounding), and the finished moments wait there for them where the plan finds the room (no copy to
    host memory and back; the same numbers, bit for bit). ``memory`` may also be the plan itself, made and shown by
    the caller before the model loaded (:func:`linrec.core.planned.plan_before_loading`; the command line's way): its
    groups are run as they are.

    Columns: ``block, r2_lin`` (k-fold mean held-out R², variance-weighted), ``r2_lin_std``
    (its std over folds), ``r2_feature_median`` (median per-output-dim R²),
    ``effective_rank_out, effective_rank_map`` (participation ratios of the output covariance and
    of the fitted map's predictions), ``input_condition`` (over the non-null spectrum),
    ``null_dims`` (input directions dropped), ``n_train, n_test`` (rows per fold split),
    ``d_in, d_out``; ``r2_lin_half_rows`` (the same with about half the training rows: a convergence check),
    ``first_position_share`` and ``r2_lin_after_first`` (the first captured position of each window, where
    the attention sink sits: its share of the output variance, and R²_lin without it), ``top_rows_share`` (the
    share its largest 0.1 % of rows carry), ``r2_lin_folds`` (each fold's R²_lin).
    :data:`linrec.core.fit.COLUMNS` says what each means.
    """
    setup = _set_up(model, batches, blocks, folds, seed, rcond, spec, skip_first, progress, spill, memory, extras,
                    table=spill is None, products=products)  # fmt: skip
    plan, options = setup.plan, setup.options
    device = input_device(model)
    on = device if device.type == "cuda" else None  # the fits where the model is
    if plan is None:  # a model with no config to size a plan by: one pass
        parts: Iterable[PositionMoments] = [capture_positions(model, batches, blocks, options)]
    else:
        if progress and not isinstance(memory, CapturePlan):  # (the command line printed its plan and estimate)
            work = estimate(model.config, batches, plan, setup.dtype, device, on or torch.device("cpu"))
            announce(plan, True, work)
        parts = capture_groups(model, batches, plan, options)
    reports = (
        recoverability(part, setup.rcond, consume=isinstance(part.later, dict), device=on, progress=progress)
        for part in parts
    )
    return report_table([report for group in reports for report in group])


@dataclass(frozen=True)
class _SetUp:
    """What :func:`measure` and :meth:`Measurement.capture` decide alike before the capture (:func:`_set_up`)."""

    dtype: torch.dtype  # the model's, in the forward pass
    rcond: float  # the null-direction cutoff of every fit
    plan: CapturePlan | None  # None: a model with no config to size a plan by (one pass)
    options: CaptureOptions


def _set_up(
    model: nn.Module,
    batches: TokenBatches,
    blocks: Sequence[int] | None,
    folds: int,
    seed: int,
    rcond: float | None,
    spec: Spec,
    skip_first: int,
    progress: bool,
    spill: str | Path | None,
    memory: int | str | CapturePlan | None,
    extras: str | Iterable[str] | None,
    extra_sinks: Sequence[RowSink] = (),
    saved: bool = False,
    table: bool = False,
    products: str = FLOAT64,
) -> _SetUp:
    """The checks, cutoff, plan and capture options of a measurement, before any row is captured: a bad option is
    refused here, and a plan that keeps the finished moments on the GPU (``table``: only the table is wanted, as
    :func:`measure`'s; ``saved``: the moments are kept, as a :class:`Measurement`'s) says so to the capture. A
    ``memory`` that is a plan already is taken as it is."""
    dtype = _model_dtype(model)
    positions = _checked_options(rcond, skip_first, batches.seq_len, dtype)
    chosen = parse_extras(extras)
    scheme = parse_products(products)
    plan = (
        memory
        if isinstance(memory, CapturePlan)
        else plan_for(
            model, batches, blocks, folds, spec, parse_memory(memory), saved=saved, table=table, extras=chosen
        )
    )
    keep = table and plan is not None and plan.footprint.kept_on_gpu and spill is None  # the fits where the moments are
    options = CaptureOptions(folds, seed, spec, progress, positions, spill, extra_sinks, chosen, keep_on_gpu=keep,
                             products=scheme)  # fmt: skip
    return _SetUp(dtype, rcond_for(dtype) if rcond is None else rcond, plan, options)


def check_skip_first(skip_first: int, seq_len: int) -> int:
    """``skip_first`` when it leaves at least one position of a ``seq_len``-token window, else a LinrecError."""
    if isinstance(skip_first, bool) or not isinstance(skip_first, int) or not 0 <= skip_first < seq_len:
        raise LinrecError(
            f"skip_first (--skip-first) must be an integer from 0 to seq_len - 1 = {seq_len - 1}, so that each "
            f"{seq_len}-token window keeps a position; got {skip_first!r}. Lower it, or raise --seq-len."
        )
    return skip_first
