"""Scoring a swapped block without recomputing the layers below it.

With only block b's FFN swapped, layers 0 to b-1 compute exactly what they compute in the unmodified model. So
:class:`LayerPrefix` runs those layers once, in depth order, and keeps the output of the last one for every forward
call of the evaluation (one depth at a time: about as much memory as the evaluation windows' hidden states). While
block b is scored, layers 0 to b-1 skip their computation and hand on those outputs, so the model's own forward
(embeddings, masks, position encodings, the layers from b on, the head) runs unchanged on identical inputs: the
same numbers, bit for bit, for about half the layers' work when every block is swapped in turn.

It needs the model's decoder layers (:func:`linrec.core.resume.decoder_layers`, which also does the skipping); where
they cannot be found (a model named by a hand-made spec), every layer simply runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from torch import nn

from linrec.core.resume import recording, skipping
from linrec.errors import LinrecError


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
        return skipping(self.layers[:block], self.outputs)

    def _record(self, block: int) -> None:
        """Run layers ``depth`` to ``block - 1`` on the held outputs and keep the last one's, per forward call."""
        assert self.layers is not None
        kept: list[Any] = []
        with recording(self.layers[block - 1], kept, on_host=False), skipping(self.layers[: self.depth], self.outputs):
            self.run()
        self.outputs, self.depth = kept, block
