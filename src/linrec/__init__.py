"""linrec: how much of each transformer FFN block a closed-form affine map recovers.

The public API, in the order a measurement uses it::

    model, tok = linrec.load_model("openai-community/gpt2")
    linrec.ffn_blocks(model)                        # where X and Y are read, per block
    batches = linrec.make_batches(tok, text, seq_len=128, max_rows=20_000)
    table = linrec.measure(model, batches)          # one row per FFN block

``capture_moments`` and ``recoverability`` are the two halves of ``measure``, for capturing once
and analysing many times (moments save with ``save_moments``).
"""

from linrec.models.arch import SUPPORTED, BlockSpec, ffn_blocks
from linrec.core.capture import capture_moments, run_capture
from linrec.errors import LinrecError
from linrec.models.loading import load_model, pick_device
from linrec.core.measure import measure
from linrec.core.moments import Moments, load_moments, save_moments
from linrec.core.fit import AffineFit, fit_affine, held_out, recoverability, report_table
from linrec.data.tokens import TokenBatches, make_batches
from linrec.core.sample import RowSample, Rows, capture_with_sample
from linrec.stats import r2
from linrec.interventions.probes import ProbeConfig, bilinear_probe, gain_correlation, probe_table, seeded_poly
from linrec.stats import correlation
from linrec.interventions.baseline import BaselineConfig, baseline_runs, train_linear
from linrec.interventions.surgery import fit_replacements, param_table, swapped
from linrec.interventions.perplexity import compression_frontier, perplexity, rank_correlation, swap_deltas
from linrec.interventions.crossfeed import crossfeed, crossfeed_table, normalised_table
from linrec.core.normalise import input_transform

__all__ = [
    "SUPPORTED", "AffineFit", "BlockSpec", "LinrecError", "Moments", "TokenBatches",
    "capture_moments", "ffn_blocks", "fit_affine", "held_out", "load_model", "load_moments",
    "make_batches", "measure", "pick_device", "recoverability", "report_table", "run_capture",
    "save_moments",
    "RowSample", "Rows", "capture_with_sample", "r2", "ProbeConfig", "bilinear_probe", "correlation",
    "gain_correlation", "probe_table", "seeded_poly", "BaselineConfig", "baseline_runs", "train_linear",
    "fit_replacements", "param_table", "swapped", "compression_frontier", "perplexity", "rank_correlation",
    "swap_deltas", "crossfeed", "crossfeed_table", "input_transform", "normalised_table",
]
__version__ = "0.1.0"
