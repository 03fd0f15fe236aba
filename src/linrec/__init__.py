"""linrec: how much of each transformer FFN block a closed-form affine map recovers.

The public API, in the order a measurement uses it::

    model, tok = linrec.load_model("openai-community/gpt2")
    linrec.ffn_blocks(model)                        # where X and Y are read, per block
    batches = linrec.make_batches(tok, text, seq_len=128, max_rows=64 * 768)  # 64 rows per input dimension
    table = linrec.measure(model, batches)          # one row per FFN block

    m = linrec.Measurement.capture(model, batches)  # what measure() tabulates, kept: moments and provenance
    m.table(); m.fits(); m.candidates(); m.replacements("lowrank:64", [3]); m.save("run")

``capture_moments`` and ``recoverability`` are the two halves of ``measure`` at a lower level; ``run_capture`` feeds the
same forward pass to other sinks (subclasses of ``RowSink``, such as a ``RowSample``). Swapping a block for a
replacement: ``swapped`` (for a scope) and ``swap_deltas`` (ΔPPL); ``fit_replacements`` from raw moments;
``gated_replacements`` (a gate sends a share of the rows to the map, the rest to the FFN) from the model and its rows.
What a model can still do, beside perplexity: ``evaluate(model, tok, "zero-shot,humaneval")`` (lm-evaluation-harness
tasks, HumanEval pass@1, the pruning papers' WikiText-2 perplexity). A replaced model for good: ``linrec replace`` (from
Python: ``replace(model, fit_batches, eval_batches, ...).save(dir)``) writes a directory that ``load_replaced`` (also
``load_model``) loads.
Everything else lives in the layers beneath: :mod:`linrec.core`, :mod:`linrec.interventions`,
:mod:`linrec.experiment`, ...
"""

from typing import TYPE_CHECKING

from linrec._lazy import lazy
from linrec._version import __version__ as __version__  # re-exported: linrec.__version__
from linrec.errors import LinrecError

# Where each public name lives. They are imported on first use (PEP 562, :mod:`linrec._lazy`), so ``import linrec``
# and ``linrec --help`` do not pay for torch and transformers until something needs them; so are the subpackages
# (``linrec.analysis.bilinear``, ``linrec.plots.bilinear``, ...), which is how a chapter reaches them.
_HOMES = {
    "BatchRows": "linrec.core.rows",
    "RowSink": "linrec.core.rows",
    "capture_moments": "linrec.core.capture",
    "run_capture": "linrec.core.capture",
    "AffineFit": "linrec.core.fit",
    "fit_affine": "linrec.core.fit",
    "recoverability": "linrec.core.fit",
    "report_table": "linrec.core.fit",
    "Measurement": "linrec.core.measure",
    "measure": "linrec.core.measure",
    "Moments": "linrec.core.moments",
    "load_moments": "linrec.core.moment_files",
    "save_moments": "linrec.core.moment_files",
    "RowSample": "linrec.core.sample",
    "SyncCounter": "linrec.core.syncs",
    "TokenBatches": "linrec.data.tokens",
    "make_batches": "linrec.data.tokens",
    "perplexity": "linrec.interventions.perplexity",
    "swap_deltas": "linrec.interventions.perplexity",
    "evaluate": "linrec.interventions.tasks.evaluate",
    "fit_replacements": "linrec.core.replacements",
    "gated_replacements": "linrec.interventions.gating",
    "swapped": "linrec.interventions.surgery",
    "SUPPORTED": "linrec.models.arch",
    "BlockSpec": "linrec.models.arch",
    "ffn_blocks": "linrec.models.arch",
    "load_model": "linrec.interventions.replacement.directory",
    "load_replaced": "linrec.interventions.replacement.directory",
    "replace": "linrec.interventions.replacement.replace",
    "pick_device": "linrec.models.loading",
}

if TYPE_CHECKING:
    from linrec.core.capture import capture_moments, run_capture
    from linrec.core.fit import AffineFit, fit_affine, recoverability, report_table
    from linrec.core.measure import Measurement, measure
    from linrec.core.moment_files import load_moments, save_moments
    from linrec.core.moments import Moments
    from linrec.core.replacements import fit_replacements
    from linrec.core.rows import BatchRows, RowSink
    from linrec.core.sample import RowSample
    from linrec.core.syncs import SyncCounter
    from linrec.data.tokens import TokenBatches, make_batches
    from linrec.interventions.gating import gated_replacements
    from linrec.interventions.perplexity import perplexity, swap_deltas
    from linrec.interventions.replacement.directory import load_model, load_replaced
    from linrec.interventions.replacement.replace import replace
    from linrec.interventions.surgery import swapped
    from linrec.interventions.tasks.evaluate import evaluate
    from linrec.models.arch import SUPPORTED, BlockSpec, ffn_blocks
    from linrec.models.loading import pick_device


__getattr__, __dir__ = lazy(__name__, globals(), _HOMES)


__all__ = [
    "SUPPORTED",
    "AffineFit",
    "BatchRows",
    "BlockSpec",
    "LinrecError",
    "Measurement",
    "Moments",
    "RowSample",
    "RowSink",
    "SyncCounter",
    "TokenBatches",
    "capture_moments",
    "evaluate",
    "ffn_blocks",
    "fit_affine",
    "fit_replacements",
    "gated_replacements",
    "load_model",
    "load_moments",
    "load_replaced",
    "make_batches",
    "measure",
    "perplexity",
    "pick_device",
    "recoverability",
    "replace",
    "report_table",
    "run_capture",
    "save_moments",
    "swap_deltas",
    "swapped",
]
