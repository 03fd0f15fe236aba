"""GGUF files (llama.cpp's single-file checkpoints) as float32 transformers models, dequantised once.

transformers reads a GGUF file with the ``gguf`` package and dequantises every tensor to the dtype
asked for, which takes tens of seconds (reading the file's metadata three times, for the tokenizer, the config and
the weights). :func:`dequantised` does it once per file, saying so in one line on stderr (transformers' own bars
hidden meanwhile), and keeps the float32 model (``model.safetensors``) and its tokenizer as an ordinary model
directory in the cache (:mod:`linrec.cache`: built atomically, every file's size and sha256 in its marker), keyed by
the file's sha256, with ``gguf.json`` recording where the weights came from (file, sha256, quantisation). A later
load reads that directory, which :func:`linrec.cache.current_entry` hashes first: a damaged or truncated file is
reported in one warning and the entry rebuilt, never loaded. The saved tensors are the dequantised ones, bit for
bit. The architecture is read from the file's metadata first, so an unsupported model is refused
before anything is dequantised. A GGUF architecture is the ``model_type`` transformers gives the model, except
where transformers renames it (:data:`MODEL_TYPES`: a ``gemma3`` file holds Gemma 3's text model only).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from linrec.cache import build_entry, cache_dir, current_entry
from linrec.digests import file_sha256
from linrec.errors import LinrecError
from linrec.models.arch import SUPPORTED
from linrec.models.packaged import PACKAGED
from linrec.progress import no_library_bars

MODEL_TYPES = {"gemma3": "gemma3_text"}
"""The ``model_type`` transformers gives the model of a GGUF architecture, where the two names differ."""

GGUF_PACKAGE = "gguf"
"""What transformers needs to read a GGUF file (``pip install gguf``; ``make install`` pins it)."""


@dataclass(frozen=True)
class GgufInfo:
    """Where a dequantised model came from: stored beside it as ``gguf.json``."""

    file: str  # the GGUF file's name
    sha256: str
    architecture: str  # general.architecture: transformers' model_type, or a key of MODEL_TYPES
    quantisation: str  # general.file_type, e.g. MOSTLY_Q4_1 (llama.cpp's name)
    name: str  # general.name

    @property
    def weights(self) -> str:
        """The weights as provenance names them: the file's content hash and what they were dequantised from."""
        return f"gguf sha256:{self.sha256} ({self.quantisation.removeprefix('MOSTLY_')}, dequantised to float32)"


def _require_gguf() -> None:
    if importlib.util.find_spec(GGUF_PACKAGE) is None:
        raise LinrecError(
            "reading a .gguf file needs the 'gguf' package, which is not installed: pip install gguf "
            "(or pip install 'linrec[gguf]'; `make install` installs it)"
        )


def _field(reader: Any, key: str) -> Any:
    """One metadata value of a GGUF file: a string, or an integer, or None when absent."""
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    value = field.parts[field.data[0]]
    return bytes(value).decode() if field.types and field.types[0].name == "STRING" else int(value[0])


def read_gguf_info(path: Path, sha256: str | None = None) -> GgufInfo:
    """What a GGUF file holds, from its metadata only (no tensor is read); a file that is no GGUF is an error.
    ``sha256``: the file's, when already known."""
    _require_gguf()
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError) as err:
        raise LinrecError(f"'{path}' is not a readable GGUF file ({err}); download or copy it again") from err
    file_type = _field(reader, "general.file_type")
    try:
        quantisation = gguf.LlamaFileType(file_type).name if file_type is not None else "unknown"
    except ValueError:
        quantisation = f"file type {file_type}"
    return GgufInfo(
        file=path.name,
        sha256=sha256 or file_sha256(path),
        architecture=_field(reader, "general.architecture") or "unknown",
        quantisation=quantisation,
        name=_field(reader, "general.name") or path.stem,
    )


def check_gguf_architecture(info: GgufInfo) -> None:
    """Refuse, before dequantising, a file whose architecture transformers cannot read or linrec cannot measure."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    readable = sorted(a for a in GGUF_CONFIG_MAPPING if MODEL_TYPES.get(a, a) in SUPPORTED)
    if info.architecture not in readable:
        raise LinrecError(
            f"'{info.file}' holds a '{info.architecture}' model; the GGUF architectures that transformers can read "
            f"and linrec can measure are {', '.join(readable)}. Use a GGUF file of one of them, or load the model "
            "yourself (transformers' from_pretrained(directory, gguf_file=name), where it can read it) and pass "
            "its FFN modules to linrec.measure as spec=[(input_module_name, output_module_name), ...]"
        )


@contextmanager
def _no_unpacking_bars() -> Iterator[None]:
    """transformers' progress bars hidden inside the block: those its switch reaches (:func:`no_library_bars`) and
    its GGUF reader's, which draws a plain tqdm bar that the switch does not."""
    from transformers import modeling_gguf_pytorch_utils as reader

    drawn = reader.tqdm
    reader.tqdm = functools.partial(drawn, disable=True)  # type: ignore[assignment]  # it is only called
    try:
        with no_library_bars():
            yield
    finally:
        reader.tqdm = drawn


def _announce(path: Path, info: GgufInfo, target: Path) -> None:
    """The one line on stderr that says a GGUF file is being dequantised, once, and where the result is kept: the
    packaged model's name where the file is one (by its sha256), else the file's."""
    name = next((m.name for m in PACKAGED.values() if m.sha256 == info.sha256), path.name)
    print(
        f"linrec: {name}: unpacking the GGUF file ({info.quantisation.removeprefix('MOSTLY_')}, "
        f"{path.stat().st_size / 1e6:.1f} MB) into float32 weights, once; cached in {target}",
        file=sys.stderr,
        flush=True,
    )


def dequantised(path: str | Path, *, refresh: bool = False) -> tuple[Path, GgufInfo]:
    """(a model directory of the float32 weights and tokenizer of the GGUF file ``path``, its :class:`GgufInfo`).

    Dequantised on first use (tens of seconds; :func:`_announce` says so) and cached under ``<cache>/gguf``, keyed by
    the file's sha256, so a changed file is dequantised again and an unchanged one never is; a damaged entry is
    rebuilt (see the module docstring).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise LinrecError(f"no such GGUF file: '{path}'")
    sha256 = file_sha256(path)
    target = cache_dir() / "gguf" / f"{path.stem}-{sha256[:16]}"
    found = None if refresh else current_entry(target)
    if found is not None:
        origin = gguf_origin(found)
        assert origin is not None  # build() writes gguf.json into every entry
        return found, origin
    info = read_gguf_info(path, sha256)
    check_gguf_architecture(info)

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        _announce(path, info, target)
        with _no_unpacking_bars():
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
            # The weights are plain float32 now; transformers still marks the model as GGUF-quantised and refuses
            # to save it until that mark is dropped.
            model.hf_quantizer = None  # type: ignore[assignment]  # a plain attribute, typed as a module by torch
            model.config.__dict__.pop("quantization_config", None)
            model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "gguf.json").write_text(json.dumps(asdict(info), indent=1))

    build_entry(target, build, refresh=refresh)
    return current_entry(target) or target, info


def gguf_origin(directory: str | Path) -> GgufInfo | None:
    """The :class:`GgufInfo` of a model directory :func:`dequantised` made (None for any other directory)."""
    record = Path(directory) / "gguf.json"
    return GgufInfo(**json.loads(record.read_text())) if record.is_file() else None
