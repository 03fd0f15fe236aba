"""Perplexity with FFN blocks swapped out: per-block ΔPPL and the compression frontier.

Perplexity is exp of the mean next-token negative log-likelihood over every predicted token of
the evaluation batches (token t+1 scored from tokens ≤ t; a pair is scored when both tokens are
real, not padding), accumulated in float64. The evaluation batches must come from held-out
text, never from the text whose rows fitted the replacements: cut them from a separate part of
the corpus (e.g. ``make_batches`` on a held-out split). The model must be a causal LM with its
head (``load_model`` loads one) and in eval mode.

* :func:`window_nll`: the summed NLL and the number of scored tokens of each evaluation window
  (sequence), from which :func:`perplexity` and the bootstrap below are computed.
* :func:`delta_ppl_interval`: a paired percentile bootstrap over evaluation windows for a ΔPPL.
* :func:`swap_deltas`: each block swapped alone, ΔPPL = PPL(swapped) - PPL(original), with its interval;
  :func:`removal_deltas`: each whole block (attention and FFN) removed alone, the same way.
* :func:`compression_frontier`: blocks swapped cumulatively in order of R²_lin, highest
  first; after each step the cumulative numbers saved and ΔPPL: the compression frontier.
* :func:`greedy_selection`: blocks added in order of their own measured ΔPPL, cheapest first, while the joint ΔPPL
  of all of them together stays within a budget (what ``linrec replace --max-ppl-increase`` chooses);
  :func:`budget_walk`: any order walked that way, blocks dropped by any mechanism, joint scores shared by set.

Every ΔPPL comes with ``delta_ppl_low`` and ``delta_ppl_high``, the bounds of its 95% interval from
:func:`delta_ppl_interval`: the windows, not the tokens, are resampled, since the tokens of one window
are scored from one another's context and are not independent draws; base and swapped model are
resampled together (the same windows), so the interval is that of the difference, much narrower than
either perplexity's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from linrec.core.capture import StopForward, input_device, require_eval
from linrec.core.replacements import RemovedBlock
from linrec.core.resume import decoder_layers, passing
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.interventions.budget import budget_ppl, parse_budget
from linrec.interventions.prefix import LayerPrefix
from linrec.interventions.surgery import ffn_site, n_stored, param_table, stands_for, swapped
from linrec.models.arch import Spec, ffn_blocks
from linrec.progress import progress_bar
from linrec.stats import percentile_interval

RESAMPLES = 2000
"""Bootstrap resamples of a ΔPPL interval: each 2.5% tail then rests on 50 resamples, which puts the Monte
Carlo error of the interval's ends well below its width."""

LEVEL = 0.95
"""The confidence level of every ΔPPL interval."""

Refit = Callable[[Mapping[int, nn.Module], int], nn.Module]
"""``refit(kept, block)``: a map for ``block`` fitted with the ``kept`` replacements (block -> module) in place."""

StepCheck = Callable[[nn.Module, frozenset[int]], tuple[dict[str, float], bool]]
"""``check(model, blocks)``, called with the blocks' replacements in place on a step within the perplexity budget,
and with no blocks for step 0 (the model itself): (columns for the step's row, whether the step is within the
check's own budget too), e.g. the task scores of :class:`linrec.interventions.tasks.evaluate.TaskBudget`."""


@dataclass(frozen=True)
class WindowNLL:
    """Per evaluation window (one sequence of the batches): the summed next-token NLL (float64) and the
    number of tokens scored; perplexity is exp(Σ nll / Σ tokens) over the windows."""

    nll: torch.Tensor
    tokens: torch.Tensor

    @property
    def ppl(self) -> float:
        """The perplexity over all windows."""
        return math.exp(float(self.nll.sum()) / int(self.tokens.sum()))


LOGITS_BYTES = 256 * 2**20
"""The most memory one forward's float32 logits may take: a batch whose logits would take more is scored a few
windows at a time, so a 262k-word vocabulary (Gemma 3) needs no more memory for them than a 50k one."""


def _vocabulary(model: nn.Module) -> int:
    """The width of the model's logits: its output embedding's rows, else its configuration's vocabulary."""
    heads = getattr(model, "get_output_embeddings", None)
    weight = getattr(heads() if callable(heads) else None, "weight", None)
    if isinstance(weight, torch.Tensor):
        return int(weight.shape[0])
    return int(getattr(getattr(model, "config", None), "vocab_size", 1))


def _windows_per_call(vocabulary: int, length: int) -> int:
    """Windows of ``length`` tokens scored in one forward call: :data:`LOGITS_BYTES` of float32 logits, at least one."""
    return max(1, LOGITS_BYTES // (length * vocabulary * 4))


def _calls(model: nn.Module, batches: TokenBatches) -> int:
    """How many forward calls :func:`_chunks` makes for ``batches``: the total of :func:`window_nll`'s bar."""
    vocabulary = _vocabulary(model)
    return sum(-(-len(b.input_ids) // _windows_per_call(vocabulary, b.input_ids.shape[1])) for b in batches)


def _chunks(model: nn.Module, batches: TokenBatches) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(token ids on the model's input device, attention mask on the CPU) of each forward call that scores ``batches``:
    each batch, :data:`LOGITS_BYTES` of logits at a time."""
    device = input_device(model)
    vocabulary = _vocabulary(model)
    for batch in batches:
        windows, length = batch.input_ids.shape
        step = _windows_per_call(vocabulary, length)
        for start in range(0, windows, step):
            ids, mask = batch.input_ids[start : start + step], batch.attention_mask[start : start + step]
            yield ids.to(device), mask


def _forward_each(model: nn.Module, batches: TokenBatches) -> None:
    """Make the forward calls of :func:`window_nll` on ``batches``, each ended early by a hook (for
    :class:`~linrec.interventions.prefix.LayerPrefix`)."""
    with torch.no_grad():
        for ids, mask in _chunks(model, batches):
            try:
                model(input_ids=ids, attention_mask=mask.to(ids.device))
            except StopForward:
                pass


def window_nll(model: nn.Module, batches: TokenBatches, progress: bool = False) -> WindowNLL:
    """The summed next-token NLL and scored-token count of each window of ``batches`` (held-out text), scored
    :data:`LOGITS_BYTES` of logits at a time."""
    require_eval(model, "perplexity")
    sums, counts = [], []
    with torch.no_grad():
        total = _calls(model, batches)  # (tqdm cannot count a generator's items)
        bar = progress_bar(_chunks(model, batches), total=total, desc="perplexity", unit="batch", disable=not progress)
        for ids, mask in bar:
            out = model(input_ids=ids, attention_mask=mask.to(ids.device))
            logits = getattr(out, "logits", None)
            if logits is None:
                raise LinrecError(
                    "the model returned no logits; perplexity needs a causal LM with its head (AutoModelForCausalLM)"
                )
            real = mask.bool()
            scored = (real[:, 1:] & real[:, :-1]).to(logits.device)
            targets = F.pad(ids[:, 1:], (0, 1), value=-100).to(logits.device)  # the last: no next token
            # Over the vocabulary as the logits lie in memory (rows of it), not a transposed view, which costs
            # several times more with a large vocabulary; the last position is ignored, so nothing is copied.
            nll = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
            nll = nll.view(targets.shape)[:, :-1]
            sums.append(torch.where(scored, nll.to(torch.float64), 0.0).sum(1).cpu())
            counts.append(scored.sum(1).cpu())
            del out, logits, nll  # before the next part's forward, not after it
    windows_nll = WindowNLL(torch.cat(sums), torch.cat(counts))
    if int(windows_nll.tokens.sum()) == 0:
        raise LinrecError("the evaluation batches contain no token pairs to score; use sequences of at least 2 tokens")
    return windows_nll


def perplexity(model: nn.Module, batches: TokenBatches, progress: bool = False) -> float:
    """exp(mean next-token NLL) of ``model`` over ``batches`` (held-out text)."""
    return window_nll(model, batches, progress).ppl


def delta_ppl_interval(
    base: WindowNLL, swapped: WindowNLL, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of PPL(swapped) - PPL(base), both scored on the same windows: each
    resample draws windows with replacement (seeded) and recomputes both perplexities on the same draw."""
    if base.tokens.shape != swapped.tokens.shape or not torch.equal(base.tokens, swapped.tokens):
        raise LinrecError("a paired ΔPPL interval needs both models scored on the same windows (equal token counts)")
    if resamples < 1:
        raise LinrecError(f"resamples must be at least 1; got {resamples}")
    n = len(base.tokens)
    drawn = torch.randint(n, (resamples, n), generator=torch.Generator().manual_seed(seed))
    tokens = base.tokens.to(torch.float64)[drawn].sum(1)
    deltas = torch.exp(swapped.nll[drawn].sum(1) / tokens) - torch.exp(base.nll[drawn].sum(1) / tokens)
    return percentile_interval(deltas, level)


PASS_COLUMNS = ("ppl", "delta_ppl", "delta_ppl_low", "delta_ppl_high")
"""What one perplexity pass of a changed model gives (:func:`_delta_row`): a row of every table that scores one."""


def pass_rows(single: pd.DataFrame) -> dict[int, dict[str, float]]:
    """Each block's :data:`PASS_COLUMNS` from a table of single-block passes (a ``block`` column, one row a block): what
    a joint step of that block alone reads instead of scoring it again."""
    values = single[list(PASS_COLUMNS)].to_numpy(dtype=float)
    return {int(b): dict(zip(PASS_COLUMNS, map(float, row), strict=True)) for b, row in zip(single.block, values)}


def _delta_row(base: WindowNLL, swapped: WindowNLL) -> dict[str, float]:
    low, high = delta_ppl_interval(base, swapped)
    return {"ppl": swapped.ppl, "delta_ppl": swapped.ppl - base.ppl, "delta_ppl_low": low, "delta_ppl_high": high}


def swap_deltas(
    model: nn.Module,
    eval_batches: TokenBatches,
    replacements: Mapping[int, nn.Module],
    spec: Spec = None,
    progress: bool = True,
    base: WindowNLL | None = None,
) -> pd.DataFrame:
    """Each block swapped alone: ``block, ppl, base_ppl, delta_ppl, delta_ppl_low, delta_ppl_high, params,
    original_params, ratio`` (the interval from :func:`delta_ppl_interval`, the last three from
    :func:`linrec.interventions.surgery.param_table`).

    ``base``: the unmodified model's :func:`window_nll` on ``eval_batches``, when already known (saves a pass).
    The layers below each swapped block are not computed again for it (:mod:`linrec.interventions.prefix`): the
    same numbers, bit for bit, in about half the layers' time when every block is swapped.
    """
    return variant_deltas(model, eval_batches, sorted(replacements.items()), spec, progress, base)


def variant_deltas(
    model: nn.Module,
    eval_batches: TokenBatches,
    variants: Sequence[tuple[int, nn.Module]],
    spec: Spec = None,
    progress: bool = True,
    base: WindowNLL | None = None,
) -> pd.DataFrame:
    """Each (block, replacement) of ``variants`` swapped alone, several to a block where given: the columns of
    :func:`swap_deltas`, a row per variant in the order given. The variants are scored in depth order, so the
    layers below a block are computed once for all of its variants and those of the blocks above it
    (:mod:`linrec.interventions.prefix`; gated maps at several shares of rows, each kind of replacement): the
    same numbers, bit for bit, as scoring each set apart."""
    order = sorted(range(len(variants)), key=lambda i: variants[i][0])  # stable: a block's variants as given
    removal = bool(variants) and all(isinstance(r, RemovedBlock) for _, r in variants)
    changes = [(variants[i][0], lambda i=i: swapped(model, dict([variants[i]]), spec)) for i in order]
    table = _each_alone(model, eval_batches, changes, spec, progress, base, "removal ΔPPL" if removal else "swap ΔPPL")
    stored = pd.concat([param_table(model, dict([variants[i]]), spec) for i in order] or [param_table(model, {}, spec)],
                       ignore_index=True)  # fmt: skip
    scored = pd.concat([table, stored[["params", "original_params", "ratio"]]], axis=1)
    return scored.iloc[sorted(range(len(order)), key=order.__getitem__)].reset_index(drop=True)


def removal_deltas(
    model: nn.Module,
    eval_batches: TokenBatches,
    blocks: Sequence[int],
    progress: bool = True,
    base: WindowNLL | None = None,
) -> pd.DataFrame:
    """Each of ``blocks`` removed alone, attention and FFN (its decoder layer hands its input on:
    :func:`linrec.core.resume.passing`), as layer pruning does: the columns of :func:`swap_deltas` but the numbers,
    ``params`` the layer's own. A LinrecError where the model's decoder layers cannot be found."""
    layers = decoder_layers(model, ffn_blocks(model))
    if layers is None:
        raise LinrecError("whole blocks can be removed only where the model's decoder layers are found (no spec)")
    changes = [(b, lambda b=b: passing([layers[b]])) for b in sorted(blocks)]
    table = _each_alone(model, eval_batches, changes, None, progress, base, "removal ΔPPL")
    return table.assign(params=[n_stored(layers[b]) for b in table.block])


def budget_walk(
    model: nn.Module,
    eval_batches: TokenBatches,
    order: Sequence[int],
    dropped: Callable[[list[int]], AbstractContextManager[Any]],
    base: WindowNLL,
    budget: float,
    saves: Mapping[int, int],
    memo: dict[frozenset[int], dict[str, float]] | None = None,
) -> pd.DataFrame:
    """The blocks of ``order`` dropped one more at a time, each step scored with all of them dropped
    (``dropped(blocks)``: the model so changed), until a step's joint ΔPPL exceeds ``budget`` (that step recorded,
    ``kept`` False, and the walk ended). Columns: ``step, block, blocks, numbers_saved`` (``saves``: what dropping
    each block saves), ``ppl, delta_ppl, delta_ppl_low, delta_ppl_high, kept``; step 0 is the model itself.
    ``memo``: the joint scores by set of blocks, shared by walks of several orders (the model depends on which blocks
    are dropped, not in which order), so a set two orders share is scored once."""
    memo = {} if memo is None else memo
    rows = [{"step": 0, "block": None, "blocks": 0, "numbers_saved": 0, **_delta_row(base, base), "kept": True}]
    for step, block in enumerate(order, start=1):
        chosen = [int(b) for b in order[:step]]
        key = frozenset(chosen)
        if key not in memo:
            with dropped(chosen):
                memo[key] = _delta_row(base, window_nll(model, eval_batches))
        row = memo[key]
        saved = sum(saves[b] for b in chosen)
        rows.append({"step": step, "block": int(block), "blocks": step, "numbers_saved": saved, **row,
                     "kept": row["delta_ppl"] <= budget})  # fmt: skip
        if not rows[-1]["kept"]:
            break
    return pd.DataFrame(rows).astype({"block": "Int64"})


def _each_alone(
    model: nn.Module,
    eval_batches: TokenBatches,
    changes: Sequence[tuple[int, Callable[[], AbstractContextManager[Any]]]],
    spec: Spec,
    progress: bool,
    base: WindowNLL | None,
    what: str,
) -> pd.DataFrame:
    """``block, ppl, base_ppl, delta_ppl, delta_ppl_low, delta_ppl_high`` of the model with each (block, change) of
    ``changes`` (in depth order; a block may come more than once) made alone; the layers below each block are not
    computed again for it (:mod:`linrec.interventions.prefix`)."""
    base = window_nll(model, eval_batches) if base is None else base
    below = LayerPrefix(decoder_layers(model, ffn_blocks(model, spec)), lambda: _forward_each(model, eval_batches))
    rows = []
    for b, changed in progress_bar(changes, desc=what, unit="block", disable=not progress):
        with changed(), below.below(b):
            scored = window_nll(model, eval_batches)
        rows.append({"block": b, "base_ppl": base.ppl, **_delta_row(base, scored)})
    return pd.DataFrame(rows, columns=["block", "ppl", "base_ppl", "delta_ppl", "delta_ppl_low", "delta_ppl_high"])


def joint_steps(
    model: nn.Module,
    eval_batches: TokenBatches,
    replacements: Mapping[int, nn.Module],
    order: list[int],
    base: WindowNLL,
    budget: float = math.inf,
    spec: Spec = None,
    progress: bool = True,
    refit: Refit | None = None,
    alone: Mapping[Any, Mapping[Any, float]] | None = None,
    check: StepCheck | None = None,
) -> pd.DataFrame:
    """Step 0 the model itself, then the blocks of ``order`` added one at a time, each step scored with every kept
    block and its own in place (the joint ΔPPL). A block whose joint ΔPPL exceeds ``budget`` is recorded with
    ``kept`` False and left out, and the walk goes on with the next (a block after it may still fit). Columns:
    ``step, block, params_saved`` (with the step's block in place),
    ``ffn_saved_fraction, model_saved_fraction, ppl, delta_ppl, delta_ppl_low, delta_ppl_high, kept``.

    ``refit(kept, block)``: a step whose block lies above a kept one gets the map this returns, fitted with the
    ``kept`` replacements in place, instead of its map in ``replacements`` (fitted on the unmodified model, which
    feeds a block below every kept one exactly the same inputs); the step is then scored with both, the one-shot
    map's joint ΔPPL in ``one_shot_delta_ppl`` (``_low``, ``_high``), and the walk goes on with the re-fitted one.
    ``alone``: each block's scores swapped alone (``ppl, delta_ppl, delta_ppl_low, delta_ppl_high``, as
    :func:`swap_deltas` gives them), used for a step while no block is kept (the same model, so no pass is spent on
    it again: a budget nothing fits costs only the single swaps). ``check``: a second budget (:data:`StepCheck`),
    asked on step 0 (no block: the model itself) and on each step within ``budget``; its columns join the rows it was
    asked on (NaN on the others) and a step is kept when both budgets hold."""
    ffn_total = sum(n_stored(ffn_site(model, b.index, spec)[2]) for b in ffn_blocks(model, spec))
    model_total = n_stored(model)
    rows = [{"step": 0, "block": None, "params_saved": 0, **_delta_row(base, base), "kept": True}]
    if check is not None:
        rows[0] |= check(model, frozenset())[0]  # the model itself: its own scores
    if refit is not None:
        rows[0] |= {f"one_shot_{k}": 0.0 for k in ("delta_ppl", "delta_ppl_low", "delta_ppl_high")}
    saved, kept = 0, dict[int, nn.Module]()
    for step, b in enumerate(progress_bar(order, desc="joint ΔPPL", unit="step", disable=not progress), start=1):
        used = replacements[b] if refit is None or min(kept, default=b) >= b else refit(kept, b)
        if not kept and alone is not None and b in alone:
            row = {k: float(alone[b][k]) for k in PASS_COLUMNS}
        else:
            with swapped(model, {**kept, b: used}, spec):
                row = _delta_row(base, window_nll(model, eval_batches))
        if refit is not None:
            one_shot = row
            if used is not replacements[b]:
                with swapped(model, {**kept, b: replacements[b]}, spec):
                    one_shot = _delta_row(base, window_nll(model, eval_batches))
            row |= {f"one_shot_{k}": one_shot[k] for k in ("delta_ppl", "delta_ppl_low", "delta_ppl_high")}
        within = row["delta_ppl"] <= budget
        if check is not None and within:
            with swapped(model, {**kept, b: used}, spec):
                columns, within = check(model, frozenset({*kept, b}))
            row = {**row, **columns}
        # (counted once placed: a kind that runs the block's own FFN on some rows is handed it there)
        trial = saved + n_stored(stands_for(model, b, used, spec)) - n_stored(used)
        rows.append({"step": step, "block": b, "params_saved": trial, **row, "kept": within})
        if rows[-1]["kept"]:
            saved, kept = trial, {**kept, b: used}
    table = pd.DataFrame(rows).astype({"block": "Int64"})
    table.insert(3, "ffn_saved_fraction", table.params_saved / ffn_total)
    table.insert(4, "model_saved_fraction", table.params_saved / model_total)
    return table


def compression_frontier(
    model: nn.Module,
    eval_batches: TokenBatches,
    replacements: Mapping[int, nn.Module],
    r2_lin: Mapping[int, float],
    spec: Spec = None,
    progress: bool = True,
    base: WindowNLL | None = None,
) -> pd.DataFrame:
    """Swap blocks cumulatively in order of R²_lin (highest first); one row per step, step 0 the original.

    ``base``: the unmodified model's :func:`window_nll` on ``eval_batches``, when already known (saves a pass).

    Columns: ``step, block`` (added at this step), ``r2_lin, params_saved`` (cumulative, numbers
    stored), ``ffn_saved_fraction`` (of all FFN blocks' numbers), ``model_saved_fraction`` (of
    the model's), ``ppl, delta_ppl, delta_ppl_low, delta_ppl_high`` (the interval of :func:`delta_ppl_interval`).
    """
    missing = [b for b in replacements if b not in r2_lin]
    if missing:
        raise LinrecError(f"no R²_lin for blocks {missing}; give r2_lin for every replaced block")
    order = sorted(replacements, key=lambda b: (-r2_lin[b], b))
    base = window_nll(model, eval_batches) if base is None else base
    table = joint_steps(model, eval_batches, replacements, order, base, spec=spec, progress=progress)
    table.insert(2, "r2_lin", [None, *(r2_lin[b] for b in order)])
    return table.drop(columns="kept")


def greedy_selection(
    model: nn.Module,
    eval_batches: TokenBatches,
    replacements: Mapping[int, nn.Module],
    max_increase: str | float | None,
    spec: Spec = None,
    progress: bool = True,
    base: WindowNLL | None = None,
    single: pd.DataFrame | None = None,
    refit: Refit | None = None,
    check: StepCheck | None = None,
) -> pd.DataFrame:
    """The blocks of ``replacements`` chosen greedily under a perplexity budget, one row per step (step 0 the model).

    Order: each block's own ΔPPL swapped alone (``single``: a :func:`swap_deltas` table of these replacements on
    ``eval_batches``, measured when None), cheapest first, ties by block. Each step adds the next block to those
    kept and scores them together: the joint ΔPPL, which is not the sum of single costs. A block whose joint ΔPPL
    (the point estimate) exceeds ``max_increase`` (:func:`parse_budget`: absolute, or ``"5%"`` of the unmodified
    perplexity) is recorded with ``kept`` False and skipped, and the next is tried.

    Columns: those of :func:`compression_frontier` with ``single_delta_ppl`` (the block's own ΔPPL) in place of
    ``r2_lin``, then ``kept``; ``params_saved`` counts every kept block and the step's own. ``refit``: each step
    whose block lies above a kept one re-fits it with the kept ones in place (:func:`joint_steps`); the order stays
    the one the one-shot maps measured. ``check``: a second budget a kept step must hold too (:func:`joint_steps`);
    ``max_increase`` None: the check's budget alone.
    """
    if max_increase is not None:
        parse_budget(max_increase)  # before any work
    base = window_nll(model, eval_batches) if base is None else base
    single = swap_deltas(model, eval_batches, replacements, spec, progress, base=base) if single is None else single
    missing = sorted(set(replacements) - set(single.block))
    if missing:
        raise LinrecError(f"the single-block table lacks blocks {missing}; measure them with swap_deltas")
    alone = dict(zip(single.block.astype(int), single.delta_ppl))
    order = sorted(replacements, key=lambda b: (alone[b], b))
    limit = math.inf if max_increase is None else budget_ppl(max_increase, base.ppl)
    table = joint_steps(
        model, eval_batches, replacements, order, base, limit, spec, progress, refit, pass_rows(single), check
    )
    table.insert(2, "single_delta_ppl", [0.0, *(alone[b] for b in table.block[1:])])
    return table
