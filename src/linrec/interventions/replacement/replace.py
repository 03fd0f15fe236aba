"""Choose FFN blocks to replace, fit their maps and record what they cost: the Python side of ``linrec replace``.

:func:`replace` measures the model once on the fit text (:meth:`linrec.Measurement.capture`), fits a replacement of
one kind per candidate block at the capture's cutoff, and scores perplexity on the evaluation text, which must be
other text than the fit text. Blocks are either given (put in in the order given, each step scored with all before
it) or chosen greedily under a perplexity budget (:func:`linrec.interventions.perplexity.greedy_selection`: ordered
by each block's own measured ΔPPL, cheapest first, every step scored jointly). With ``refit``, each block above a
kept one is fitted again on what the model with the kept blocks in place feeds it (:class:`Refitter`), and each step
is scored with both maps. Only one copy of the model is ever
held: replacements are swapped in and out (:func:`linrec.interventions.surgery.swapped`). The result saves as a
replacement directory (:mod:`linrec.interventions.replacement.directory`).
"""

from __future__ import annotations

import datetime
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from linrec.core.extras import SCORES
from linrec.core.measure import Measurement, model_weights
from linrec.core.replacements import Kind
from linrec.core.scores import COSTLIER, MEASURED, cheapest_first
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError, LinrecWarning
from linrec.interventions.budget import drop_words, parse_drop
from linrec.interventions.latency import PROMPT_TOKENS, compare_rates
from linrec.interventions.perplexity import (
    WindowNLL,
    budget_ppl,
    delta_ppl_interval,
    greedy_selection,
    joint_steps,
    parse_budget,
    swap_deltas,
    window_nll,
)
from linrec.interventions.replacement.ablations import ablations, block_kinds, depth_third, fitted_maps
from linrec.interventions.replacement.directory import save_replaced
from linrec.interventions.replacement.texts import TextPart
from linrec.interventions.surgery import n_stored, param_table, swapped
from linrec.interventions.tasks.evaluate import Evaluation, Prepared, TaskBudget, changes, evaluate
from linrec.models.arch import check_blocks, check_one_module
from linrec.progress import stage
from linrec.versions import versions


@dataclass
class Replacement:
    """The maps chosen (block -> replacement, in the order they go in), the record of how, and the measurement."""

    maps: dict[int, nn.Module]
    record: dict
    measurement: Measurement

    @property
    def none_fits(self) -> str | None:
        """Why no block was chosen (the budget, and the cheapest block's own cost), or None when some were."""
        if self.maps:
            return None
        selection, base = self.record["selection"], self.record["ppl"]["base"]
        alone = sorted(self.record["steps"][1:], key=lambda s: (s["delta_ppl"], s["block"]))
        costs = ", ".join(f"block {s['block']} {s['delta_ppl']:+.4g}" for s in alone[:5])
        budgets = []
        if selection["max_ppl_increase"] is not None:
            budgets.append(
                f"--max-ppl-increase {selection['max_ppl_increase']} (ΔPPL at most {selection['max_delta_ppl']:.4g} "
                f"on the model's perplexity {base:.4g})"
            )
        if selection.get("max_accuracy_drop") is not None:
            budgets.append(f"--max-accuracy-drop {selection['max_accuracy_drop']} (on every task's score)")
        why = (
            "each block alone raises the perplexity by more, the cheapest"
            if selection.get("max_accuracy_drop") is None
            else "each block alone takes the model past them (their own ΔPPL, the cheapest"
        )
        close = ")" if selection.get("max_accuracy_drop") is not None else ""
        return (
            f"no block fits the budget {' and '.join(budgets)}: {why} {costs}{close}; raise the budget or give --blocks"
        )

    def save(self, directory: str | Path, force: bool = False) -> Path:
        """Write the replacement directory (:func:`linrec.interventions.replacement.directory.save_replaced`); a
        selection that kept no block has nothing to write and is refused (:attr:`none_fits` says why)."""
        if self.none_fits is not None:
            raise LinrecError(self.none_fits)
        return save_replaced(directory, self.maps, self.record, force)


@dataclass
class Refitter:
    """Fits a block's map again on the inputs the model produces with the replacements kept so far in place (a
    capture of that block alone over the fit text), so later maps see what the modified model feeds them; keeps
    each re-fitted map and its k-fold R²_lin."""

    model: nn.Module
    batches: TokenBatches
    kinds: Mapping[int, Kind]
    folds: int
    seed: int
    maps: dict[int, nn.Module] = field(default_factory=dict)
    r2_lin: dict[int, float] = field(default_factory=dict)

    def __call__(self, kept: Mapping[int, nn.Module], block: int) -> nn.Module:
        with swapped(self.model, kept):
            again = Measurement.capture(
                self.model, self.batches, blocks=[block], folds=self.folds, seed=self.seed, progress=False
            )
            fit = (self.model, self.batches)
            self.maps[block] = fitted_maps(again, {block: self.kinds[block]}, fit=fit)[block]
        self.r2_lin[block] = float(again.table().r2_lin.iloc[0])
        return self.maps[block]


def capture_extras(order: str) -> frozenset[str]:
    """What :func:`replace`'s capture computes beyond the fit's needs (:mod:`linrec.core.extras`): the residual-stream
    scores where the candidates are ordered by one of them, nothing where by their measured ΔPPL."""
    return frozenset() if order == MEASURED else frozenset({SCORES})


def check_request(
    model_type: str | None,
    n_blocks: int,
    width: int,
    kind: str,
    blocks: Sequence[int] | None,
    budget: str | None,
    ablate: Sequence[str] = (),
    task_budget: str | None = None,
) -> tuple[Kind, list[int]]:
    """(the kind, the candidate blocks) of a request, from the model's config alone (so before its weights load):
    known kinds (``kind`` and those to ``ablate``) whose ranks are below ``width``, an FFN of one module, blocks in
    range and each named once, budgets above 0 (``budget`` on perplexity, ``task_budget`` on task scores), and
    blocks or a budget given."""
    parsed = Kind.parse(kind).check_width(width)
    for other in ablate:
        Kind.parse(other).check_width(width)
    check_one_module(model_type)
    if budget is not None:
        parse_budget(budget)
    if task_budget is not None:
        parse_drop(task_budget)
    if blocks is None:
        if budget is None and task_budget is None:
            raise LinrecError(
                "say which blocks to replace: --blocks 0,3 (these), or --max-ppl-increase X or --max-accuracy-drop X "
                "(chosen)"
            )
        return parsed, list(range(n_blocks))
    repeated = sorted({b for b in blocks if list(blocks).count(b) > 1})
    if repeated or not blocks:
        raise LinrecError(f"--blocks must name each block once; {repeated or 'none'} given otherwise")
    check_blocks(blocks, n_blocks)
    return parsed, list(blocks)


def check_measurement(
    measurement: Measurement, model: nn.Module, fit_batches: TokenBatches, blocks: Sequence[int]
) -> None:
    """Refuse a saved measurement made of other weights than ``model``'s, on other tokens than ``fit_batches``, or
    without one of ``blocks``, naming what differs."""
    made = measurement.provenance
    if made.tokens_sha256 != fit_batches.sha256:
        raise LinrecError(
            f"the measurement was made on other tokens ({made.rows:,} rows of {made.seq_len} from {made.text}, sha256 "
            f"{made.tokens_sha256[:12]}…) than this fit text gives ({fit_batches.n_rows:,} rows of "
            f"{fit_batches.seq_len}, sha256 {fit_batches.sha256[:12]}…); give the text, --max-rows and --seq-len it "
            "was measured with, or drop --measurement"
        )
    weights = model_weights(model)
    if made.weights is not None and weights is not None and made.weights != weights:
        raise LinrecError(
            f"the measurement was made of other weights ({made.model}: {made.weights}) than this model's ({weights}); "
            "measure this model, or drop --measurement"
        )
    missing = sorted(set(blocks) - set(measurement.blocks))
    if missing:
        raise LinrecError(
            f"the measurement holds blocks {measurement.blocks}, not the candidates {missing}; give --blocks among "
            "those, or drop --measurement"
        )


def first_tokens(batches: TokenBatches) -> int:
    """How many different tokens the windows of ``batches`` begin with (at the first kept column of each)."""
    starts = batches.attention_mask.to(torch.int8).argmax(1)
    return int(batches.input_ids[torch.arange(len(starts)), starts].unique().numel())


def warn_if_not_constant(batches: TokenBatches, final: pd.Series) -> None:
    """Warn that ``first-apart:mean`` is not exact when the windows of the fit text begin with different tokens (the
    first position's output then differs from window to window), with what the chosen blocks measured."""
    n = first_tokens(batches)
    if n > 1:
        warnings.warn(
            f"the fit text's windows begin with {n} different tokens, so first-apart:mean puts one constant vector "
            "where each block's output differs from window to window: it is not exact there (first-apart:own is). "
            f"Measured with the chosen blocks: ΔPPL {final.delta_ppl:+.4g} [{final.delta_ppl_low:+.4g}, "
            f"{final.delta_ppl_high:+.4g}]",
            LinrecWarning,
            stacklevel=3,
        )


def _plain(value: object) -> object:
    """A table cell as JSON writes it: None for a missing value, Python numbers for numpy ones (exact)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _records(table: pd.DataFrame) -> list[dict]:
    return [{k: _plain(v) for k, v in row.items()} for row in table.to_dict("records")]


def replace(
    model: nn.Module,
    fit_batches: TokenBatches,
    eval_batches: TokenBatches,
    *,
    kind: str = "affine",
    blocks: Sequence[int] | None = None,
    max_ppl_increase: str | None = None,
    folds: int = 5,
    seed: int = 0,
    progress: bool = True,
    name: str | None = None,
    weights: str | None = None,
    fit_text: TextPart | None = None,
    eval_text: TextPart | None = None,
    second_batches: TokenBatches | None = None,
    second_text: TextPart | None = None,
    refit: bool = False,
    ablate: Sequence[str] = (),
    order: str = MEASURED,
    measurement: Measurement | None = None,
    tasks: Prepared | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    max_accuracy_drop: str | None = None,
) -> Replacement:
    """Replace FFN blocks of ``model`` by maps of ``kind`` (``affine``, ``lowrank:K``, ``lowrank:P%``, ``mean``,
    ``zero``, ``first-apart:mean``, ``first-apart:own``, ``gated:RULE:SHARE``: :mod:`linrec.core.replacements`; a
    gated block keeps its FFN for the rows its gate does not route, so it stores more, not less, and saves compute
    only where those rows are skipped) fitted on ``fit_batches``,
    scored on ``eval_batches`` (other text: never the fit text). ``first-apart:mean`` on a fit text whose windows
    begin with different tokens draws a warning (:func:`warn_if_not_constant`).

    ``blocks`` alone: exactly these, in this order. ``max_ppl_increase`` (``2.5``, or ``"5%"`` of the model's
    perplexity): blocks chosen greedily from ``blocks`` (default: all) under that budget (module docstring).
    ``name``, ``weights``: the base model as given and its weights by content
    (:func:`linrec.models.weights_identity.weights_id`; defaults from the model's config); ``fit_text``, ``eval_text``:
    what the batches were cut from. ``second_batches`` (``second_text``): held-out text of another domain, on which the
    chosen set's ΔPPL is scored too (a block that looks free on one text can cost on another). Greedy decoding is timed
    before and after, in turns (:func:`linrec.interventions.latency.compare_rates`, a prompt from the evaluation text).
    When no block fits the budget, the result holds no maps and says why (:attr:`Replacement.none_fits`): the single
    costs and the step that broke the budget are still in its record. ``refit``: each block above one kept before it is
    fitted again with the kept blocks in place (:class:`Refitter`), its step scored with both maps (the one-shot one's
    joint ΔPPL in ``one_shot_delta_ppl``) and the re-fitted one kept; the order is still the one-shot maps' single ΔPPL.
    ``ablate``: kinds to compare first on every candidate block, each block swapped alone
    (:func:`linrec.interventions.replacement.ablations.ablations`: ΔPPL on both texts, decoding speed with a kind in
    every candidate), recorded as ``ablations``. ``order``: how the budget's candidates are tried, ``"measured"`` (each
    swapped alone first, cheapest first) or a score of the measurement's table (:data:`linrec.core.scores.COSTLIER`,
    :func:`linrec.core.scores.cheapest_first`: no pass of its own; a LinrecError where the table lacks it).
    ``measurement``: one already made of this model on ``fit_batches`` (``linrec measure --save``,
    :meth:`Measurement.load`), used instead of capturing again, its folds and seed with it; one of other weights or
    other tokens, or without a candidate block, is refused (:func:`check_measurement`). ``tasks``: a request
    :func:`linrec.interventions.tasks.evaluate.prepare`-d, scored with ``tokenizer`` on the model before and after (each
    headline score with its interval, and its change: ``tasks`` in the record); ``max_accuracy_drop`` (``0.02``, or
    ``"5%"`` of the model's own score): a second budget, beside ``max_ppl_increase`` or alone, that each step of the
    greedy selection must hold too (:class:`~linrec.interventions.tasks.evaluate.TaskBudget`: each task scored at every
    step within the perplexity budget, its headline score in the step's row). The model is left as it was; the maps are
    in the result.
    """
    config = getattr(model, "config", None)
    n_blocks, width = getattr(config, "num_hidden_layers", 0), getattr(config, "hidden_size", 0)
    parsed, candidates = check_request(
        getattr(config, "model_type", None), n_blocks, width, kind, blocks, max_ppl_increase, ablate, max_accuracy_drop
    )
    if (tasks is None) != (tokenizer is None) or (max_accuracy_drop is not None and tasks is None):
        raise LinrecError("task scores need the tasks and the model's tokenizer, and a task budget needs the tasks")
    if order != MEASURED and order not in COSTLIER:
        raise LinrecError(f"unknown order '{order}'; choose {MEASURED} or a score: {', '.join(COSTLIER)}")
    kinds = block_kinds(model, parsed, candidates)  # (one module per FFN, also where the config could not tell)
    if fit_batches.sha256 in {eval_batches.sha256, None if second_batches is None else second_batches.sha256}:
        raise LinrecError("the fit and evaluation batches are the same tokens; score the maps on other text")
    if measurement is None:
        measurement = Measurement.capture(
            model,
            fit_batches,
            blocks=candidates,
            folds=folds,
            seed=seed,
            progress=progress,
            name=name,
            weights=weights,
            text=None if fit_text is None else fit_text.name,
            text_sha256=None if fit_text is None else fit_text.sha256,
            extras=capture_extras(order),
        )
    else:
        check_measurement(measurement, model, fit_batches, candidates)
        folds, seed = measurement.provenance.folds, measurement.provenance.seed
    table = measurement.table(progress).set_index("block")
    maps = fitted_maps(measurement, kinds, progress, fit=(model, fit_batches))
    refitter = Refitter(model, fit_batches, kinds, folds, seed) if refit else None
    base = window_nll(model, eval_batches, progress)
    second_base = None if second_batches is None else window_nll(model, second_batches, progress)
    task_base = budget = None
    if tasks is not None:
        assert tokenizer is not None  # (checked above)
        with stage("scoring the tasks on the unmodified model", progress):
            task_base = evaluate(model, tokenizer, tasks, progress=progress)
        budget = TaskBudget(tasks, tokenizer, task_base, max_accuracy_drop, progress)
    check = None if max_accuracy_drop is None else budget
    prompt = first_prompt(eval_batches)
    compared = None
    if ablate:
        compared = ablations(
            model,
            eval_batches,
            measurement,
            ablate,
            candidates,
            second_batches=second_batches,
            base=base,
            second_base=second_base,
            prompt=prompt,
            fit_batches=fit_batches,
            progress=progress,
        )
    limit = math.inf if max_ppl_increase is None else budget_ppl(max_ppl_increase, base.ppl)
    if max_ppl_increase is None and max_accuracy_drop is None:
        steps = joint_steps(model, eval_batches, maps, candidates, base, progress=progress, refit=refitter)
        steps.insert(2, "single_delta_ppl", math.nan)
        single = None
    elif order == MEASURED:
        single = swap_deltas(model, eval_batches, maps, progress=progress, base=base)
        steps = greedy_selection(
            model, eval_batches, maps, max_ppl_increase, progress=progress, base=base, single=single, refit=refitter,
            check=check,
        )  # fmt: skip
    else:
        single = None
        ordered = [b for b in cheapest_first(table.reset_index(), order) if b in maps]
        steps = joint_steps(
            model, eval_batches, maps, ordered, base, limit, progress=progress, refit=refitter, check=check
        )
        steps.insert(2, "single_delta_ppl", math.nan)
    kept = [int(b) for b in steps.block[1:][steps.kept[1:]]]
    chosen = {b: maps[b] if refitter is None else refitter.maps.get(b, maps[b]) for b in kept}
    final = steps[steps.kept].iloc[-1]  # the model itself when no block fits (Replacement.none_fits)
    if parsed.first == "mean" and chosen:
        warn_if_not_constant(fit_batches, final)
    with stage("timing greedy decoding, with the chosen maps and without", progress):  # (no counter of its own)
        rates = compare_rates(model, prompt, lambda: swapped(model, chosen))
    task_record = None
    if task_base is not None and budget is not None and tokenizer is not None and tasks is not None:
        task_record = _task_record(model, chosen, tasks, tokenizer, task_base, budget, max_accuracy_drop, progress)
    stored = param_table(model, chosen).set_index("block")
    before = n_stored(model)
    record = {
        "base": {
            "model": measurement.provenance.model,
            "path": local_path(measurement.provenance.model),
            "weights": measurement.provenance.weights,
            "dtype": measurement.provenance.dtype,
            "width": width,
            "n_blocks": n_blocks,
        },
        "kind": str(parsed),
        "selection": {
            "rule": _rule(max_ppl_increase, limit, max_accuracy_drop, order),
            "order": order,
            "candidates": candidates,
            "max_ppl_increase": max_ppl_increase,
            "max_delta_ppl": None if max_ppl_increase is None else limit,
            "max_accuracy_drop": max_accuracy_drop,
            "single": None if single is None else _records(single),
            "skipped": [
                {
                    "block": int(block),
                    "delta_ppl": float(delta),
                    "why": "the joint ΔPPL with it exceeds the budget"
                    if delta > limit
                    else "a task's score with it falls by more than --max-accuracy-drop",
                }
                for block, delta in zip(
                    steps.block[1:][~steps.kept[1:]].astype(int), steps.delta_ppl[1:][~steps.kept[1:]]
                )
            ],
            "refit": refit,
        },
        "blocks": [
            {
                "block": b,
                "kind": str(kinds[b]),
                "depth": depth_third(b, n_blocks),
                "r2_lin": float(table.r2_lin[b]),
                "r2_lin_refit": None if refitter is None else refitter.r2_lin.get(b),
                "params": int(stored.params[b]),
                "original_params": int(stored.original_params[b]),
            }
            for b in kept
        ],
        "steps": _records(steps),
        "params": {"model_before": before, "model_after": before - int(final.params_saved)},
        "ppl": {
            "base": base.ppl,
            "replaced": float(final.ppl),
            "delta_ppl": float(final.delta_ppl),
            "delta_ppl_low": float(final.delta_ppl_low),
            "delta_ppl_high": float(final.delta_ppl_high),
        },
        "fit_text": _text(fit_text, fit_batches),
        "eval_text": _text(eval_text, eval_batches),
        "second_text": None
        if second_batches is None or second_base is None
        else _scored_text(model, chosen, second_batches, second_base, second_text, progress),
        "ablations": None if compared is None else _records(compared),
        "tasks": task_record,
        "latency": rates.record(),
        "measurement": {k: v for k, v in asdict(measurement.provenance).items() if k != "versions"},
        "versions": versions(),
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    return Replacement(chosen, record, measurement)


def _rule(max_ppl_increase: str | None, limit: float, max_accuracy_drop: str | None, order: str) -> str:
    """How the blocks were chosen, in words, for the record."""
    if max_ppl_increase is None and max_accuracy_drop is None:
        return "the blocks given, in the order given"
    budgets = [f"--max-ppl-increase {max_ppl_increase} (ΔPPL at most {limit:.6g})"] if max_ppl_increase else []
    if max_accuracy_drop is not None:
        budgets.append(f"--max-accuracy-drop {max_accuracy_drop} ({drop_words(max_accuracy_drop)})")
    return (
        f"greedy under {' and '.join(budgets)}, candidates ordered by "
        + ("their own ΔPPL" if order == MEASURED else f"their {order}, read as a cost")
        + ", cheapest first; a block that takes the joint scores over a budget is left out (skipped) and the next is "
        "tried"
    )


def _task_record(
    model: nn.Module,
    chosen: dict[int, nn.Module],
    tasks: Prepared,
    tokenizer: PreTrainedTokenizerBase,
    base: Evaluation,
    budget: TaskBudget,
    max_accuracy_drop: str | None,
    progress: bool,
) -> dict:
    """The record's ``tasks``: what was asked, the budget and each task's lowest allowed score, the scores before and
    with the ``chosen`` replacements (those the selection's last kept step scored, else scored now) and the
    changes."""
    after = budget.scored.get(frozenset(chosen))
    if after is None:
        with swapped(model, chosen), stage("scoring the tasks with the chosen maps", progress):
            after = evaluate(model, tokenizer, tasks, progress=progress) if chosen else base
    return {
        "tasks": list(tasks.request.tasks),
        "max_accuracy_drop": max_accuracy_drop,
        "lowest_allowed": budget.limits(),
        "base": base.record(),
        "replaced": after.record(),
        "changes": _records(changes(base, after)),
    }


def _scored_text(
    model: nn.Module,
    chosen: dict[int, nn.Module],
    batches: TokenBatches,
    base: WindowNLL,
    part: TextPart | None,
    progress: bool,
) -> dict:
    """The record of a text the ``chosen`` replacements are scored on besides the evaluation text (``base``: the
    unmodified model's window NLL on it): the text, the perplexity before and after, and the ΔPPL with its
    interval."""
    with swapped(model, chosen):
        replaced = window_nll(model, batches, progress) if chosen else base
    low, high = delta_ppl_interval(base, replaced)
    return {
        **_text(part, batches),
        "base_ppl": base.ppl,
        "replaced_ppl": replaced.ppl,
        "delta_ppl": replaced.ppl - base.ppl,
        "delta_ppl_low": low,
        "delta_ppl_high": high,
    }


def first_prompt(batches: TokenBatches, tokens: int = PROMPT_TOKENS) -> torch.Tensor:
    """The first ``tokens`` token ids (fewer when windows are shorter) of the first window without padding there,
    as a (1, length) prompt for :func:`linrec.interventions.latency.decode_rate`."""
    length = min(tokens, batches.seq_len)
    full = batches.attention_mask[:, :length].bool().all(1).nonzero().flatten()
    if not len(full):
        raise LinrecError(f"no evaluation window has {length} tokens without padding to time decoding from")
    return batches.input_ids[int(full[0]) : int(full[0]) + 1, :length]


def local_path(name: str) -> str | None:
    """The absolute path of a model given as a local path (None for a hub id or a packaged name), so a replacement
    directory still finds its base when it is loaded from another working directory."""
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else None


def _text(part: TextPart | None, batches: TokenBatches) -> dict:
    """The record of a text: what it is (when known) and the tokens cut from it."""
    known = asdict(part) if part is not None else {"name": "(not recorded)", "part": "(not recorded)", "sha256": None}
    return {
        **known,
        "tokens_sha256": batches.sha256,
        "rows": batches.n_rows,
        "windows": int(batches.input_ids.shape[0]),
        "seq_len": batches.seq_len,
    }
