"""Running a model from the middle: layers below a depth hand on a residual stream kept from an earlier pass.

Two passes over the same inputs compute, in their lower layers, the same numbers. So a pass can keep the output of
one decoder layer for each of its forward calls (:func:`recording`), and a later pass over the same calls can skip
every layer up to that one (:func:`skipping`): the model's own forward still runs (embeddings, masks, position
encodings, the layers above), and the layer just below the resumed depth returns the kept output. The layers above
see bit-for-bit what they would have seen, for the cost of a copy of the residual stream per call. The capture's
plan (:mod:`linrec.core.plan`) uses it to run groups of blocks one after the other for about one forward pass in
all; the swaps' prefix replay (:mod:`linrec.interventions.prefix`) to score each swapped block without the layers
below it.

It needs the model's decoder layers (:func:`decoder_layers`), each called once per forward, in order, its first
argument the previous layer's output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from torch import nn

from linrec.core.capture import StopForward, device_of
from linrec.core.pinned import to_pinned_host
from linrec.models.arch import BlockSpec


def decoder_layers(model: nn.Module, blocks: list[BlockSpec]) -> list[nn.Module] | None:
    """The layer holding each block's FFN, in block order: the entry of a ``ModuleList`` that contains the FFN's output
    module; None unless every block has one and they are the list's entries 0, 1, 2, … in order."""
    modules = dict(model.named_modules())
    layers: list[nn.Module] = []
    owner: nn.ModuleList | None = None
    for block in blocks:
        parts = block.output.split(".")
        found = None
        for cut in range(len(parts) - 1, 0, -1):
            parent = modules.get(".".join(parts[: cut - 1]))
            if isinstance(parent, nn.ModuleList) and parts[cut - 1].isdigit():
                found = (parent, int(parts[cut - 1]))
                break
        if found is None or (owner is not None and found[0] is not owner) or not found[1] == block.index == len(layers):
            return None
        owner = found[0]
        layers.append(owner[found[1]])
    return layers


def _moved(value: Any, device: torch.device | None) -> Any:
    """A copy of a layer's output, its tensors on ``device`` (None: where they are): never the kept tensors
    themselves, which a later layer may change in place."""
    if isinstance(value, torch.Tensor):
        if device is None or value.device == device:
            return value.clone()
        return value.to(device, non_blocking=value.is_pinned())
    if isinstance(value, tuple):
        return tuple(_moved(v, device) for v in value)
    return value


def _passed(*args: Any, **kwargs: Any) -> Any:
    """A decoder layer's forward that hands its input on unchanged (the residual stream it was given)."""
    return args[0] if args else kwargs.get("hidden_states")


@contextmanager
def _forwards(layers: Sequence[nn.Module], forwards: Sequence[Callable[..., Any]]) -> Iterator[None]:
    """Within: each of ``layers`` runs the matching one of ``forwards`` instead of its own (an instance attribute that
    shadows the class's forward; a wrapper already there, as accelerate's device hooks, is put back after)."""
    own = [layer.__dict__.get("forward") for layer in layers]
    try:
        for layer, new in zip(layers, forwards, strict=True):
            layer.forward = new
        yield
    finally:
        for layer, old in zip(layers, own, strict=True):
            if old is None:
                layer.__dict__.pop("forward", None)
            else:
                layer.forward = old


def passing(layers: Sequence[nn.Module]) -> AbstractContextManager[None]:
    """Within: each of ``layers`` hands its input on unchanged, its attention and FFN removed: the whole block
    dropped from the model, as layer pruning does (its KV cache slot stays empty)."""
    return _forwards(layers, [_passed] * len(layers))


@contextmanager
def skipping(layers: Sequence[nn.Module], outputs: Sequence[Any], device: torch.device | None = None) -> Iterator[None]:
    """Within: each of ``layers`` (the model's lowest, in order) skips its computation. At its k-th call the last of
    them returns a copy of ``outputs[k]`` on ``device`` (default: the device of the layer above's inputs, that is of
    the last layer's weights); the others hand their input on unchanged, for the next of them to ignore."""
    if not layers:
        yield
        return
    target = device if device is not None else device_of(layers[-1])
    calls = iter(outputs)

    def last(*_args: Any, **_kwargs: Any) -> Any:
        return _moved(next(calls), target)

    with _forwards(layers, [*[_passed] * (len(layers) - 1), last]):
        yield


def _to_host(value: Any) -> Any:
    """A layer's output kept off the device: in pinned host memory, copied on a side stream without the host waiting
    (:func:`linrec.core.pinned.to_pinned_host`), from a GPU; a clone on the CPU."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "cuda":
            return to_pinned_host(value.detach())
        return value.detach().to("cpu", copy=True)
    if isinstance(value, tuple):
        return tuple(_to_host(v) for v in value)
    return value


@contextmanager
def recording(layer: nn.Module, kept: list[Any], on_host: bool = True) -> Iterator[None]:
    """Within: every forward call of the model appends ``layer``'s output to ``kept`` (in host memory with
    ``on_host``, else as it is: the forward ends right after, so nothing changes it) and ends there
    (:class:`linrec.core.capture.StopForward`): nothing above ``layer`` runs. Synchronise a GPU before reading what
    was kept on the host."""
    keep: Callable[[Any], Any] = _to_host if on_host else (lambda v: v)

    def hook(_module: nn.Module, _args: Any, output: Any) -> None:
        kept.append(keep(output))
        raise StopForward

    handle = layer.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
