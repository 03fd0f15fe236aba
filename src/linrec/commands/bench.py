"""``linrec bench``: time capture + moments against the bare forward; the timing itself is
:mod:`linrec.core.cost`."""

from __future__ import annotations

import argparse
from pathlib import Path

from linrec.commands.args import HelpFormatter, check_output, positive_int, write_table


def _token_counts(value: str) -> tuple[int, ...]:
    """argparse type: comma-separated positive token counts."""
    return tuple(positive_int(v.strip()) for v in value.split(",") if v.strip())


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec bench``; its handler is ``args.handler``."""
    from linrec.models.loading import DTYPES
    from linrec.models.shapes import BENCH_SHAPES

    p = sub.add_parser(
        "bench",
        formatter_class=HelpFormatter,
        description=(
            "Time capture + float64 moments on a real model shape with random weights (nothing is downloaded), "
            "against the full and the truncated forward, with the overhead split into hooks, moment arithmetic "
            "and the rest, the one-off finalisation, host syncs per batch and peak memory."
        ),
    )
    p.add_argument(
        "--shape",
        default="gpt2-small",
        choices=list(BENCH_SHAPES),
        metavar="SHAPE",
        help=f"one of: {', '.join(BENCH_SHAPES)} (random weights of that model's published configuration)",
    )
    p.add_argument(
        "--dtype",
        default="float32",
        choices=list(DTYPES),
        metavar="DTYPE",
        help=f"the model's weights and compute, one of: {', '.join(DTYPES)} (the moments are float64 whatever it is)",
    )
    p.add_argument(
        "--layers",
        type=positive_int,
        help="time the shape's first N layers (same width: a block costs what it does in the whole model); for a "
        "shape whose every block's moments at once would not fit this machine, which the bench says before it starts",
    )
    p.add_argument("--device", help="cuda, mps or cpu (default: first available)")
    p.add_argument("--batches", type=positive_int, default=50, help="batches timed per path (after 2 of warm-up)")
    p.add_argument("--batch-size", type=positive_int, help="sequences per batch (default: 32 on a GPU, 2 on a CPU)")
    p.add_argument("--seq-len", type=positive_int, default=128, help="tokens per sequence")
    p.add_argument(
        "--peak-tokens", type=_token_counts, default="20000,200000", help="token counts for the peak-memory runs"
    )
    p.add_argument("--out", type=Path, help="also write the table to this .csv or .json file (checked before timing)")
    p.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    from linrec.core.cost import run_bench
    from linrec.threads import set_threads

    if args.out is not None:
        check_output(args.out)
    set_threads()
    peaks = args.peak_tokens
    table = run_bench(
        device=args.device,
        n_batches=args.batches,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        peak_tokens=peaks,
        shape=args.shape,
        dtype=args.dtype,
        layers=args.layers,
    )
    settings = table.iloc[0]
    print(
        f"{settings['shape']}, {settings['dtype']}, {settings['device']}, batches of {settings['batch']} tokens, "
        f"{settings['timed_batches']} timed ({settings['tokens_timed']:,} tokens); TF32: {settings['tf32']}; "
        f"torch {settings['torch']}"
    )
    shown = table[["measure", "value", "unit", "vs_truncated", "vs_full"]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep=""))
    growth = table[table.unit == "MiB"].value
    if len(growth) >= 2:
        print(
            f"peak memory growth {peaks[0]} -> {peaks[-1]} tokens: {100 * (growth.iloc[-1] / growth.iloc[0] - 1):+.1f}%"
        )
    if args.out is not None:
        write_table(table, args.out)
    return 0
