"""Load a model and its tokenizer by hub id or local path, safely and failing fast when offline.

Remote code stays off unless asked for (``trust_remote_code=True``), weights load from
safetensors when the checkpoint has them, and a hub that cannot be reached is reported within
seconds (``HF_HUB_OFFLINE=1`` is respected), naming the offline profile that needs no network.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from linrec.models.arch import CAUSAL
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT, hub_offline, hub_reachable

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def pick_device(device: str | None = None) -> torch.device:
    """The requested device, else cuda, then mps, then cpu."""
    if device:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """A torch dtype from a name (None keeps the checkpoint's own, or float32)."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise LinrecError(f"unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def load_model(
    name_or_path: str,
    *,
    revision: str | None = None,
    dtype: str | torch.dtype | None = None,
    device: str | None = None,
    device_map: str | None = None,
    trust_remote_code: bool = False,
) -> tuple[nn.Module, object]:
    """(model, tokenizer), the model frozen in eval mode on ``device`` (or spread by ``device_map="auto"``).

    Causal LMs load with their LM head (needed for perplexity); encoders (BERT-style) load bare.
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    local = Path(name_or_path).is_dir()
    local_only = local or hub_offline()
    if not local_only and not hub_reachable():
        local_only = True  # a copy in the local cache still works; otherwise fail below, in seconds
    common = {"revision": revision, "trust_remote_code": trust_remote_code, "local_files_only": local_only}
    try:
        config = AutoConfig.from_pretrained(name_or_path, **common)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, **common)
    except (OSError, ValueError) as err:
        where = "a local directory" if local else ("the hub (unreachable or offline), nor in the local cache" if local_only else "the hub")
        raise LinrecError(f"could not load '{name_or_path}' from {where}: {err}\n{OFFLINE_HINT}") from err
    auto = AutoModelForCausalLM if config.model_type in CAUSAL else AutoModel
    kwargs = dict(common, dtype=parse_dtype(dtype) or "auto", use_safetensors=None)
    if device_map:
        kwargs["device_map"] = device_map
    model = auto.from_pretrained(name_or_path, **kwargs)
    if not device_map:
        model.to(pick_device(device))
    model.eval().requires_grad_(False)
    return model, tokenizer


def max_context(model: nn.Module) -> int | None:
    """The longest sequence the model's position embeddings allow (None when unbounded or unknown)."""
    config = getattr(model, "config", None)
    for attr in ("n_positions", "max_position_embeddings"):
        value = getattr(config, attr, None)
        if isinstance(value, int):
            return value
    return None
