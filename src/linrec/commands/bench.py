"""``linrec bench``: time capture + moments against the bare forward; the timing itself is :mod:`linrec.bench`."""

from __future__ import annotations

import argparse
from pathlib import Path

from linrec.commands.args import HelpFormatter, check_output, positive_int, write_table


def _token_counts(value: str) -> tuple[int, ...]:
    """argparse type: comma-separated positive token counts."""
    return tuple(positive_int(v.strip()) for v in value.split(",") if v.strip())


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec bench``; its handler is ``args.handler``."""
    p = sub.add_parser(
        "bench",
        formatter_class=HelpFormatter,
        description="Time capture + float64 moments against the bare forward on a GPT-2-small-sized model.",
    )
    p.add_argument("--device", help="cuda, mps or cpu (default: first available)")
    p.add_argument("--batches", type=positive_int, default=6, help="batches timed")
    p.add_argument("--batch-size", type=positive_int, default=8, help="sequences per batch")
    p.add_argument("--seq-len", type=positive_int, default=128, help="tokens per sequence")
    p.add_argument(
        "--peak-tokens", type=_token_counts, default="20000,200000", help="token counts for the peak-memory runs"
    )
    p.add_argument("--out", type=Path, help="also write the table to this .csv or .json file (checked before timing)")
    p.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    from linrec.bench import run_bench

    if args.out is not None:
        check_output(args.out)
    peaks = args.peak_tokens
    table = run_bench(args.device, args.batches, args.batch_size, args.seq_len, peaks)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    growth = table[table.unit == "MiB"].value
    if len(growth) >= 2:
        print(
            f"peak memory growth {peaks[0]} -> {peaks[-1]} tokens: {100 * (growth.iloc[-1] / growth.iloc[0] - 1):+.1f}%"
        )
    if args.out is not None:
        write_table(table, args.out)
    return 0
