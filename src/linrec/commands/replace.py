"""``linrec replace``: replace FFN blocks of a model by fitted maps and write the result as a replacement directory.

The maps are fitted on one part of the text and perplexity is scored on another, never overlapping: a corpus's fit
and eval splits, or, for ``--text-file``, the file's first four fifths and its last fifth (cut at a line break).
Everything that can be checked before the model loads is: before torch is imported (a second or more), the kind, the
budget, the blocks, ``--out`` and the texts; then the device; then, from the model's config and tokenizer before its
weights load, the blocks against the model, the kind's rank against the width, whether the FFN is one module, and
whether the text fills the folds. What it understood is said on the way (:mod:`linrec.commands.replace_plan`);
:func:`linrec.interventions.replacement.replace.replace` does the work.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from linrec.commands.args import (
    DTYPES,
    HelpFormatter,
    add_task_options,
    add_text_options,
    block_indices,
    positive_int,
    seed,
    task_request,
    warn_if_short,
)
from linrec.commands.replace_plan import echo_candidates, echo_estimate, echo_request
from linrec.core.scores import COSTLIER, MEASURED
from linrec.errors import LinrecError
from linrec.experiment.budgets import ROWS_PER_DIMENSION, rows_to_ask
from linrec.interventions.replacement.texts import TextPart

if TYPE_CHECKING:
    from torch import nn
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

    from linrec.core.measure import Measurement
    from linrec.data.tokens import TokenBatches

EVAL_SHARE = 0.2
"""The share of a ``--text-file`` held out for evaluation: its end, from the first line break after 80 % of it."""


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec replace``; its handler is ``args.handler``."""
    from linrec.data.corpora import corpus_names

    p = sub.add_parser(
        "replace",
        formatter_class=HelpFormatter,
        description="Replace FFN blocks of a model by maps fitted on a text (the blocks given, or blocks chosen\n"
        "under a perplexity budget), score perplexity on held-out text, and write a directory that\n"
        "linrec.load_replaced (or linrec.load_model, or linrec measure --model DIR) loads:\n"
        "replacements.safetensors, linrec-replacement.json and report.md.",
    )
    p.add_argument(
        "--model", required=True, metavar="MODEL", help="hub id, local directory, .gguf file or packaged model"
    )
    p.add_argument("--revision", help="hub revision of --model")
    add_text_options(
        p,
        required=True,
        file_help="a UTF-8 text file: its first four fifths fit the maps, its last fifth (from a line break) scores "
        "them",
        corpus_help="a named corpus (its fit and eval splits), one of: {names}",
    )
    second = p.add_mutually_exclusive_group()
    second.add_argument(
        "--second-text-file",
        type=Path,
        metavar="FILE",
        help="a UTF-8 text of another domain, never fitted on: the chosen blocks' ΔPPL is scored on it too",
    )
    names = corpus_names()
    second.add_argument(
        "--second-corpus",
        choices=names,
        metavar="NAME",
        help=f"the same from a named corpus (its eval split), one of: {', '.join(names)}",
    )
    p.add_argument(
        "--blocks",
        type=block_indices,
        help="the blocks to replace, in this order (with --max-ppl-increase: the candidates; default all)",
    )
    p.add_argument(
        "--max-ppl-increase",
        metavar="X",
        help="choose blocks greedily while the joint ΔPPL stays at most X (absolute, e.g. 2.5) or X%% of the model's "
        "perplexity (e.g. 5%%); candidates go in the order of their own ΔPPL, cheapest first, and one that takes the "
        "joint ΔPPL over X is skipped (the record lists it) and the next is tried",
    )
    p.add_argument(
        "--max-accuracy-drop",
        metavar="X",
        help="with --tasks, a budget on each task's score (accuracy, pass@1) beside --max-ppl-increase or alone: a "
        "step is kept only where every score falls by at most X below the model's own (absolute, 0.02 = two points, "
        "or X%% of it); the tasks are scored at every step within the perplexity budget",
    )
    add_task_options(p, required=False)
    p.add_argument(
        "--kind",
        default="affine",
        help="affine, lowrank:K (rank K below the width), lowrank:P%% (the largest rank that stores at most P%% of "
        "the FFN's numbers), mean, zero (the FFN removed), or first-apart:mean / first-apart:own: the affine map "
        "fitted on the positions after each sequence's first, and at the first position its mean output (exact when "
        "every window starts with one token, as after a BOS) or the block's own (exact; its FFN stays in use there); "
        "or gated:RULE:SHARE: a gate sends a SHARE of the rows (e.g. 0.9 or 90%%) to the affine map fitted on "
        "exactly those rows and the rest to the block's own FFN, which stays in use (RULE norm: the rows of the "
        "largest FFN input go to the FFN; logistic: a classifier of width + 1 numbers trained to find the rows the "
        "affine map gets most wrong; two more passes over the fit text); "
        "or remove: the whole block, attention and FFN, as depth pruning does (a model of fewer layers, which "
        "linrec export writes as a plain checkpoint)",
    )
    p.add_argument(
        "--ablate",
        default="",
        metavar="KINDS",
        help="before choosing, swap each candidate block alone for each of these kinds (comma-separated, e.g. "
        "zero,mean,affine,lowrank:64) and record ΔPPL on both texts and decoding speed per kind, by thirds of depth",
    )
    p.add_argument(
        "--order",
        default=MEASURED,
        choices=[MEASURED, *COSTLIER],
        metavar="ORDER",
        help="with --max-ppl-increase, the order the candidates are tried in: 'measured' (the default) swaps each "
        "candidate alone first and tries the cheapest first, one perplexity pass per candidate more; or a score of "
        f"the measurement's table ({', '.join(COSTLIER)}), cheapest by its reading first, no pass of its own. "
        "Chapter 11 of the book sets every score against the measured cost on the project's models: no score "
        "guarantees the budget the way measuring does, hence the default",
    )
    p.add_argument(
        "--refit",
        action="store_true",
        help="fit each block that lies above a block kept before it again, with the kept blocks in place (one "
        "capture of that block per step), and score its step with both maps; the re-fitted ones are kept",
    )
    p.add_argument(
        "--measurement",
        type=Path,
        metavar="DIR",
        help="a measurement saved by linrec measure --save DIR of this model on this fit text: its moments are used "
        "instead of capturing again (its folds and seed with them); one of other weights or tokens is refused",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="the directory to write (new or empty)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists and is not empty")
    p.add_argument(
        "--max-rows",
        type=positive_int,
        help=f"token rows per block to fit on (default: {ROWS_PER_DIMENSION} per input dimension of the model; all "
        "of the fit text, with a warning, when it is shorter)",
    )
    p.add_argument(
        "--eval-rows",
        type=positive_int,
        default=16_384,
        help="token rows to score perplexity on (at most all of the held-out text)",
    )
    p.add_argument("--seq-len", type=positive_int, default=128, help="tokens per window")
    p.add_argument("--folds", type=positive_int, default=5, help="k of the k-fold R²_lin the record gives each block")
    p.add_argument("--seed", type=seed, default=0, help="seed of the fold assignment")
    p.add_argument("--batch-size", type=positive_int, default=8, help="sequences per forward pass")
    p.add_argument("--device", help="cuda, mps, cpu, cuda:1 ... (default: the first available of cuda, mps, cpu)")
    p.add_argument("--dtype", choices=DTYPES, metavar="DTYPE", help="one of: %(choices)s")
    p.add_argument("--device-map", help="'auto' to spread a large model over the available devices (accelerate)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_replace)


def kind_list(value: str) -> tuple[str, ...]:
    """``--ablate``'s kinds, each known (:meth:`linrec.core.kinds.Kind.parse`), each named once."""
    from linrec.core.kinds import Kind

    kinds = tuple(k.strip() for k in value.split(",")) if value else ()
    for k in kinds:
        Kind.parse(k)
    if len(set(kinds)) != len(kinds):
        raise LinrecError(f"--ablate must name each kind once; got {value}")
    return kinds


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def split_text_file(path: Path) -> tuple[tuple[str, TextPart], tuple[str, TextPart]]:
    """((fit text, its record), (evaluation text, its record)) of a file: its first four fifths and the rest, cut at
    the first line break after :data:`EVAL_SHARE` of its characters from the end (exactly there when none follows)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise LinrecError(f"cannot read --text-file {path} as UTF-8 text: {err}") from err
    if not text.strip():
        raise LinrecError(f"the text {path} is empty; give a text to fit the maps on and score them")
    at = round(len(text) * (1 - EVAL_SHARE))
    cut = text.find("\n", at) + 1 or at
    fit, held = text[:cut], text[cut:]
    line = fit.count("\n") + 1
    return (
        (fit, TextPart(str(path), f"its first {len(fit):,} characters (lines 1 to {line - 1})", _sha256(fit))),
        (held, TextPart(str(path), f"its last {len(held):,} characters (from line {line}), held out", _sha256(held))),
    )


def _texts(
    args: argparse.Namespace,
) -> tuple[tuple[str, TextPart], tuple[str, TextPart], tuple[int, ...] | None]:
    """The fit and evaluation texts with their records, from --text-file or --corpus, and where the fit text's
    documents start (a corpus's, so folds keep documents whole as ``linrec measure`` keeps them; None for a file)."""
    if args.text_file is not None:
        return (*split_text_file(args.text_file), None)
    from linrec.data.corpora import load_corpus

    corpus = load_corpus(args.corpus)
    return (
        (corpus.fit_text, TextPart(corpus.name, "its fit split", _sha256(corpus.fit_text))),
        (corpus.eval_text, TextPart(corpus.name, "its eval split, held out", _sha256(corpus.eval_text))),
        corpus.fit_documents or None,
    )


def _replace(args: argparse.Namespace) -> int:
    """Check everything that can be checked (module docstring), say what was understood, load the model, replace,
    write ``--out`` and print the steps."""
    from linrec.cache import check_cache
    from linrec.core.kinds import Kind
    from linrec.files import check_new_directory
    from linrec.interventions.budget import parse_budget, parse_drop
    from linrec.models.packaged import PACKAGED, packaged_file

    Kind.parse(args.kind)
    args.ablate = kind_list(args.ablate)
    if args.max_ppl_increase is not None:
        parse_budget(args.max_ppl_increase)
    request = task_request(args)
    if args.max_accuracy_drop is not None:
        if request is None:
            raise LinrecError("--max-accuracy-drop is a budget on task scores; say which with --tasks")
        parse_drop(args.max_accuracy_drop)
    if args.blocks is not None and len(set(args.blocks)) != len(args.blocks):
        raise LinrecError(f"--blocks must name each block once; got {','.join(map(str, args.blocks))}")
    greedy = args.max_ppl_increase is not None or args.max_accuracy_drop is not None
    if args.blocks is None and not greedy:
        raise LinrecError(
            "say which blocks to replace: --blocks 0,3 (these), or --max-ppl-increase X or --max-accuracy-drop X "
            "(chosen)"
        )
    if args.order != MEASURED and not greedy:
        raise LinrecError("--order says how --max-ppl-increase tries the candidates; --blocks alone go in as given")
    if args.folds < 2:
        raise LinrecError(f"--folds must be at least 2; got {args.folds}")
    check_new_directory(args.out, "--out", args.force)
    if args.model in PACKAGED or args.model.lower().endswith(".gguf"):
        check_cache()  # dequantised GGUF weights live there
    (fit_text, fit_part), (eval_text, eval_part), documents = _texts(args)
    second_text, second_part = _second_text(args)
    prepared_tasks = None
    if request is not None:
        from linrec.interventions.tasks.evaluate import prepare

        prepared_tasks = prepare(request)  # the tasks and their data, before the model
    if not args.no_progress:
        echo_request(args)

    from linrec.interventions.replacement.directory import is_replacement_dir
    from linrec.models.loading import check_device_map, load_pretrained, pick_device
    from linrec.threads import set_threads

    set_threads()
    if is_replacement_dir(args.model):
        raise LinrecError(f"{args.model} is a replacement directory; replace blocks of its base model instead")
    check_device_map(args.device_map, args.device)
    if args.device:
        pick_device(args.device)
    measured = None
    if args.measurement is not None:
        from linrec.core.measure import Measurement

        measured = Measurement.load(args.measurement)
        args.folds, args.seed = measured.provenance.folds, measured.provenance.seed
    prepared: list[tuple[list[int], list[TokenBatches]]] = []  # the candidates and batches, from config and tokenizer
    model, tokenizer = load_pretrained(
        str(packaged_file(args.model)) if args.model in PACKAGED else args.model,
        revision=args.revision,
        dtype=args.dtype,
        device=args.device,
        device_map=args.device_map,
        supported_only=True,
        before_weights=lambda config, tok: prepared.append(
            _batches(args, config, tok, (fit_text, documents), eval_text, second_text)
        ),
    )
    candidates, batches = prepared[0]
    if not args.no_progress:
        echo_estimate(args, model, len(candidates), batches)
        _echo_measuring(args, model, candidates, batches[0], measured)
    from linrec.interventions.replacement.replace import replace

    result = replace(
        model,
        batches[0],
        batches[1],
        kind=args.kind,
        blocks=args.blocks,
        max_ppl_increase=args.max_ppl_increase,
        folds=args.folds,
        seed=args.seed,
        progress=not args.no_progress,
        name=args.model,
        fit_text=fit_part,
        eval_text=eval_part,
        second_batches=batches[2] if len(batches) > 2 else None,
        second_text=second_part,
        refit=args.refit,
        ablate=args.ablate,
        order=args.order,
        measurement=measured,
        tasks=prepared_tasks,
        tokenizer=None if prepared_tasks is None else tokenizer,
        max_accuracy_drop=args.max_accuracy_drop,
    )
    if result.none_fits is not None:
        raise LinrecError(result.none_fits)
    result.save(args.out, args.force)
    _print(result.record, args.out)
    return 0


def _echo_measuring(
    args: argparse.Namespace, model: nn.Module, candidates: list[int], fit: TokenBatches, measured: Measurement | None
) -> None:
    """An estimate of the capture of the ``fit`` batches and of the table's fits (on the host, as
    :meth:`linrec.Measurement.table` makes it), which the perplexity passes' estimate leaves out: only the fits where
    a saved measurement is read instead (``measured``)."""
    import dataclasses

    import torch

    from linrec.commands.replace_plan import say
    from linrec.core.capture import input_device
    from linrec.core.planned import estimate, plan_for
    from linrec.interventions.replacement.replace import capture_extras

    plan = plan_for(model, fit, candidates, args.folds, saved=True, extras=capture_extras(args.order))
    if plan is None:  # (a model without a config to size the work by)
        return
    dtype = next(model.parameters()).dtype
    work = estimate(model.config, fit, plan, dtype, input_device(model), torch.device("cpu"))
    if measured is not None:
        work = dataclasses.replace(work, capture=0.0, linearity=0.0)
    for line in work.describe("estimate of the capture and the fits").splitlines():
        say(line.strip())


def _second_text(args: argparse.Namespace) -> tuple[str | None, TextPart | None]:
    """The second evaluation text and its record (--second-text-file: all of it; --second-corpus: its eval split), or
    (None, None)."""
    if args.second_text_file is not None:
        try:
            text = args.second_text_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise LinrecError(f"cannot read --second-text-file {args.second_text_file} as UTF-8 text: {err}") from err
        return text, TextPart(str(args.second_text_file), "all of it, never fitted on", _sha256(text))
    if args.second_corpus is not None:
        from linrec.data.corpora import load_corpus

        corpus = load_corpus(args.second_corpus)
        return corpus.eval_text, TextPart(corpus.name, "its eval split", _sha256(corpus.eval_text))
    return None, None


def _batches(
    args: argparse.Namespace,
    config: PretrainedConfig,
    tokenizer: PreTrainedTokenizerBase,
    fit: tuple[str, tuple[int, ...] | None],
    held: str,
    second: str | None,
) -> tuple[list[int], list[TokenBatches]]:
    """The candidate blocks and the batches: the fit batches (``fit``: the text and where its documents start, windows
    kept inside one, as ``linrec profile`` cuts them), the evaluation batches (and the second text's), the request
    checked against the model's config (before its weights) and, unless ``--no-progress``, said
    (:func:`linrec.commands.replace_plan.echo_candidates`)."""
    from linrec.core.capture import check_training_rows
    from linrec.data.tokens import make_batches
    from linrec.interventions.replacement.replace import check_request
    from linrec.models.loading import max_context

    _, candidates = check_request(
        config.model_type,
        config.num_hidden_layers,
        config.hidden_size,
        args.kind,
        args.blocks,
        args.max_ppl_increase,
        args.ablate,
        args.max_accuracy_drop,
    )
    cut = lambda text, rows, at_most=False, documents=None: make_batches(  # noqa: E731
        tokenizer, text, args.seq_len, rows, args.batch_size, max_context(config), at_most=at_most, documents=documents
    )
    wanted, at_most = rows_to_ask(config.hidden_size, args.max_rows)
    fit_batches = cut(fit[0], wanted, at_most, fit[1])
    warn_if_short(fit_batches.n_rows, wanted, config.hidden_size)
    check_training_rows(fit_batches, config.hidden_size, args.folds, args.seed)
    out = [fit_batches, *(cut(text, None).first(args.eval_rows) for text in (held, second) if text is not None)]
    for b in out:
        b.check_vocabulary(config.vocab_size)
    if not args.no_progress:
        echo_candidates(args, candidates, config.num_hidden_layers, out)
    return candidates, out


def _print(record: dict, out: Path) -> None:
    """The steps, the numbers stored and the perplexity, as the report gives them, then where they were written."""
    import pandas as pd

    from linrec.interventions.replacement.report import speed_words, step_task_columns, task_change_words

    steps = pd.DataFrame(record["steps"])
    columns = ["step", "block", "single_delta_ppl", "ppl", "delta_ppl", "delta_ppl_low", "delta_ppl_high", "kept"]
    tasks = [c for c in step_task_columns(record) if c in steps]
    steps = steps[columns[:7] + ["one_shot_delta_ppl"] * ("one_shot_delta_ppl" in steps) + tasks + columns[7:]]
    steps = steps.astype({"single_delta_ppl": float})  # (JSON's null where blocks were given)
    with pd.option_context("display.width", 200):
        print(steps.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–"))
    params, ppl = record["params"], record["ppl"]
    blocks = ", ".join(f"{b['block']} ({b['kind']})" for b in record["blocks"])
    print(
        f"replaced blocks {blocks}: {params['model_before']:,} -> {params['model_after']:,} numbers stored; "
        f"perplexity {ppl['base']:.4g} -> {ppl['replaced']:.4g} on the held-out text"
    )
    if record["second_text"] is not None:
        second = record["second_text"]
        print(
            f"perplexity {second['base_ppl']:.4g} -> {second['replaced_ppl']:.4g} on the second text ({second['name']})"
        )
    for change in (record.get("tasks") or {}).get("changes", []):
        print(f"{change['task']} {change['metric']} {task_change_words(change)}")
    print(f"greedy decoding on {record['latency']['device']}: {speed_words(record['latency'])}")
    print(f"wrote {out} (load it with linrec.load_replaced({str(out)!r}))")
