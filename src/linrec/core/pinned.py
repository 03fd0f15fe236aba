"""Copies from a GPU to pinned host memory that overlap the capture's kernels instead of running between them."""

from __future__ import annotations

import functools

import torch


def to_pinned_host(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` (on a GPU) in pinned host memory, queued on the device's side stream after what its current
    stream has queued so far: the copy engine works while the kernels that come next run, not between them, and the
    host does not wait. Read it only after ``torch.cuda.synchronize`` of ``t``'s device, which waits for every stream
    there (:func:`every_gpu_done` where the sources may be on several GPUs). For a ``t`` that nothing writes to after
    (a finished fold's moments, a forward's last output); its memory is kept from reuse until the copy is done."""
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    side = _side_stream(t.device)
    side.wait_stream(torch.cuda.current_stream(t.device))
    with torch.cuda.stream(side):
        host.copy_(t, non_blocking=True)
    t.record_stream(side)
    return host


@functools.cache
def _side_stream(device: torch.device) -> torch.cuda.Stream:
    """The stream of ``device`` that :func:`to_pinned_host` copies on, one per device."""
    return torch.cuda.Stream(device)


def every_gpu_done() -> None:
    """Wait for every stream of every GPU (none: nothing to wait for): the copies :func:`to_pinned_host` queued have
    landed, whichever GPUs their sources were on (a model spread over several by ``device_map``)."""
    if torch.cuda.is_available():
        for device in range(torch.cuda.device_count()):
            torch.cuda.synchronize(device)
