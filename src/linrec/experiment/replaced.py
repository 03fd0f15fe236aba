"""A replacement of a profile's model, chosen once and read from the cache afterwards.

:func:`linrec.replace` on a real model scores perplexity once per candidate and once per step of its choice, which
is most of a chapter's time; its result depends only on the weights, the token batches, the options and the
releases of torch and transformers. :func:`cached_replace` keys it by those and keeps what the chapter reads back:
the replacement directory (:func:`linrec.interventions.replacement.directory.save_replaced`) and the measurement it
was fitted from (:meth:`linrec.core.measure.Measurement.save`), so a warm build loads them bit for bit instead of
choosing again. Timings in the record are those of the run that chose.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from linrec.cache import build_entry, built_entry, cache_dir, cache_key
from linrec.core.measure import Measurement, read_record
from linrec.data.tokens import TokenBatches
from linrec.interventions.replacement.directory import read_replaced
from linrec.interventions.replacement.replace import Replacement, replace
from linrec.versions import releases

FORMAT = 2
"""Bumped whenever what an entry holds changes (it keys the cache): 2, the greedy skips a block over the budget and
tries the next, decode speed is timed in turns with its spread, the directory records its files' sha256."""

MEASUREMENT, REPLACED, RECORD = "measurement", "replaced", "record.json"
"""An entry's measurement directory, its replacement directory (when some block was kept) and, when none was, the
record alone."""


def cached_replace(
    model: nn.Module,
    fit_batches: TokenBatches,
    eval_batches: TokenBatches,
    *,
    weights: str | None,
    name: str,
    second_batches: TokenBatches | None = None,
    progress: bool = True,
    **options: object,
) -> Replacement:
    """:func:`linrec.replace` (``name``, ``second_batches``, ``progress`` and ``options`` as it takes them), computed
    once per ``weights`` (the model's weights by content), batches, options and library releases, then read from
    the cache. ``options`` must be JSON values (blocks, budget, folds, seed, kind, refit, ablate)."""
    content = {
        "format": FORMAT,
        "libraries": releases(),
        "weights": weights,
        "name": name,
        "batches": [b.sha256 if b is not None else None for b in (fit_batches, eval_batches, second_batches)],
        "options": options,
    }
    path = cache_dir() / "replacements" / f"{Path(name).name}-{cache_key(content)}"

    def build(tmp: Path) -> None:
        chosen = replace(model, fit_batches, eval_batches, name=name, second_batches=second_batches,
                         progress=progress, **options)  # type: ignore[arg-type]  # fmt: skip
        chosen.measurement.save(tmp / MEASUREMENT)
        if chosen.none_fits is None:
            chosen.save(tmp / REPLACED)
        else:
            (tmp / RECORD).write_text(json.dumps(chosen.record, indent=1) + "\n", encoding="utf-8")

    build_entry(path, build)
    entry = built_entry(path)
    if (entry / REPLACED).is_dir():
        record, maps = read_replaced(entry / REPLACED)
        record.pop("format")  # the directory's, not the choice's
    else:
        record, maps = read_record(entry / RECORD, "replacement", "remove the cache entry to choose again"), {}
    return Replacement(maps, record, Measurement.load(entry / MEASUREMENT))
