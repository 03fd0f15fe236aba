"""``linrec export``: a replacement directory as one self-contained directory, weights and tokenizer, that loads
without linrec where the architecture allows (:mod:`linrec.interventions.replacement.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from linrec.commands.args import DTYPES, HelpFormatter
from linrec.errors import LinrecError


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec export``; its handler is ``args.handler``."""
    p = sub.add_parser(
        "export",
        formatter_class=HelpFormatter,
        description="Write a replacement directory (linrec replace --out DIR) as one self-contained directory:\n"
        "a plain checkpoint that AutoModelForCausalLM.from_pretrained loads without linrec where every\n"
        "change has a form in the base model's own class (blocks removed; FFNs zeroed; a mean or an\n"
        "affine or low-rank map where the FFN has the biases and hidden units for it), else the base\n"
        "model saved whole beside the maps, which linrec.load_model loads. Either is loaded back and\n"
        "its logits compared with linrec's replaced model before it is kept.",
    )
    p.add_argument("directory", type=Path, metavar="DIR", help="a replacement directory (linrec replace --out DIR)")
    p.add_argument("--out", type=Path, required=True, metavar="OUT", help="the directory to write (new or empty)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists and is not empty")
    p.add_argument(
        "--dtype",
        choices=DTYPES,
        metavar="DTYPE",
        help="the weights' dtype, one of: %(choices)s (default: the base model's own, as its config names it, else "
        "the one it was replaced in)",
    )
    p.add_argument("--device", help="where to load the model to fold and check it (default: cpu)")
    p.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    """Check the output (before torch is imported) and the input (before any weights load), export, and say what was
    written and how to load it."""
    from linrec.files import check_new_directory

    check_new_directory(args.out, "--out", args.force)
    from linrec.interventions.replacement.directory import is_replacement_dir
    from linrec.interventions.replacement.export import export
    from linrec.threads import set_threads

    set_threads()
    if not is_replacement_dir(args.directory):
        raise LinrecError(f"{args.directory} is no replacement directory (write one with linrec replace --out DIR)")
    done = export(args.directory, args.out, dtype=args.dtype, force=args.force, device=args.device or "cpu")
    size = sum(p.stat().st_size for p in done.directory.rglob("*") if p.is_file())
    if done.form == "plain":
        print(
            f"wrote {done.directory} ({size / 1e6:,.1f} MB): a plain checkpoint; load it with "
            f"AutoModelForCausalLM.from_pretrained({str(done.directory)!r}) (logits as linrec's to "
            f"{done.max_logit_difference:.1e} of the largest)"
        )
    else:
        print(f"not a plain checkpoint: {'; '.join(done.reasons)}")
        print(
            f"wrote {done.directory} ({size / 1e6:,.1f} MB): the base model whole and the maps; load it with "
            f"linrec.load_model({str(done.directory)!r}) (logits as linrec's to {done.max_logit_difference:.1e})"
        )
    return 0
