"""linrec: how much of each transformer FFN block a closed-form affine map recovers.

The public API, in the order a measurement uses it::

    model, tok = linrec.load_model("openai-community/gpt2")
    linrec.ffn_blocks(model)                        # where X and Y are read, per block
    batches = linrec.make_batches(tok, text, seq_len=128, max_rows=20_000)
    table = linrec.measure(model, batches)          # one row per FFN block

``capture_moments`` and ``recoverability`` are the two halves of ``measure``, for capturing once
and analysing many times (moments save with ``save_moments``); ``run_capture`` feeds the same
forward pass to other sinks, such as a ``RowSample``. Swapping a block for its fitted map:
``fit_replacements``, ``swapped`` and ``swap_deltas`` (ΔPPL). Everything else lives in the
layers beneath: :mod:`linrec.core`, :mod:`linrec.interventions`, :mod:`linrec.experiment`, ...
"""

from linrec.core.capture import capture_moments, run_capture
from linrec.core.fit import AffineFit, fit_affine, recoverability, report_table
from linrec.core.measure import measure
from linrec.core.moments import Moments, load_moments, save_moments
from linrec.core.sample import RowSample
from linrec.data.tokens import TokenBatches, make_batches
from linrec.errors import LinrecError
from linrec.interventions.perplexity import perplexity, swap_deltas
from linrec.interventions.surgery import fit_replacements, swapped
from linrec.models.arch import SUPPORTED, BlockSpec, ffn_blocks
from linrec.models.loading import load_model, pick_device

__all__ = [
    "SUPPORTED",
    "AffineFit",
    "BlockSpec",
    "LinrecError",
    "Moments",
    "RowSample",
    "TokenBatches",
    "capture_moments",
    "ffn_blocks",
    "fit_affine",
    "fit_replacements",
    "load_model",
    "load_moments",
    "make_batches",
    "measure",
    "perplexity",
    "pick_device",
    "recoverability",
    "report_table",
    "run_capture",
    "save_moments",
    "swap_deltas",
    "swapped",
]
__version__ = "0.1.0"
