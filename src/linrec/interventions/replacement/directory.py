"""A replaced model on disk: the replacement directory that ``linrec replace`` writes and :func:`load_replaced` reads.

A directory holds no copy of the base model, only what differs from it:

* ``replacements.safetensors``: each replacement's ``state_dict`` (its numbers, in the dtype it computes in), keys
  ``<block>.<name>``;
* ``linrec-replacement.json``: the base model as given, its weights by content
  (:func:`linrec.models.weights_identity.weights_id`), the sha256 of every file of the directory it points to
  (``files``),
  the blocks and their kinds in the order they were put in, each step's
  joint ΔPPL with its interval, numbers stored before and after, the fit and evaluation texts and their hashes, the
  measurement's provenance and the versions (:func:`linrec.interventions.replacement.replace.replace` builds it);
* ``report.md``: the same for a reader, with ``report.png``, the joint ΔPPL and the numbers saved step by step
  (:mod:`linrec.interventions.replacement.report`; where matplotlib is installed).

:func:`load_replaced` checks the directory whole (record, every file's sha256, kinds, every tensor's name and shape)
and the base model's hash before any weights load, then loads the base and installs the maps for good
(:func:`linrec.interventions.surgery.install`): ``generate()`` works, ``linrec measure --model DIR`` measures it,
and ``save_pretrained`` refuses, since it would write a checkpoint that reloads broken. :func:`load_model` is
:func:`linrec.models.loading.load_pretrained` for everything else, so ``linrec.load_model(DIR)`` loads a replaced model
too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn

from linrec.cache import hash_file
from linrec.core.measure import read_record
from linrec.core.replacements import Kind, empty_replacement
from linrec.errors import LinrecError, LinrecWarning
from linrec.files import new_directory
from linrec.interventions.replacement.report import FIGURE, can_draw, report_figure, report_markdown
from linrec.interventions.surgery import install
from linrec.models import loading
from linrec.models.packaged import PACKAGED, packaged_file
from linrec.models.weights_identity import weights_id

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

FORMAT = 2
"""The version of the directory's format (the record's ``format``): 2 records the sha256 of each file (``files``)."""

READS = (1, FORMAT)
"""The formats :func:`read_replaced` reads: format 1, which holds no hashes, with a warning."""

RECORD, MAPS, REPORT = "linrec-replacement.json", "replacements.safetensors", "report.md"

FIX = "write it again with linrec replace --out DIR"


def is_replacement_dir(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` is a directory holding a replacement record (as :func:`save_replaced` writes)."""
    return (Path(name_or_path).expanduser() / RECORD).is_file()


def save_replaced(directory: str | Path, maps: Mapping[int, nn.Module], record: dict, force: bool = False) -> Path:
    """Write ``maps`` (block -> replacement, in the order they go in) and ``record`` to ``directory``, whole or not at
    all (:func:`linrec.files.new_directory`: absent or empty, else ``force``); ``report.md`` and its figure are made
    from the record."""
    import json

    from safetensors.torch import save_file

    directory = Path(directory)
    tensors = {
        f"{b}.{name}": t.detach().cpu().contiguous() for b, m in maps.items() for name, t in m.state_dict().items()
    }
    with new_directory(directory, "--out", force) as tmp:
        save_file(tensors, str(tmp / MAPS), metadata={"format": str(FORMAT)})
        files = {MAPS: hash_file(tmp / MAPS)}
        (tmp / RECORD).write_text(
            json.dumps({"format": FORMAT, **record, "files": files}, indent=1) + "\n", encoding="utf-8"
        )
        figure = can_draw()
        (tmp / REPORT).write_text(report_markdown(record, directory.name, figure), encoding="utf-8")
        if figure:
            report_figure(record).savefig(tmp / FIGURE, dpi=150)
    return directory


def read_replaced(directory: str | Path) -> tuple[dict, dict[int, nn.Module]]:
    """(the record, block -> replacement in the order they go in) of a replacement directory, every tensor's name and
    shape checked against the record's kinds; a missing or damaged file is a LinrecError naming it."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory).expanduser()
    missing = [name for name in (RECORD, MAPS) if not (directory / name).is_file()]
    if missing:
        raise LinrecError(f"{directory} is no complete replacement directory: it lacks {', '.join(missing)}; {FIX}")
    record = read_record(directory / RECORD, "replacement", FIX)
    try:
        if record["format"] not in READS:
            raise LinrecError(
                f"{directory / RECORD} is of format {record['format']}, not {' or '.join(map(str, READS))}; {FIX}"
            )
        if record["format"] > 1 and (not isinstance(record["files"], dict) or MAPS not in record["files"]):
            raise ValueError(f"the record must hold the sha256 of {MAPS}")
        width = int(record["base"]["width"])
        kinds = {int(entry["block"]): Kind.parse(entry["kind"]) for entry in record["blocks"]}
        if not isinstance(record["base"]["model"], str) or len(kinds) != len(record["blocks"]):
            raise ValueError("the base model must be named, and each block listed once")
    except (KeyError, TypeError, ValueError) as err:
        raise LinrecError(f"{directory / RECORD} is damaged ({type(err).__name__}: {err}); {FIX}") from err
    check_files(directory, record)
    try:
        tensors = load_file(str(directory / MAPS))
    except (SafetensorError, OSError) as err:
        raise LinrecError(f"{directory / MAPS} is damaged ({err}); {FIX}") from err
    maps: dict[int, nn.Module] = {}
    for block, kind in kinds.items():
        module = empty_replacement(kind.check_width(width), width, width)
        state = {k.partition(".")[2]: t for k, t in tensors.items() if k.partition(".")[0] == str(block)}
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise LinrecError(f"{directory / MAPS} does not hold block {block}'s {kind} map ({err}); {FIX}") from err
        maps[block] = module.requires_grad_(False)
    extra = sorted({k.partition(".")[0] for k in tensors} - {str(b) for b in kinds})
    if extra:
        raise LinrecError(f"{directory / MAPS} holds maps of blocks {extra} that {RECORD} does not list; {FIX}")
    return record, maps


def check_files(directory: Path, record: dict) -> None:
    """Refuse a file of ``directory`` whose sha256 is not the one ``record`` holds for it (a changed byte loads no
    map silently), naming the file; a format-1 record, which holds none, draws a warning."""
    if record["format"] == 1:
        warnings.warn(
            f"{directory / RECORD} is of format 1 and records no hash of its files, so a damaged one cannot be told; "
            f"{FIX} to have them checked",
            LinrecWarning,
            stacklevel=4,
        )
        return
    for name, expected in record["files"].items():
        path = directory / name
        if not path.is_file():
            raise LinrecError(f"{directory} lacks {name}, which {RECORD} points to; {FIX}")
        if hash_file(path) != expected:
            raise LinrecError(
                f"{path} is damaged: its sha256 is not the one {RECORD} records for it (changed after it was "
                f"written); {FIX}"
            )


def base_source(base: dict, directory: Path) -> str:
    """Where the base model loads from: the copy inside ``directory`` where it holds one (``bundled``: the linrec
    form of :mod:`linrec.interventions.replacement.export`), else as given, or, for a local path not found from here
    (a relative one, read from another working directory), the absolute path recorded beside it."""
    if base.get("bundled"):
        return str(directory / base["bundled"])
    name = base["model"]
    if name in PACKAGED or Path(name).expanduser().exists() or not base.get("path"):
        return name
    return base["path"]


def check_base(record: dict, directory: Path) -> None:
    """Refuse a base model whose weights differ from the recorded ones, naming both (a hub base is loaded at its
    recorded commit instead; a base of unknown weights draws a warning)."""
    base = record["base"]
    recorded = base.get("weights")
    if base.get("bundled"):
        return  # a copy inside the directory, whose files' hashes the record holds (check_files)
    if recorded is None:
        warnings.warn(
            f"{directory / RECORD} records no hash of the base model '{base['model']}', so it cannot be checked",
            LinrecWarning,
            stacklevel=3,
        )
        return
    if recorded.startswith("hub "):
        return
    found = weights_id(base_source(base, directory))
    if found != recorded:
        raise LinrecError(
            f"the base model '{base['model']}' is not the one these replacements were fitted on: its weights are "
            f"{found}, the record in {directory} names {recorded}. Give the directory the base model it was made "
            "from (or run linrec replace again on this one)"
        )


def load_replaced(
    directory: str | Path,
    *,
    dtype: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    supported_only: bool = False,
    before_weights: Callable[[PretrainedConfig, PreTrainedTokenizerBase], None] | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer): the base model of the replacement directory ``directory`` with its maps installed for good.

    The directory and the base model's hash are checked before any weights load (:func:`read_replaced`,
    :func:`check_base`); the base loads in the dtype it was replaced in unless ``dtype`` is given. The other
    options are :func:`linrec.models.loading.load_pretrained`'s (``revision`` and ``trust_remote_code`` are the
    record's, and refused here).
    """
    directory = Path(directory).expanduser()
    if revision is not None or trust_remote_code:
        raise LinrecError(
            f"{directory} is a replacement directory: its base model's revision is recorded and remote code stays off; "
            "drop --revision and --trust-remote-code"
        )
    record, maps = read_replaced(directory)
    check_base(record, directory)
    model, tokenizer = load_base(
        record,
        directory,
        dtype=dtype,
        device=device,
        device_map=device_map,
        supported_only=supported_only,
        before_weights=before_weights,
    )
    install(model, maps)
    return model, tokenizer


def load_base(
    record: dict, directory: Path, *, dtype: str | None = None, **options: Any
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer): the base model a replacement record names, from where it is (:func:`base_source`), at its
    recorded hub commit, in the dtype it was replaced in unless ``dtype`` is given; the other ``options`` are
    :func:`linrec.models.loading.load_pretrained`'s."""
    base = record["base"]
    name, weights = base_source(base, directory), base["weights"] or ""
    return loading.load_pretrained(
        str(packaged_file(name)) if name in PACKAGED else name,
        revision=weights.rpartition("@")[2] if weights.startswith("hub ") and not base.get("bundled") else None,
        dtype=dtype or base["dtype"],
        **options,
    )


def load_model(name_or_path: str, **options: Any) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """``linrec.load_model``: a replacement directory through :func:`load_replaced`, anything else through
    :func:`linrec.models.loading.load_pretrained` (same options)."""
    if is_replacement_dir(name_or_path):
        return load_replaced(name_or_path, **options)
    return loading.load_pretrained(name_or_path, **options)
