"""``linrec profile``: measure R²_lin of every FFN block of a model, or of a profile's models, on a text.

``linrec profile`` also runs under ``torchrun --nproc-per-node K -m linrec profile ...``: each
process captures every K-th sequence and the moments are all-reduced, so the table is the same as
with one process.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from linrec.commands.args import HelpFormatter, block_indices, check_output, positive_int, write_table
from linrec.data.textfile import TextFile
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from linrec.experiment.profiles import Profile


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec profile``; its handler is ``args.handler``."""
    from linrec.data.corpora import corpus_names
    from linrec.experiment.profiles import profile_names
    from linrec.models.loading import DTYPES

    p = sub.add_parser(
        "profile",
        help="measure per-block linear recoverability of a model",
        formatter_class=HelpFormatter,
        description="Measure R²_lin of every FFN block (or --blocks) of a model on a text.",
    )
    p.add_argument(
        "--model",
        metavar="MODEL",
        help="hub id, local directory, .gguf file, or a packaged model (smollm2-135m) "
        "(default: every model of --profile, pretrained ones included)",
    )
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
    p.add_argument("--blocks", type=block_indices, help="comma-separated block indices (default: all)")
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


def _text(args: argparse.Namespace, profile: Profile | None) -> tuple[str | TextFile, str, str]:
    """(text to measure on, its name, its sha256) from --text-file (streamed: read only as far as the rows
    need, :mod:`linrec.data.textfile`), --corpus or the profile's main corpus."""
    if args.text_file is not None:
        text = TextFile(args.text_file)
        try:
            return text, str(args.text_file), text.sha256
        except LinrecError as err:
            raise LinrecError(f"cannot read --text-file {args.text_file}: {err.__cause__}") from err
    from linrec.data.corpora import load_corpus

    name = args.corpus or (profile.corpora[0] if profile is not None else None)
    if name is None:
        raise LinrecError("give a text to measure on: --text-file FILE, --corpus NAME or --profile NAME")
    corpus = load_corpus(name)
    return corpus.fit_text, corpus.name, corpus.sha256


def _profile(args: argparse.Namespace) -> int:
    """Measure each model named (``--model``, else the profile's), print the table and write ``--out``."""
    import torch.distributed as dist

    from linrec.core.measure import measure
    from linrec.data.tokens import make_batches
    from linrec.models.gguf import gguf_origin
    from linrec.models.loading import load_model, max_context, pick_device
    from linrec.models.packaged import PACKAGED, packaged_file

    profile = None if args.profile is None else _cli_profile(args)
    if args.out is not None:
        check_output(args.out)
    if not args.model and profile is None:  # an empty --model names no model either
        raise LinrecError("give --model MODEL, or --profile NAME to measure the profile's models")
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
    if args.model:
        names = [args.model]
    else:
        assert profile is not None  # refused above: neither --model nor --profile
        names = [*profile.models, *profile.pretrained]
    for model_name in names:
        if profile is not None and args.model is None:
            from linrec.experiment.resolve import load_profile_model

            model, tokenizer = load_profile_model(profile, model_name, progress=not args.no_progress)
        else:
            if args.revision is not None and Path(model_name).expanduser().is_dir():
                raise LinrecError(f"--revision selects a hub revision; '{model_name}' is a local directory, so drop it")
            model, tokenizer = load_model(
                str(packaged_file(model_name)) if model_name in PACKAGED else model_name,
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
        origin = gguf_origin(getattr(model.config, "_name_or_path", ""))
        table["revision"] = args.revision if origin is None else origin.weights
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


def _cli_profile(args: argparse.Namespace) -> Profile:
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
