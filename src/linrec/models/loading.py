"""Load a model and its tokenizer by hub id, local directory or GGUF file, safely and failing fast when offline.

Remote code stays off unless asked for (``trust_remote_code=True``), weights load from
safetensors when the checkpoint has them, and a hub that cannot be reached is reported within
seconds (``HF_HUB_OFFLINE=1`` is respected), naming what needs no network: the packaged models installed here
and the offline profile.
A ``.gguf`` file is dequantised to float32 once and loaded from the cache (:mod:`linrec.models.gguf`), and so is
a packaged model named as such (``smollm2-135m``, ``gemma3-270m``: :mod:`linrec.models.packaged`).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, overload

import torch
from torch import nn

from linrec.digests import file_sha256
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT, hub_offline, hub_reachable, resolve_revision, use_hub_timeouts
from linrec.models.arch import CAUSAL, check_supported
from linrec.models.gguf import dequantised
from linrec.models.packaged import PACKAGED, offline_hint, packaged_file
from linrec.progress import no_library_bars

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def _mps_available() -> bool:
    return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()


def available_devices() -> list[str]:
    """The devices this machine can run on, in the order :func:`pick_device` prefers them (cpu last)."""
    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return [*cuda, *(["mps"] if _mps_available() else []), "cpu"]


def _is_available(device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index is None or device.index < torch.cuda.device_count())
    if device.type == "mps":
        return _mps_available()
    backend = getattr(torch, device.type, None)  # torch.xpu and the like report their own availability
    return bool(getattr(backend, "is_available", lambda: False)())


def pick_device(device: str | None = None) -> torch.device:
    """The requested device, else cuda, then mps, then cpu; a device this machine lacks is an error up front."""
    if not device:
        return torch.device(available_devices()[0].split(":")[0])
    try:
        chosen = torch.device(device)
    except RuntimeError:
        chosen = None
    if chosen is None or not _is_available(chosen):
        raise LinrecError(
            f"device '{device}' is not available on this machine; available: {', '.join(available_devices())}. "
            "Leave the device out to use the first of them."
        )
    return chosen


@overload
def parse_dtype(dtype: str | torch.dtype) -> torch.dtype: ...
@overload
def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None: ...
def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """A torch dtype from a name, or from the ``str`` of one as a measurement records it ("torch.bfloat16");
    None keeps the checkpoint's own, or float32."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    recorded = getattr(torch, dtype.removeprefix("torch."), None) if dtype.startswith("torch.") else None
    if isinstance(recorded, torch.dtype):
        return recorded
    if dtype not in DTYPES:
        raise LinrecError(f"unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _local_dir(name_or_path: str) -> Path | None:
    """The local model directory ``name_or_path`` names, or None for a hub id.

    A name that looks like a path (starts with ./, ../, /, ~, has more parts than org/name, or
    its parent directory exists here) but is no directory is reported as such, not as a hub error.
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise LinrecError(
            f"'{name_or_path}' is a file; give the model's directory (the one holding config.json) or a .gguf file"
        )
    parts = Path(name_or_path).parts
    if name_or_path.startswith(("./", "../", "/", "~")) or len(parts) > 2 or (len(parts) == 2 and path.parent.is_dir()):
        raise LinrecError(
            f"no such directory: '{name_or_path}'. Give a directory saved with save_pretrained "
            "(holding config.json), or a hub id like openai-community/gpt2."
        )
    return None


def local_weights_id(name_or_path: str) -> str | None:
    """Which local weights ``name_or_path`` names, by content, for cache keys: ``local sha256:<hex>`` of a file
    (a .gguf) or, for a model directory, of the sorted names and sha256s of all its files (config and tokenizer
    too: they decide the results as much as the weights; hidden files, such as a download's ``.cache``, are
    left out). None for a name that is no local path (a hub id). Each file is hashed once and remembered
    (:func:`linrec.digests.file_sha256`), so a second run reads nothing again unless a file changed."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return f"local sha256:{file_sha256(path)}"
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*")):
        relative = file.relative_to(path)
        if file.is_file() and not any(part.startswith(".") for part in relative.parts):
            digest.update(f"{relative.as_posix()}\0{file_sha256(file)}\n".encode())
    return f"local sha256:{digest.hexdigest()}"


def _check_tokenizer(tokenizer: PreTrainedTokenizerBase, name_or_path: str) -> None:
    """An empty tokenizer (what transformers builds for a directory without tokenizer files) is an error here."""
    if not tokenizer("The quick brown fox.", add_special_tokens=False)["input_ids"]:
        raise LinrecError(
            f"'{name_or_path}' has no usable tokenizer (it turns text into no tokens). Save the tokenizer "
            "beside the model with tokenizer.save_pretrained(directory) (tokenizer.json, or vocab.json + merges.txt)."
        )


TOKENIZER_PACKAGES = ("sentencepiece", "protobuf")
"""What transformers needs to convert a checkpoint that ships only a sentencepiece ``tokenizer.model`` (Llama's)."""


def _missing_packages() -> list[str]:
    import importlib.util

    modules = {"sentencepiece": "sentencepiece", "protobuf": "google.protobuf"}
    missing = []
    for package in TOKENIZER_PACKAGES:
        try:
            found = importlib.util.find_spec(modules[package]) is not None
        except (ImportError, ValueError):  # a parent package that is absent, or a module set to None
            found = False
        if not found:
            missing.append(package)
    return missing


def load_tokenizer(source: str, name_or_path: str | None = None, **kwargs: object) -> PreTrainedTokenizerBase:
    """``AutoTokenizer.from_pretrained(source, **kwargs)``; a missing sentencepiece or protobuf is named.

    Without them transformers fails on a ``tokenizer.model``-only checkpoint with an error about
    tiktoken or sentencepiece that does not say what to install; this one does.
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, **kwargs)
    except (OSError, ValueError, ImportError) as err:
        text = str(err).lower()
        missing = _missing_packages()
        if missing and any(word in text for word in ("sentencepiece", "tiktoken", "protobuf")):
            raise LinrecError(
                f"the tokenizer of '{name_or_path or source}' is a sentencepiece model (tokenizer.model), which "
                f"transformers can only load with the packages {' and '.join(TOKENIZER_PACKAGES)}; missing: "
                f"{', '.join(missing)}. Install them: pip install 'linrec[paper]' "
                "(or pip install sentencepiece protobuf)."
            ) from err
        raise


def _damaged_weights(local: Path) -> LinrecError | None:
    """What is wrong with the safetensors files of the local directory ``local``, read from their headers alone (a
    truncated file no longer covers what its header lists): None where each is whole or there is none."""
    from safetensors import SafetensorError, safe_open

    for file in sorted(local.glob("*.safetensors")):
        try:
            with safe_open(str(file), "pt"):
                pass
        except (SafetensorError, OSError) as bad:
            return LinrecError(f"{file} is truncated or corrupt ({bad}): save or download it again.")
    return None


def _weights_error(name_or_path: str, local: Path | None, err: Exception) -> LinrecError:
    """What went wrong with the weights, naming the file and what to do."""
    if local is None:
        return LinrecError(
            f"could not load the weights of '{name_or_path}': {err}. The downloaded files may be incomplete: "
            "delete the model's folder in the Hugging Face cache (~/.cache/huggingface/hub) and load it again."
        )
    files = sorted([*local.glob("*.safetensors"), *local.glob("*.bin")])
    if not files:
        return LinrecError(
            f"'{local}' has a config but no weights (model.safetensors or pytorch_model.bin): "
            "save the model there with model.save_pretrained(directory)."
        )
    return _damaged_weights(local) or LinrecError(
        f"could not load the weights in '{local}' ({', '.join(f.name for f in files)}): {err}"
    )


DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
"""The ``device_map`` strategies accelerate knows; any other ``device_map`` must name one device."""


def check_device_map(device_map: str | None, device: str | None) -> None:
    """Refuse a ``device_map`` that is neither a strategy of :data:`DEVICE_MAP_STRATEGIES` nor a device of this
    machine, and one given beside ``device`` (which it would override silently)."""
    if not device_map:
        return
    if device:
        raise LinrecError(
            f"device '{device}' and device_map '{device_map}' both say where the model goes; give one of them"
        )
    if device_map not in DEVICE_MAP_STRATEGIES:
        try:
            pick_device(device_map)
        except LinrecError:
            raise LinrecError(
                f"device_map must be one of {', '.join(DEVICE_MAP_STRATEGIES)} or a device of this machine "
                f"({', '.join(available_devices())}); got '{device_map}'"
            ) from None


def load_pretrained(
    name_or_path: str,
    *,
    revision: str | None = None,
    dtype: str | torch.dtype | None = None,
    device: str | None = None,
    device_map: str | None = None,
    trust_remote_code: bool = False,
    supported_only: bool = False,
    before_weights: Callable[[PretrainedConfig, PreTrainedTokenizerBase], None] | None = None,
) -> tuple[nn.Module, PreTrainedTokenizerBase]:
    """(model, tokenizer), the model frozen in eval mode on ``device`` (or spread by ``device_map="auto"``).

    Causal LMs load with their LM head (needed for perplexity); encoders (BERT-style) load bare.
    ``name_or_path`` may be a ``.gguf`` file: its architecture is checked from its metadata, then it is
    dequantised to float32 once (:func:`linrec.models.gguf.dequantised`) and loaded from the cache; the name of a
    packaged model (:data:`linrec.models.packaged.PACKAGED`) loads its checked GGUF file so.
    Everything that can be checked before the weights load is: the path, the device, the dtype,
    the tokenizer and, with ``supported_only`` (an architecture :func:`ffn_blocks` knows, as the
    CLI needs), the architecture read from the config. ``before_weights(config, tokenizer)`` runs then too: a
    caller's own checks (the text long enough, the blocks and sequence length within the model's) fail before the
    weights load.
    """
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    check_device_map(device_map, device)
    torch_dtype = parse_dtype(dtype)
    if name_or_path in PACKAGED:
        name_or_path = str(packaged_file(name_or_path))
    unpacked = name_or_path.lower().endswith(".gguf")  # its weights read from the cache in a second: no bar
    if unpacked:
        name_or_path = str(dequantised(name_or_path)[0])
    local = _local_dir(name_or_path)
    source = str(local) if local is not None else name_or_path
    target = None if device_map else pick_device(device)
    local_only = local is not None or hub_offline()
    if not local_only and not hub_reachable():
        local_only = True  # a copy in the local cache still works; otherwise fail below, in seconds
    hint = OFFLINE_HINT if local is not None else offline_hint()  # what runs without the hub
    if local is None:  # load the commit the revision resolves to, when known, so config and weights agree
        use_hub_timeouts()
        revision = resolve_revision(name_or_path, revision, local_files_only=local_only, hint=hint) or revision
    common = {"revision": revision, "trust_remote_code": trust_remote_code, "local_files_only": local_only}
    try:
        config = AutoConfig.from_pretrained(source, **common)
        tokenizer = load_tokenizer(source, name_or_path, **common)
    except (OSError, ValueError) as err:
        where = (
            "a local directory"
            if local
            else ("the hub (unreachable or offline), nor in the local cache" if local_only else "the hub")
        )
        raise LinrecError(f"could not load '{name_or_path}' from {where}: {err}\n{hint}") from err
    if supported_only:
        check_supported(config.model_type)
    _check_tokenizer(tokenizer, name_or_path)
    if local is not None and (damaged := _damaged_weights(local)) is not None:
        raise damaged  # before the plan and the batches: a local checkpoint's files are checked from their headers
    if before_weights is not None:
        before_weights(config, tokenizer)
    auto = AutoModelForCausalLM if config.model_type in CAUSAL else AutoModel
    kwargs = dict(common, dtype=torch_dtype or "auto", use_safetensors=None)
    if device_map:
        kwargs["device_map"] = device_map
    try:
        with no_library_bars() if unpacked else nullcontext():
            model: nn.Module = auto.from_pretrained(source, **kwargs)
    except (OSError, SafetensorError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise _weights_error(name_or_path, local, err) from err
    if target is not None:
        model.to(target)
    model.eval().requires_grad_(False)
    return model, tokenizer


def max_context(model: nn.Module | PretrainedConfig) -> int | None:
    """The longest sequence the position embeddings of a model (or its config) allow (None when unbounded or
    unknown)."""
    config = getattr(model, "config", model)
    for attr in ("n_positions", "max_position_embeddings"):
        value = getattr(config, attr, None)
        if isinstance(value, int):
            return value
    return None
