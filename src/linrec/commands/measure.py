"""``linrec measure``: measure R²_lin of every FFN block of a model, or of a profile's models, on a text.

Its options and handler are here; what it measures on (the text, its windows and folds) is
:mod:`linrec.commands.measure_inputs`, and what each column of its table means :mod:`linrec.commands.measure_columns`.

``linrec measure`` also runs under ``torchrun --nproc-per-node K -m linrec measure ...``: each
process captures every K-th sequence and the moments are all-reduced, so the table is the same as
with one process.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from linrec.cache import check_cache
from linrec.commands.args import (
    DTYPES,
    Deferred,
    HelpFormatter,
    add_text_options,
    block_indices,
    check_output,
    extras,
    non_negative_int,
    positive_int,
    products,
    seed,
    write_table,
)
from linrec.commands.measure_columns import (
    SUMMARY,
    columns_help,
    rows_too_few,
    summary,
    version_columns,
    warn_rows_too_few,
)
from linrec.commands.measure_inputs import check_before_loading, measured_text, seq_len, token_batches
from linrec.core.extras import EXTRAS
from linrec.core.plan import parse_memory
from linrec.core.schemes import FLOAT64, SCHEMES
from linrec.errors import LinrecError
from linrec.experiment.budgets import ROWS_PER_DIMENSION

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

    from linrec.core.plan import CapturePlan
    from linrec.data.textfile import TextFile
    from linrec.data.tokens import TokenBatches
    from linrec.experiment.profiles import Profile


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec measure``; its handler is ``args.handler``. Nothing it reads imports torch (the profiles,
    layouts and dtypes are :class:`Deferred` choices): the options are checked before torch loads."""
    from linrec.models.packaged import PACKAGED

    p = sub.add_parser(
        "measure",
        formatter_class=HelpFormatter,
        description="Measure R²_lin of every FFN block (or --blocks) of a model on a text.",
        epilog=columns_help(),
    )
    p.add_argument(
        "--model",
        metavar="MODEL",
        help=f"hub id, local directory, .gguf file, a packaged model ({', '.join(PACKAGED)}), or a directory "
        "written by linrec replace "
        "(default: every model of --profile, pretrained ones included)",
    )
    p.add_argument("--revision", help="hub revision, e.g. step1000 for Pythia checkpoints")
    add_text_options(
        p,
        required=False,
        file_help="a local UTF-8 text file to measure on",
        corpus_help="a named corpus, one of: {names} (default: the profile's first)",
    )
    p.add_argument(
        "--profile",
        choices=Deferred("linrec.experiment.profiles", "profile_names"),
        metavar="NAME",
        help="a named profile supplying models, corpus and counts, one of: %(choices)s",
    )
    p.add_argument(
        "--max-rows",
        type=positive_int,
        help=f"token rows per block (default: the profile's, else {ROWS_PER_DIMENSION} per input dimension of the "
        "model, where held-out R²_lin has settled; all of the text, with a warning, when it is shorter)",
    )
    p.add_argument("--seq-len", type=positive_int, help="tokens per sequence (default: the profile's, else 128)")
    p.add_argument(
        "--folds",
        type=positive_int,
        help="k of the k-fold split, at least 2: by document where the corpus has documents, else by sequence "
        "(default: the profile's, else 5)",
    )
    p.add_argument(
        "--layout",
        choices=Deferred("linrec.data.tokens", "LAYOUTS"),
        default="spread",
        metavar="LAYOUT",
        help="one of: %(choices)s: take the sequences evenly spread over the whole text, or its first ones (head)",
    )
    p.add_argument("--seed", type=seed, default=0, help="seed of the fold assignment")
    p.add_argument(
        "--skip-first",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="leave the first N positions of every window out of fit and evaluation (the forward pass is "
        "unchanged: every token still attends to the whole window); the table's first_position_share and "
        "r2_lin_after_first then describe position N",
    )
    p.add_argument("--blocks", type=block_indices, help="comma-separated block indices (default: all)")
    p.add_argument("--device", help="cuda, mps, cpu, cuda:1 ... (default: the first available of cuda, mps, cpu)")
    p.add_argument("--dtype", choices=DTYPES, metavar="DTYPE", help="one of: %(choices)s (default: the checkpoint's)")
    p.add_argument("--device-map", help="'auto' to spread a large model over the available devices (accelerate)")
    p.add_argument(
        "--batch-size", type=positive_int, help="sequences per forward pass (default: the profile's, else 8)"
    )
    p.add_argument(
        "--trust-remote-code", action="store_true", help="allow the model's own code from the hub (off by default)"
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="write the table, every column, to a .csv or .json file (checked before measuring); the terminal shows "
        "a summary",
    )
    p.add_argument(
        "--spill",
        type=Path,
        metavar="DIR",
        help="keep each fold's finished moments on disk under DIR instead of in memory (same numbers): for a model "
        "whose float64 moments, 2 x width² x 8 bytes per block and fold (3 with --extras output-covariance), exceed "
        "memory; removed afterwards",
    )
    p.add_argument(
        "--memory",
        metavar="SIZE",
        help="the most memory the capture may hold, in host memory and on the GPU, e.g. 12GB or 12GiB (default: "
        "what is free there now). Where every block's float64 moments do not fit, the blocks are measured in groups "
        "that do, each resumed from where the previous one stopped (about one forward pass in all; the same "
        "numbers); the plan is printed before any work",
    )
    p.add_argument(
        "--save",
        type=Path,
        metavar="DIR",
        help="also write the measurement itself (its float64 moments, one model) to DIR, new or empty: linrec replace "
        "--measurement DIR then fits its maps from it without capturing again",
    )
    p.add_argument(
        "--extras",
        type=extras,
        default="",
        metavar="NAMES",
        help="also compute, comma-separated (or all): "
        + "; ".join(f"{name}: {meaning}" for name, meaning in EXTRAS.items())
        + ". By default only what the fit needs is summed, and their columns are NaN",
    )
    p.add_argument(
        "--products",
        type=products,
        default=FLOAT64,
        metavar="NAME",
        help="how each chunk of rows (their first rows' mean subtracted) is multiplied into the float64 sums: "
        + "; ".join(f"{name}: {meaning}" for name, meaning in SCHEMES.items())
        + ". For a GPU whose float64 is slow",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(handler=_measure)


def _measure(args: argparse.Namespace) -> int:
    """Measure each model named (``--model``, else the profile's), print a summary of the table and write all of it
    to ``--out``.

    Everything that can be checked before the work is, in this order: before torch is imported (a second or more), the
    options, ``--out``, ``--save`` and the cache (by trying to write there) and the text; then the device, the
    sequence length against ``--skip-first`` and a zoo's blocks and context; then, from the model's config and
    tokenizer and before its weights load, the blocks, the sequence length and whether the text fills the folds. (A
    ``--profile`` imports torch as it is read: its module names the zoo's models.)
    """
    from linrec.models.packaged import PACKAGED

    memory = parse_memory(args.memory)  # a budget that cannot be read fails first
    profile = None if args.profile is None else _cli_profile(args)
    own = profile is not None and (args.model is None or _owns(profile, args.model))
    if own and args.model is not None:
        assert profile is not None
        profile = _model_profile(profile, args.model)
    if args.out is not None:
        check_output(args.out)
    if args.save is not None:
        from linrec.files import check_new_directory

        if not args.model or int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise LinrecError("--save writes the measurement of one model in one process: name it with --model")
        check_new_directory(args.save, "--save")
    if not args.model and profile is None:  # an empty --model names no model either
        raise LinrecError("give --model MODEL, or --profile NAME to measure the profile's models")
    if profile is not None or args.model in PACKAGED or args.model.lower().endswith(".gguf"):
        check_cache()  # the profile's zoo and dequantised GGUF weights live there
    folds = args.folds or (profile.folds if profile else 5)
    if folds < 2:
        raise LinrecError(f"--folds must be at least 2; got {folds}")
    if not own and args.revision is not None and Path(args.model).expanduser().is_dir():
        raise LinrecError(f"--revision selects a hub revision; '{args.model}' is a local directory, so drop it")
    if args.model:
        names = [args.model]
    else:
        assert profile is not None  # refused above: neither --model nor --profile
        names = list(profile.models)
    # A profile's models each read their own budget's text unless --text-file or --corpus names one for all.
    own_text = own and not (args.text_file or args.corpus)
    text, corpus_name, corpus_hash, documents = measured_text(args, profile, names[0] if own_text else None)

    import pandas as pd
    import torch.distributed as dist

    from linrec.core.measure import Measurement, check_skip_first, measure
    from linrec.interventions.replacement.directory import load_model
    from linrec.models.gguf import gguf_origin
    from linrec.models.loading import check_device_map, pick_device
    from linrec.threads import set_threads

    set_threads()
    check_device_map(args.device_map, args.device)
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

    check_skip_first(args.skip_first, seq_len(args, profile))
    check_before_loading(args, profile)
    tables = []
    prepared: list[tuple[TokenBatches, CapturePlan]] = []  # each model's batches and plan, from config and tokenizer
    for model_name in names:
        prepared.clear()
        if own:
            from linrec.experiment.resolve import load_profile_model

            assert profile is not None
            if own_text and profile.budget(model_name).corpus != corpus_name:
                text, corpus_name, corpus_hash, documents = measured_text(args, profile, model_name)
            model, tokenizer = load_profile_model(
                profile, model_name, progress=not args.no_progress,
                before_weights=_preparer(args, profile, (text, documents), folds, memory, prepared, model_name),
            )  # fmt: skip
        else:
            model, tokenizer = load_model(
                model_name,
                revision=args.revision,
                dtype=args.dtype,
                device=args.device,
                device_map=args.device_map,
                trust_remote_code=args.trust_remote_code,
                supported_only=True,
                before_weights=_preparer(args, profile, (text, documents), folds, memory, prepared),
            )
        batches, plan = prepared[0]
        options = {"blocks": args.blocks, "folds": folds, "seed": args.seed, "skip_first": args.skip_first,
                   "progress": not args.no_progress and rank == 0, "spill": args.spill,
                   "extras": args.extras, "products": args.products}  # fmt: skip
        if args.save is None:
            table = measure(model, batches, memory=plan, **options)
        else:  # the moments kept, and saved (the same table: measure() is this, its moments let go as it goes)
            kept = Measurement.capture(
                model, batches, memory=plan, name=model_name, text=corpus_name, text_sha256=corpus_hash,
                **options,
            )  # fmt: skip
            table = kept.table(progress=options["progress"])
            kept.save(args.save)
        table.insert(0, "model", model_name)
        table["rows_too_few"] = rows_too_few(table)
        if rank == 0:
            warn_rows_too_few(table)
        origin = gguf_origin(getattr(model.config, "_name_or_path", ""))
        table["revision"] = args.revision if origin is None else origin.weights
        weights = next(model.parameters())
        table["dtype"] = str(weights.dtype).removeprefix("torch.")
        table["device"] = str(weights.device)
        table["corpus"] = corpus_name
        table["corpus_sha256"] = corpus_hash
        table["seq_len"] = batches.seq_len
        table["skip_first"] = args.skip_first
        table["folds"] = folds
        table["layout"] = args.layout
        table["seed"] = args.seed
        table["extras"] = ",".join(sorted(args.extras))
        table["products"] = args.products
        tables.append(table)
    versions = version_columns()
    result = pd.concat(tables, ignore_index=True).assign(**versions)
    if rank == 0:
        print(summary(result))
        if args.out is not None:
            write_table(result, args.out)
            print(f"wrote {args.out}: every column of the table (linrec measure --help says what each means)")
        else:
            print(
                f"these are {len(SUMMARY)} of the table's {len(result.columns)} columns: --out FILE.csv keeps every one"
            )
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def _preparer(
    args: argparse.Namespace,
    profile: Profile | None,
    source: tuple[str | TextFile, tuple[int, ...] | None],
    folds: int,
    memory: int | None,
    into: list[tuple[TokenBatches, CapturePlan]],
    model: str | None = None,
) -> Callable[[PretrainedConfig, PreTrainedTokenizerBase], None]:
    """What runs once a model's config and tokenizer are known, before its weights load: its batches
    (:func:`token_batches`; ``model``: a profile's own, measured on its budget) and the capture's plan (a budget that
    cannot work fails here, naming the smallest that would), appended to ``into``; the plan printed with an estimate
    of the work's time (:func:`linrec.core.planned.estimate`)."""

    def prepare(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase) -> None:
        import torch

        from linrec.core.planned import estimate, plan_before_loading
        from linrec.models.loading import parse_dtype, pick_device

        batches = token_batches(args, profile, source, folds, config, tokenizer, model)
        own = profile if model is not None else None  # a profile's own model loads in its dtype, on its device
        dtype = (own.dtype if own else args.dtype) or getattr(config, "dtype", None)
        torch_dtype = parse_dtype(dtype) or torch.float32  # (the checkpoint's own, else float32, as loading does)
        device = own.device if own else args.device
        target = torch.device(pick_device(device)) if args.device_map is None else torch.device("cpu")
        table = args.save is None and args.spill is None  # only the table: its moments may stay on a GPU
        plan = plan_before_loading(config, batches, args.blocks, folds, torch_dtype, target, memory,
                                   saved=args.save is not None, table=table, extras=args.extras)  # fmt: skip
        if not args.no_progress:
            fits_on = target if table else torch.device("cpu")  # (a measurement kept makes its table on the host)
            print(plan.describe(), estimate(config, batches, plan, torch_dtype, target, fits_on).describe(),
                  sep="\n", file=sys.stderr)  # fmt: skip
        into.append((batches, plan))

    return prepare


def _owns(profile: Profile, model: str) -> bool:
    """Whether ``model`` is one of ``profile``'s own models, or of its scale series: measured as the book measures
    it (its budget, its text, the profile's loader) when named with --model."""
    return model in (*profile.models, *profile.series, *profile.series_gpu)


def _model_profile(profile: Profile, model: str) -> Profile:
    """The profile that measures ``model``, one of ``profile``'s own (:func:`_owns`): itself, or its scale series."""
    if model in profile.models:
        return profile
    series = profile.series_profile(gpu=model in profile.series_gpu)
    if series.device_map is None or profile.device is None:
        return series
    return dataclasses.replace(series, device_map=None, device=profile.device).validate()  # the --device asked for


def _cli_profile(args: argparse.Namespace) -> Profile:
    """The ``--profile`` named, with ``--device`` and ``--dtype`` as overrides of its own when its models are
    measured (all of them, or one named with --model); options that only apply to other models are refused rather
    than silently ignored."""
    from linrec.experiment.profiles import get_profile

    if args.model is not None and not _owns(get_profile(args.profile), args.model):
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
            f"{', '.join(given)} apply to --model (a model of your own); the profile '{args.profile}' loads its own "
            "models (its revisions are pinned in linrec.experiment.profiles). Drop them, or add --model."
        )
    overrides = {name: value for name, value in (("device", args.device), ("dtype", args.dtype)) if value}
    return get_profile(args.profile, **overrides)
