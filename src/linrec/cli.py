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
import warnings
from pathlib import Path

import pandas as pd

from linrec import __version__
from linrec.errors import LinrecError


def _blocks(value: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--blocks takes comma-separated block indices like 0,3,5; got '{value}'"
        ) from None


def positive_int(value: str) -> int:
    """argparse type: a positive integer."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got '{value}'")
    return int(value)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends an option's default to its help, except where it has none (None, or an unset flag)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def add_profile_command(sub: argparse._SubParsersAction) -> None:
    from linrec.data.corpora import corpus_names
    from linrec.experiment.profiles import profile_names
    from linrec.models.loading import DTYPES

    p = sub.add_parser(
        "profile",
        help="measure per-block linear recoverability of a model",
        formatter_class=HelpFormatter,
        description="Measure R²_lin of every FFN block (or --blocks) of a model on a text.",
    )
    p.add_argument("--model", metavar="ID_OR_DIR", help="hub id or local directory (default: every model of --profile)")
    p.add_argument("--revision", help="hub revision, e.g. step1000 for Pythia checkpoints")
    text = p.add_mutually_exclusive_group()
    text.add_argument("--text-file", type=Path, metavar="FILE", help="a local UTF-8 text file to measure on")
    text.add_argument(
        "--corpus",
        choices=corpus_names(),
        metavar="NAME",
        help=f"a named corpus, one of: {', '.join(corpus_names())} (default: the profile's first)",
    )
    p.add_argument(
        "--profile",
        choices=profile_names(),
        metavar="NAME",
        help=f"a named profile supplying models, corpus and counts, one of: {', '.join(profile_names())}",
    )
    p.add_argument("--max-rows", type=positive_int, help="token rows per block (default: the profile's, else 20000)")
    p.add_argument("--seq-len", type=positive_int, help="tokens per sequence (default: the profile's, else 128)")
    p.add_argument(
        "--folds",
        type=positive_int,
        help="k of the k-fold split by sequence, at least 2 (default: the profile's, else 5)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    p.add_argument("--blocks", type=_blocks, help="comma-separated block indices (default: all)")
    p.add_argument("--device", help="cuda, mps, cpu, cuda:1 ... (default: the first available of cuda, mps, cpu)")
    p.add_argument(
        "--dtype",
        choices=list(DTYPES),
        metavar="DTYPE",
        help=f"one of: {', '.join(DTYPES)} (default: the checkpoint's)",
    )
    p.add_argument("--device-map", help="'auto' to spread a large model over the available devices (accelerate)")
    p.add_argument(
        "--batch-size", type=positive_int, help="sequences per forward pass (default: the profile's, else 8)"
    )
    p.add_argument(
        "--trust-remote-code", action="store_true", help="allow the model's own code from the hub (off by default)"
    )
    p.add_argument(
        "--out", type=Path, metavar="FILE", help="write the table to a .csv or .json file (checked before measuring)"
    )
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

    from linrec.core.measure import measure
    from linrec.data.tokens import make_batches
    from linrec.models.loading import load_model, max_context, pick_device

    profile = None if args.profile is None else _cli_profile(args)
    if args.out is not None:
        check_output(args.out)
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
    if args.device:
        pick_device(args.device)  # a device this machine lacks fails here, before any loading

    text, corpus_name, corpus_hash = _text(args, profile)
    tables = []
    for model_name in [args.model] if args.model else list(profile.models):
        if profile is not None and args.model is None:
            from linrec.experiment.resolve import load_profile_model

            model, tokenizer = load_profile_model(profile, model_name, progress=not args.no_progress)
        else:
            if args.revision is not None and Path(model_name).expanduser().is_dir():
                raise LinrecError(f"--revision selects a hub revision; '{model_name}' is a local directory, so drop it")
            model, tokenizer = load_model(
                model_name,
                revision=args.revision,
                dtype=args.dtype,
                device=args.device,
                device_map=args.device_map,
                trust_remote_code=args.trust_remote_code,
                supported_only=True,
            )
        batch_size = args.batch_size or (profile.batch_size if profile else 8)
        batches = make_batches(
            tokenizer, text, seq_len=seq_len, max_rows=rows, batch_size=batch_size, max_context=max_context(model)
        )
        table = measure(
            model, batches, blocks=args.blocks, folds=folds, seed=args.seed, progress=not args.no_progress and rank == 0
        )
        table.insert(0, "model", model_name)
        table["revision"] = args.revision
        weights = next(model.parameters())
        table["dtype"] = str(weights.dtype).removeprefix("torch.")
        table["device"] = str(weights.device)
        table["corpus"] = corpus_name
        table["corpus_sha256"] = corpus_hash
        table["seq_len"] = seq_len
        table["folds"] = folds
        table["seed"] = args.seed
        tables.append(table)
    result = pd.concat(tables, ignore_index=True)
    if rank == 0:
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(
                result.drop(columns=["corpus_sha256", "revision"]).to_string(
                    index=False, float_format=lambda v: f"{v:.4g}"
                )
            )
        if args.out is not None:
            write_table(result, args.out)
            print(f"wrote {args.out}")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def _cli_profile(args: argparse.Namespace):
    """The ``--profile`` named, with ``--device`` and ``--dtype`` as overrides of its own when its models are
    measured; options that only apply to ``--model`` are refused rather than silently ignored."""
    from linrec.experiment.profiles import get_profile

    if args.model is not None:
        return get_profile(args.profile)
    given = [
        option
        for option, value in (
            ("--revision", args.revision),
            ("--device-map", args.device_map),
            ("--trust-remote-code", args.trust_remote_code),
        )
        if value
    ]
    if given:
        raise LinrecError(
            f"{', '.join(given)} apply to --model; the profile '{args.profile}' loads its own models "
            "(its revisions are pinned in linrec.experiment.profiles). Drop them, or add --model."
        )
    overrides = {name: value for name, value in (("device", args.device), ("dtype", args.dtype)) if value}
    return get_profile(args.profile, **overrides)


def check_output(path: Path, option: str = "--out") -> None:
    """Fail before the work when the table could not be written to ``path``: a wrong suffix, a
    directory in its place, or no directory it could be created in with write access."""
    if path.is_dir():
        raise LinrecError(f"{option} {path} is a directory; give a file in it, e.g. {path / 'table.csv'}")
    if path.suffix not in (".csv", ".json"):
        raise LinrecError(f"{option} must end in .csv or .json; got '{path}'")
    existing = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not existing.is_dir():
        raise LinrecError(f"cannot write {option} {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise LinrecError(
            f"cannot write {option} {path}: no write permission in {existing.resolve()}; choose another place"
        )


def write_table(table: pd.DataFrame, path: Path) -> None:
    """Write ``table`` as JSON records for a .json suffix, else as CSV (full float precision).

    The table goes to a temporary file beside ``path`` that is renamed into place, so an
    interrupted write never leaves a partial table under the final name.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            table.to_json(tmp, orient="records", indent=1, double_precision=15)
        else:
            table.to_csv(tmp, index=False, float_format="%.17g")
        os.replace(tmp, path)
    except OSError as err:
        raise LinrecError(f"could not write {path}: {err}") from err
    finally:
        if tmp.exists():
            tmp.unlink()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="linrec", description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=f"linrec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_profile_command(sub)
    from linrec import bench
    from linrec.commands import zoo

    zoo.add_cli(sub)
    bench.add_cli(sub)
    return parser


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """Warnings on the command line read like its errors (no source file and line)."""
    print(f"linrec: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.handler(args)
        except LinrecError as err:
            print(f"linrec: error: {err}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
