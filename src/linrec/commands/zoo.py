"""``linrec zoo``: train (or find cached) a profile's model zoo and print its table.

Ctrl-C or SIGTERM stops the build (queued models never start, live workers end, their temporary
directories go) and exits with status 130; the models finished so far stay cached for the rerun.
"""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd

from linrec.cache import cache_dir, check_cache
from linrec.commands.args import positive_int
from linrec.models import zoo


def _print_zoo(table: pd.DataFrame) -> None:
    sizes = table[["model", "family", "width", "depth", "params", "tokens_seen", "train_seconds", "cpu_seconds"]]
    print(sizes.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    corpora = [c.split(":", 1)[1] for c in table.columns if c.startswith("loss:")]
    quality = pd.DataFrame(
        [
            {
                "model": row["model"],
                "corpus": c,
                "loss": row[f"loss:{c}"],
                "ppl": row[f"ppl:{c}"],
                "unigram_loss": row[f"unigram:{c}"],
                "unigram_ppl": math.exp(row[f"unigram:{c}"]),
                "loss/unigram": row[f"loss:{c}"] / row[f"unigram:{c}"],
            }
            for _, row in table.iterrows()
            for c in corpora
        ]
    )
    print("\nheld-out loss (nats/token) and perplexity, final checkpoint, against a unigram model of the training mix:")
    print(quality.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def _cli_zoo(args: argparse.Namespace) -> int:
    from linrec.threads import set_threads

    check_cache()
    set_threads()
    try:
        table = zoo.build_zoo(zoo.get_zoo(args.profile), force=args.force, workers=args.workers)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (linrec.cli.main makes it one)
        print(
            f"\nlinrec zoo: interrupted; finished models stay in {cache_dir()}, run it again to train the rest",
            file=sys.stderr,
        )
        return 130
    _print_zoo(table)
    print(f"\ncache: {cache_dir()}")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``linrec zoo [--profile offline|smoke] [--force] [--workers N]``; its handler is ``args.handler``."""
    p = subparsers.add_parser(
        "zoo",
        description=zoo.__doc__.split("\n\n")[0],
    )
    p.add_argument("--profile", default="offline", help=f"whose zoo to build: {', '.join(zoo.ZOOS)} (default: offline)")
    p.add_argument("--force", action="store_true", help="retrain even what is cached")
    p.add_argument(
        "--workers", type=positive_int, default=None, help="models trained at a time (default: min(2, cores))"
    )
    p.set_defaults(handler=_cli_zoo)
