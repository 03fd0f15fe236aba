"""The ``linrec`` command: ``profile`` measures a model, ``zoo`` builds the offline models, ``bench`` times the core.

``linrec profile`` also runs under ``torchrun --nproc-per-node K -m linrec profile ...``: each
process captures every K-th sequence and the moments are all-reduced, so the table is the same as
with one process.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import pandas as pd

from linrec.errors import LinrecError


def _blocks(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--blocks takes comma-separated block indices like 0,3,5; got '{value}'") from None


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got '{value}'")
    return int(value)


def add_profile_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="measure per-block linear recoverability of a model",
                       description="Measure R²_lin of every FFN block (or --blocks) of a model on a text.")
    p.add_argument("--model", help="hub id or local directory (default: every model of --profile)")
    p.add_argument("--revision", help="hub revision, e.g. step1000 for Pythia checkpoints")
    text = p.add_mutually_exclusive_group()
    text.add_argument("--text-file", type=Path, help="a local UTF-8 text file to measure on")
    text.add_argument("--corpus", help="a named corpus (see --profile; e.g. wikitext-2, stdlib-prose)")
    p.add_argument("--profile", help="a named profile (paper, offline, smoke) supplying models, corpus and counts")
    p.add_argument("--max-rows", type=_positive, help="token rows per block (default: the profile's, else 20000)")
    p.add_argument("--seq-len", type=_positive, help="tokens per sequence (default 128)")
    p.add_argument("--folds", type=_positive, help="k of the k-fold split by sequence (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    p.add_argument("--blocks", type=_blocks, help="comma-separated block indices (default: all)")
    p.add_argument("--device", help="cuda, mps, cpu, cuda:1 ... (default: the first available of cuda, mps, cpu)")
    p.add_argument("--dtype", help="float32, bfloat16 or float16 (default: the checkpoint's)")
    p.add_argument("--device-map", help="'auto' to spread a large model over the available devices (accelerate)")
    p.add_argument("--batch-size", type=_positive, default=8, help="sequences per forward pass")
    p.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code from the hub (off by default)")
    p.add_argument("--out", type=Path, help="write the table to a .csv or .json file")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_profile)


def _text(args: argparse.Namespace, profile) -> tuple[str, str, str]:
    """(text to measure on, its name, its sha256) from --text-file, --corpus or the profile's main corpus."""
    if args.text_file is not None:
        try:
            text = args.text_file.read_text(encoding="utf-8")
            return text, str(args.text_file), hashlib.sha256(text.encode("utf-8")).hexdigest()
        except (OSError, UnicodeDecodeError) as err:
            raise LinrecError(f"cannot read --text-file {args.text_file} as UTF-8 text: {err}") from err
    from linrec.data.corpora import load_corpus

    name = args.corpus or (profile.corpora[0] if profile is not None else None)
    if name is None:
        raise LinrecError("give a text to measure on: --text-file FILE, --corpus NAME or --profile NAME")
    corpus = load_corpus(name)
    return corpus.fit_text, corpus.name, corpus.sha256


def _profile(args: argparse.Namespace) -> int:
    import torch.distributed as dist

    from linrec.models.loading import load_model, max_context
    from linrec.core.measure import measure
    from linrec.data.tokens import make_batches

    profile = None
    if args.profile is not None:
        from linrec.experiment.profiles import get_profile

        profile = get_profile(args.profile)
    if args.out is not None and args.out.suffix not in (".csv", ".json"):
        raise LinrecError(f"--out must end in .csv or .json; got '{args.out}'")
    if args.model is None and profile is None:
        raise LinrecError("give --model ID_OR_PATH, or --profile NAME to measure the profile's models")
    rows = args.max_rows or (profile.rows_per_block if profile else 20_000)
    seq_len = args.seq_len or (profile.seq_len if profile else 128)
    folds = args.folds or (profile.folds if profile else 5)
    if folds < 2:
        raise LinrecError(f"--folds must be at least 2; got {folds}")

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        import torch

        backend = "nccl" if torch.cuda.is_available() and not args.device == "cpu" else "gloo"
        dist.init_process_group(backend)
        if backend == "nccl":
            args.device = args.device or f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    rank = dist.get_rank() if dist.is_initialized() else 0

    text, corpus_name, corpus_hash = _text(args, profile)
    tables = []
    for model_name in [args.model] if args.model else list(profile.models):
        if profile is not None and args.model is None:
            from linrec.experiment.resolve import load_profile_model

            model, tokenizer = load_profile_model(profile, model_name)
        else:
            model, tokenizer = load_model(model_name, revision=args.revision, dtype=args.dtype, device=args.device,
                                          device_map=args.device_map, trust_remote_code=args.trust_remote_code)
        batches = make_batches(tokenizer, text, seq_len=seq_len, max_rows=rows, batch_size=args.batch_size,
                               max_context=max_context(model))
        table = measure(model, batches, blocks=args.blocks, folds=folds, seed=args.seed,
                        progress=not args.no_progress and rank == 0)
        table.insert(0, "model", model_name)
        table["revision"] = args.revision
        table["corpus"] = corpus_name
        table["corpus_sha256"] = corpus_hash
        table["seq_len"] = seq_len
        table["folds"] = folds
        table["seed"] = args.seed
        tables.append(table)
    result = pd.concat(tables, ignore_index=True)
    if rank == 0:
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(result.drop(columns=["corpus_sha256", "revision"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if args.out is not None:
            write_table(result, args.out)
            print(f"wrote {args.out}")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def write_table(table: pd.DataFrame, path: Path) -> None:
    """Write ``table`` as JSON records for a .json suffix, else as CSV (full float precision)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        table.to_json(path, orient="records", indent=1, double_precision=15)
    else:
        table.to_csv(path, index=False, float_format="%.17g")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="linrec", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_profile_command(sub)
    from linrec import bench
    from linrec.commands import zoo

    zoo.add_cli(sub)
    bench.add_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except LinrecError as err:
        print(f"linrec: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
