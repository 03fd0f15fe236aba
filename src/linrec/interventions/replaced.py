"""A replaced model on disk: the replacement directory that ``linrec replace`` writes and :func:`load_replaced` reads.

A directory holds no copy of the base model, only what differs from it:

* ``replacements.safetensors``: each replacement's ``state_dict`` (its numbers, in the dtype it computes in), keys
  ``<block>.<name>``;
* ``linrec-replacement.json``: the base model as given, its weights by content
  (:func:`linrec.models.identity.weights_id`), the blocks and their kinds in the order they were put in, each step's
  joint ΔPPL with its interval, numbers stored before and after, the fit and evaluation texts and their hashes, the
  measurement's provenance and the versions (:func:`linrec.interventions.replace.replace` builds it);
* ``report.md``: the same for a reader.

:func:`load_replaced` checks the directory whole (record, kinds, every tensor's name and shape) and the base model's
hash before any weights load, then loads the base and installs the maps for good
(:func:`linrec.interventions.surgery.install`): ``generate()`` works, ``linrec profile --model DIR`` measures it,
and ``save_pretrained`` refuses, since it would write a checkpoint that reloads broken. :func:`load_model` is
:func:`linrec.models.loading.load_model` for everything else, so ``linrec.load_model(DIR)`` loads a replaced model
too.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from torch import nn

from linrec.core.measure import read_record
from linrec.core.replacements import Kind, empty_replacement
from linrec.errors import LinrecError, LinrecWarning
from linrec.files import new_directory
from linrec.interventions.surgery import install
from linrec.models import loading
from linrec.models.identity import weights_id
from linrec.models.packaged import PACKAGED, packaged_file

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

FORMAT = 1
"""The version of the directory's format (the record's ``format``)."""

RECORD, MAPS, REPORT = "linrec-replacement.json", "replacements.safetensors", "report.md"

FIX = "write it again with linrec replace --out DIR"


def is_replacement_dir(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` is a directory holding a replacement record (as :func:`save_replaced` writes)."""
    return (Path(name_or_path).expanduser() / RECORD).is_file()


def save_replaced(directory: str | Path, maps: Mapping[int, nn.Module], record: dict, force: bool = False) -> Path:
    """Write ``maps`` (block -> replacement, in the order they go in) and ``record`` to ``directory``, whole or not at
    all (:func:`linrec.files.new_directory`: absent or empty, else ``force``); ``report.md`` is made from the record."""
    import json

    from safetensors.torch import save_file

    directory = Path(directory)
    tensors = {
        f"{b}.{name}": t.detach().cpu().contiguous() for b, m in maps.items() for name, t in m.state_dict().items()
    }
    with new_directory(directory, "--out", force) as tmp:
        save_file(tensors, str(tmp / MAPS), metadata={"format": str(FORMAT)})
        (tmp / RECORD).write_text(json.dumps({"format": FORMAT, **record}, indent=1) + "\n", encoding="utf-8")
        (tmp / REPORT).write_text(report_markdown(record, directory.name), encoding="utf-8")
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
        if record["format"] != FORMAT:
            raise LinrecError(f"{directory / RECORD} is of format {record['format']}, not {FORMAT}; {FIX}")
        width = int(record["base"]["width"])
        kinds = {int(entry["block"]): Kind.parse(entry["kind"]) for entry in record["blocks"]}
        if not isinstance(record["base"]["model"], str) or len(kinds) != len(record["blocks"]):
            raise ValueError("the base model must be named, and each block listed once")
    except (KeyError, TypeError, ValueError) as err:
        raise LinrecError(f"{directory / RECORD} is damaged ({type(err).__name__}: {err}); {FIX}") from err
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


def base_source(base: dict) -> str:
    """Where the base model loads from: as given, or, for a local path not found from here (a relative one, read
    from another working directory), the absolute path recorded beside it."""
    name = base["model"]
    if name in PACKAGED or Path(name).expanduser().exists() or not base.get("path"):
        return name
    return base["path"]


def check_base(record: dict, directory: Path) -> None:
    """Refuse a base model whose weights differ from the recorded ones, naming both (a hub base is loaded at its
    recorded commit instead; a base of unknown weights draws a warning)."""
    base = record["base"]
    recorded = base.get("weights")
    if recorded is None:
        warnings.warn(
            f"{directory / RECORD} records no hash of the base model '{base['model']}', so it cannot be checked",
            LinrecWarning,
            stacklevel=3,
        )
        return
    if recorded.startswith("hub "):
        return
    found = weights_id(base_source(base))
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
    options are :func:`linrec.models.loading.load_model`'s (``revision`` and ``trust_remote_code`` are the
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
    base = record["base"]
    name, weights = base_source(base), base["weights"] or ""
    model, tokenizer = loading.load_model(
        str(packaged_file(name)) if name in PACKAGED else name,
        revision=weights.rpartition("@")[2] if weights.startswith("hub ") else None,
        dtype=dtype or base["dtype"],
        device=device,
        device_map=device_map,
        supported_only=supported_only,
        before_weights=before_weights,
    )
    install(model, maps)
    return model, tokenizer


def load_model(name_or_path: str, **options: Any) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """``linrec.load_model``: a replacement directory through :func:`load_replaced`, anything else through
    :func:`linrec.models.loading.load_model` (same options)."""
    if is_replacement_dir(name_or_path):
        return load_replaced(name_or_path, **options)
    return loading.load_model(name_or_path, **options)


def _number(value: float | None, digits: str = ".4g") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, digits)


def _second_text_lines(second: dict | None) -> list[str]:
    """The report's line on the second text's ΔPPL (none when no second text was scored)."""
    if second is None:
        return []
    return [
        f"- Second text, another domain (stability): {second['name']}, {second['part']} (sha256 {second['sha256']}), "
        f"{second['rows']:,} token rows: perplexity {second['base_ppl']:.6g} before, {second['replaced_ppl']:.6g} "
        f"after (ΔPPL {second['delta_ppl']:+.4g}, 95 % interval [{_number(second['delta_ppl_low'])}, "
        f"{_number(second['delta_ppl_high'])}] over {second['windows']} windows)."
    ]


def _latency_lines(latency: dict | None) -> list[str]:
    """The report's line on decoding speed before and after (none for a record made before it was timed)."""
    if latency is None:
        return []
    return [
        f"- Greedy decoding on {latency['device']} (batch {latency['batch']}, a {latency['prompt_tokens']}-token "
        f"prompt, {latency['new_tokens']} new tokens, the median of {latency['repeats']} runs): "
        f"{latency['base_tokens_per_s']:.4g} tokens/s before, {latency['replaced_tokens_per_s']:.4g} after "
        f"({latency['replaced_tokens_per_s'] / latency['base_tokens_per_s']:.2f}x)."
    ]


def report_markdown(record: dict, name: str) -> str:
    """``report.md``: what the record says, for a reader."""
    base, params, ppl = record["base"], record["params"], record["ppl"]
    fit, held = record["fit_text"], record["eval_text"]
    steps = pd.DataFrame(record["steps"])
    steps["interval"] = [f"[{_number(lo)}, {_number(hi)}]" for lo, hi in zip(steps.delta_ppl_low, steps.delta_ppl_high)]
    steps["block"] = ["model" if b is None else str(b) for b in (s["block"] for s in record["steps"])]
    shown = steps[["step", "block", "single_delta_ppl", "ppl", "delta_ppl", "interval", "params_saved", "kept"]]
    blocks = pd.DataFrame(record["blocks"])
    chosen = ", ".join(f"{b['block']} ({b['kind']})" for b in record["blocks"]) or "none"
    lines = [
        f"# Replaced FFN blocks of {base['model']}",
        "",
        f"- Base model: `{base['model']}`, weights `{base['weights']}`, computing in {base['dtype']}.",
        f"- Blocks replaced, in order: {chosen}; selection: {record['selection']['rule']}.",
        f"- Numbers stored: {params['model_before']:,} before, {params['model_after']:,} after "
        f"({params['model_before'] - params['model_after']:,} fewer, "
        f"{(params['model_before'] - params['model_after']) / params['model_before']:.2%}).",
        f"- Perplexity on the evaluation text: {ppl['base']:.6g} before, {ppl['replaced']:.6g} after "
        f"(ΔPPL {ppl['delta_ppl']:+.4g}, 95 % interval [{_number(ppl['delta_ppl_low'])}, "
        f"{_number(ppl['delta_ppl_high'])}] over {held['windows']} windows, resampled by window).",
        f"- Fit text: {fit['name']}, {fit['part']} (sha256 {fit['sha256']}), {fit['rows']:,} token rows.",
        f"- Evaluation text: {held['name']}, {held['part']} (sha256 {held['sha256']}), {held['rows']:,} token rows; "
        "it never overlaps the fit text.",
        *_second_text_lines(record.get("second_text")),
        *_latency_lines(record.get("latency")),
        "",
        "## Steps",
        "",
        "Each step puts its block in with every kept block and scores them together (the joint ΔPPL); "
        "`single_delta_ppl` is the block's own cost, swapped alone.",
        "",
        shown.to_markdown(index=False, floatfmt=".4g"),
        "",
        "## Blocks",
        "",
        blocks.to_markdown(index=False, floatfmt=".4g") if len(blocks) else "No block was replaced.",
        "",
        "## Load it",
        "",
        "```python",
        "import linrec",
        f'model, tokenizer = linrec.load_replaced("{name}")   # or linrec.load_model("{name}")',
        "```",
        "",
        f"`linrec profile --model {name} ...` measures it. Made by linrec {record['versions']['linrec']} "
        f"(torch {record['versions']['torch']}, transformers {record['versions']['transformers']}) "
        f"at {record['created_at']}.",
        "",
    ]
    return "\n".join(lines)
