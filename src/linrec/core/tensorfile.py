"""Safetensors files written one tensor at a time, so that saving never holds a second copy of what it saves.

``safetensors.torch.save_file`` wants every tensor in one dict, and copies them into one buffer before it
writes: saving a real model's per-fold moments that way held them twice over (the moments of every block
merged at once, and the buffer). :func:`write_tensors` asks for the tensors twice instead, once for their
names, dtypes and shapes (the header, which comes first in the file) and once to write their bytes, and drops
each tensor once written; a caller that makes tensors on demand (moments merged per block) never holds more
than one block's. The file is an ordinary safetensors file (``safe_open`` and ``load_file`` read it).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from linrec.errors import LinrecError

_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def write_tensors(
    path: str | Path,
    tensors: Callable[[], Iterable[tuple[str, torch.Tensor]]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write the named tensors that ``tensors()`` yields (called twice, yielding the same both times) to a
    safetensors file at ``path``, in that order; ``metadata``: free-form strings."""
    header: dict[str, object] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, t in tensors():
        if t.dtype not in _DTYPES:
            raise LinrecError(f"cannot write tensor '{name}' of dtype {t.dtype} to safetensors")
        if name in header:
            raise LinrecError(f"tensor name '{name}' is given twice")
        size = t.numel() * t.element_size()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-aligned, as safetensors' own writer aligns it
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        written = 0
        for name, t in tensors():
            entry = header.get(name)
            data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
            if not isinstance(entry, dict) or entry["data_offsets"] != [written, written + data.nbytes]:
                raise LinrecError(f"tensors() yielded '{name}' differently the second time; it must repeat itself")
            f.write(data.data)
            written += data.nbytes
        if written != offset:
            raise LinrecError("tensors() yielded fewer tensors the second time; it must repeat itself")
