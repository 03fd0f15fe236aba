"""Counting the operators that make the host wait for an accelerator, on any device (the CPU included).

A GPU runs kernels asynchronously; the host waits only when it needs a value the device computes: a
scalar read (``.item()``, ``bool(t)``, ``if t:``), an output whose size depends on the data (boolean-mask
indexing, ``nonzero``, ``unique``, ``masked_select``) or a copy of device memory to the host. Such an
operator inside a per-batch loop serialises host and device, so the device idles while Python
prepares the next batch. :class:`SyncCounter` records these operators at the dispatcher, which sees
the same calls on the CPU as on a GPU, so a CPU test can guard a GPU property. It cannot see
``Tensor.tolist()`` on the CPU (that reads memory without dispatching); on a GPU, pair it with
``torch.cuda.set_sync_debug_mode("error")``. On the CPU it also cannot tell a host tensor from a
device one, so reads made by ``torch.optim`` are not counted: optimisers keep their step counters on
the host even when training on a GPU (unless ``capturable``), and read them there.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from types import FrameType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_ALWAYS = {
    "aten._local_scalar_dense",  # .item(), bool(t), int(t), float(t)
    "aten.nonzero",
    "aten.argwhere",
    "aten._unique2",
    "aten.unique_dim",
    "aten.unique_consecutive",
    "aten.masked_select",
    "aten.bincount",
    "aten.equal",
    "aten.is_nonzero",
}
_BOOL_INDEXED = {"aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"}
_COPIES = {"aten._to_copy", "aten.copy_"}
_OPTIM = os.path.join("torch", "optim", "")


def _packet(func: Any) -> str:
    return str(func.overloadpacket)


def _bool_index(args: tuple) -> bool:
    """Whether an ``index``/``index_put`` call indexes with a boolean mask (its output size is data)."""
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ())


def _to_host(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether a copy moves device memory to the host (a blocking copy unless pinned and non-blocking)."""
    if _packet(func) == "aten._to_copy":
        source, target = args[0], kwargs.get("device")
    else:  # copy_(self, src): into self from src
        target, source = args[0].device, args[1]
    if not isinstance(source, torch.Tensor) or target is None:
        return False
    return source.device.type not in ("cpu", "meta") and torch.device(target).type == "cpu"


def is_sync(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the operator ``func`` called with ``args`` makes the host wait for the device."""
    name = _packet(func)
    if name in _ALWAYS:
        return True
    if name in _BOOL_INDEXED:
        return _bool_index(args)
    if name in _COPIES:
        return _to_host(func, args, kwargs)
    return False


def _in_optimizer() -> bool:
    """Whether the operator was called from ``torch.optim`` (whose scalar reads are of host step counters)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if _OPTIM in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class SyncCounter(TorchDispatchMode):
    """Context manager counting the host-device syncs of everything run inside it, by operator.

    ``counter.total`` is the number of syncs; ``counter.by_op`` maps each operator to its count.
    """

    def __init__(self) -> None:
        super().__init__()
        self.by_op: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if is_sync(func, args, kwargs) and not _in_optimizer():
            self.by_op[_packet(func)] += 1
        return func(*args, **kwargs)
