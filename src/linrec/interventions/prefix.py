"""Scoring a swapped block without recomputing the layers below it.

With only block b's FFN swapped, layers 0 to b-1 compute exactly what they compute in the unmodified model. So
:class:`LayerPrefix` runs those layers once, in depth order, and keeps the output of the last one for every forward
call of the evaluation (one depth at a time: about as much memory as the evaluation windows' hidden states). While
block b is scored, layers 0 to b-1 skip their computation and hand on those outputs, so the model's own forward
(embeddings, masks, position encodings, the layers from b on, the head) runs unchanged on identical inputs: the
same numbers, bit for bit, for about half the layers' work when every block is swapped in turn.

It needs the model's decoder layers (the entries of a ``ModuleList`` holding each FFN), each called once per
forward, in order, its input the previous layer's output; where they cannot be found (a model named by a hand-made
spec), every layer simply runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from torch import nn

from linrec.core.capture import StopForward
from linrec.errors import LinrecError
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


def _copy(value: Any) -> Any:
    """A copy of a layer's output: its tensors cloned (a later layer may work on its input in place)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    return value


@contextmanager
def _skipped(layers: list[nn.Module], outputs: list[Any]) -> Iterator[None]:
    """Within: each of ``layers`` skips its computation and returns, at its k-th call, a copy of ``outputs[k]``."""

    def stub(calls: Iterator[Any]) -> Callable[..., Any]:
        return lambda *_args, **_kwargs: _copy(next(calls))

    own = [layer.__dict__.get("forward") for layer in layers]  # a wrapper already there (accelerate's device hooks)
    try:
        for layer in layers:
            layer.forward = stub(iter(outputs))  # the instance attribute shadows the class's forward
        yield
    finally:
        for layer, forward in zip(layers, own, strict=True):
            if forward is None:
                layer.__dict__.pop("forward", None)
            else:
                layer.forward = forward


class LayerPrefix:
    """The outputs of the unmodified layers below a block, for every forward call of ``run``, computed one depth at a
    time as :meth:`below` is asked for deeper blocks (module docstring).

    ``run()`` makes the evaluation's forward calls, in the same order and shapes each time (those of
    :func:`linrec.interventions.perplexity.window_nll`), each ended by a :class:`linrec.core.capture.StopForward`
    raised inside it. Blocks must be asked for in depth order.
    """

    def __init__(self, layers: list[nn.Module] | None, run: Callable[[], None]) -> None:
        self.layers, self.run = layers, run
        self.depth = 0  # the outputs held are those of layer depth - 1 (none at depth 0)
        self.outputs: list[Any] = []

    def below(self, block: int) -> AbstractContextManager[None]:
        """A context in which layers 0 to ``block - 1`` hand on their unmodified outputs instead of computing them
        (nothing changes at block 0, or without layers)."""
        if self.layers is None or block == 0:
            return nullcontext()
        if block < self.depth:
            raise LinrecError(f"blocks must be asked for in depth order: {block} after {self.depth}")
        if block > self.depth:
            self._record(block)
        return _skipped(self.layers[:block], self.outputs)

    def _record(self, block: int) -> None:
        """Run layers ``depth`` to ``block - 1`` on the held outputs and keep the last one's, per forward call."""
        assert self.layers is not None
        kept: list[Any] = []

        def keep(_module: nn.Module, _args: Any, output: Any) -> None:
            kept.append(output)
            raise StopForward

        handle = self.layers[block - 1].register_forward_hook(keep)
        try:
            with _skipped(self.layers[: self.depth], self.outputs) if self.depth else nullcontext():
                self.run()
        finally:
            handle.remove()
        self.outputs, self.depth = kept, block
