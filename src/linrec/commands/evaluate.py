"""``linrec evaluate``: what a model can still do, beside its perplexity: zero-shot tasks through
lm-evaluation-harness, HumanEval pass@1 and the pruning papers' WikiText-2 perplexity, on any model linrec loads
(:mod:`linrec.interventions.tasks.evaluate`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from linrec.commands.args import DTYPES, HelpFormatter, add_task_options, check_output, task_request


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec evaluate``; its handler is ``args.handler``."""
    p = sub.add_parser(
        "evaluate",
        formatter_class=HelpFormatter,
        description="Score a model on zero-shot tasks (lm-evaluation-harness), HumanEval (greedy pass@1) and the\n"
        "layer-pruning papers' WikiText-2 perplexity: a hub id, a local directory, a .gguf file, a packaged\n"
        "model, a replacement directory (linrec replace --out) or an export (linrec export --out).\n"
        "Each score is printed with its standard error and 95% interval; --out keeps the whole record\n"
        "(the harness's and the tasks' versions, the settings, every HumanEval problem's result).\n"
        "Without the hub, a harness task needs its data as local files (--task-dir); the error says which.",
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="MODEL",
        help="hub id, local directory, .gguf file, packaged model, replacement directory or export",
    )
    p.add_argument("--revision", help="hub revision of --model")
    add_task_options(p, required=True)
    p.add_argument("--out", type=Path, metavar="FILE.json", help="write the whole record here as JSON")
    p.add_argument("--device", help="cuda, mps, cpu, cuda:1 ... (default: the first available of cuda, mps, cpu)")
    p.add_argument("--dtype", choices=DTYPES, metavar="DTYPE", help="one of: %(choices)s")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    """Check the options and --out (before torch), the tasks and their data (before the model), load the model,
    score it, print the table and write the record."""
    from linrec.models.packaged import PACKAGED

    request = task_request(args)
    assert request is not None  # (--tasks is required)
    if args.out is not None:
        check_output(args.out, suffixes=(".json",))
    if args.model in PACKAGED or args.model.lower().endswith(".gguf"):
        from linrec.cache import check_cache

        check_cache()  # dequantised GGUF weights live there
    from linrec.interventions.tasks.evaluate import evaluate, prepare

    prepared = prepare(request)
    from linrec.interventions.replacement.directory import load_model
    from linrec.models.loading import pick_device
    from linrec.threads import set_threads

    set_threads()
    if args.device:
        pick_device(args.device)
    model, tokenizer = load_model(args.model, revision=args.revision, dtype=args.dtype, device=args.device)
    scored = evaluate(model, tokenizer, prepared, progress=not args.no_progress)
    table = scored.table()
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}", na_rep="–"))
    if args.out is not None:
        from linrec.files import write_atomically

        record = {"model": args.model, "revision": args.revision, **scored.record()}
        write_atomically(args.out, lambda file: file.write(json.dumps(record, indent=1)))
        print(f"wrote {args.out}: the scores and every scorer's record")
    return 0
