"""What ``linrec replace`` says it understood and is about to do, on stderr before the work: the budget as it read it
(before torch loads), the candidate blocks and kinds and the perplexity passes they cost (from the model's config,
before its weights load), and an estimate of the passes' time (one batch timed once the weights are in).

The passes are counted as :func:`linrec.interventions.replacement.replace.replace` runs them (its tests hold the two
together); a swap alone does not compute the layers below the block again, so the counts and the time are upper
bounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from linrec.commands.args import block_spans
from linrec.core.scores import MEASURED
from linrec.interventions.budget import budget_words, drop_words
from linrec.progress import duration

if TYPE_CHECKING:
    from torch import nn

    from linrec.data.tokens import TokenBatches


def say(line: str) -> None:
    """One line of what ``linrec replace`` is about to do, on stderr beside its progress."""
    print(f"replace: {line}", file=sys.stderr)


def echo_request(args: argparse.Namespace) -> None:
    """The selection as read from the options: the budget in words and the order its candidates are tried in, or the
    blocks given."""
    if args.tasks is not None:
        say(f"--tasks {args.tasks} -> scored on the model before and after" + (
            ", and at every step within the perplexity budget (--max-accuracy-drop)"
            if args.max_accuracy_drop is not None else ""))  # fmt: skip
    if args.max_ppl_increase is None and args.max_accuracy_drop is None:
        say(f"--blocks {','.join(map(str, args.blocks))} -> these blocks replaced by {args.kind} maps, in this order")
        return
    order = "their own ΔPPL, each swapped alone first" if args.order == MEASURED else f"their {args.order}"
    budgets = [] if args.max_ppl_increase is None else [
        f"--max-ppl-increase {args.max_ppl_increase} -> {budget_words(args.max_ppl_increase)}"
    ]  # fmt: skip
    if args.max_accuracy_drop is not None:
        budgets.append(f"--max-accuracy-drop {args.max_accuracy_drop} -> {drop_words(args.max_accuracy_drop)}")
    say(f"{'; '.join(budgets)}; candidates tried cheapest first by {order}")


def perplexity_passes(args: argparse.Namespace, candidates: int) -> tuple[int, int, list[str]]:
    """(the most passes over the held-out text, over the second text, the held-out ones in words) that ``replace``
    runs for ``candidates`` blocks: the model once; each ``--ablate`` kind on each candidate alone; then the blocks
    given, one joint step each, or under a budget each candidate alone (``--order measured``) and a joint step per
    candidate (the first one's is its pass alone), and with ``--refit`` one more per step above a kept block. The
    second text: the model, the ablations and the chosen blocks once."""
    ablations = len(args.ablate) * candidates
    parts = [(1, "of the model"), (ablations, f"for --ablate ({len(args.ablate)} kinds on each block alone)")]
    if (args.max_ppl_increase is not None or args.max_accuracy_drop is not None) and args.order == MEASURED:
        parts += [(candidates, "of each block alone"), (candidates - 1, "joint steps at most")]
    else:
        parts += [(candidates, "joint steps")]
    if args.refit:
        parts += [(candidates - 1, "with the one-shot maps at most (--refit)")]
    second = 0 if args.second_text_file is None and args.second_corpus is None else 2 + ablations
    return sum(n for n, _ in parts), second, [f"{n} {what}" for n, what in parts if n]


def echo_candidates(
    args: argparse.Namespace, candidates: Sequence[int], n_blocks: int, batches: Sequence[TokenBatches]
) -> None:
    """The candidate blocks and kinds of a model of ``n_blocks``, and the perplexity passes they cost over the held-out
    ``batches[1]`` (and the second text's ``batches[2]``)."""
    ablate = f"; first each alone as {', '.join(args.ablate)}" if args.ablate else ""
    every = f"all {n_blocks}" if len(candidates) == n_blocks else f"{len(candidates)} of {n_blocks}"
    say(f"candidates: blocks {block_spans(candidates)} ({every}), kind {args.kind}{ablate}")
    held, second, parts = perplexity_passes(args, len(candidates))
    other = f", and {second} over the second text's {batches[2].n_rows:,}" if second else ""
    say(
        f"perplexity passes: at most {held} over {batches[1].n_rows:,} held-out rows ({', '.join(parts)}){other}; "
        "then decoding is timed before and after"
    )


def echo_estimate(args: argparse.Namespace, model: nn.Module, candidates: int, batches: Sequence[TokenBatches]) -> None:
    """An estimate of the perplexity passes' time: the first held-out batch timed once (high when the first call warms
    up), times the batches of all passes."""
    from linrec.interventions.perplexity import window_nll

    held = batches[1]
    start = time.perf_counter()
    window_nll(model, held.first(held.batch_size * held.seq_len))
    per_batch = time.perf_counter() - start
    passes, second, _ = perplexity_passes(args, candidates)
    total = per_batch * (passes * len(held) + (second * len(batches[2]) if second else 0))
    say(
        f"estimate: at most about {duration(total)} for these passes (one batch of {held.batch_size} windows timed: "
        f"{per_batch:.2g} s; the capture, the fits and the decoding come on top)"
    )
