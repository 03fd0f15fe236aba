"""When a capture keeps its finished folds on disk rather than in memory: the size of a model's moments."""

from __future__ import annotations

import torch

from linrec.core.plan import capture_bytes
from linrec.models.arch import ffn_blocks

SPILL_ABOVE = 2 * 2**30
"""Bytes of float64 moments (every block and fold) above which a capture keeps its finished folds on disk, under the
cache directory, rather than in memory (:class:`linrec.core.moment_files.SpilledMoments`; the same numbers): a
1.5B model of width 1,536 holds 7.9 GB of them, more than a Colab runtime has beside the model."""


def moment_bytes(net: torch.nn.Module, folds: int) -> int:
    """The float64 moments of every FFN block of ``net`` for ``folds`` folds (:func:`linrec.core.plan.capture_bytes`;
    a block's input and output widths alike, as every supported family has them)."""
    config = getattr(net, "config", None)
    width = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 0)
    return capture_bytes(width, len(ffn_blocks(net)), folds)
