"""The ``linrec`` command: ``measure`` measures a model, ``plot`` draws its table, ``replace`` replaces its blocks,
``evaluate`` scores what a model can still do, ``export`` writes the result to load without linrec, ``zoo`` builds
the offline models, ``bench`` times the core.

This module only assembles the parser and runs a command; each command's options and handler are in
:mod:`linrec.commands` (``measure``, ``plot``, ``replace``, ``evaluate``, ``export``, ``zoo``, ``bench``), the helpers
they share in :mod:`linrec.commands.args`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import NoReturn

from linrec import __version__
from linrec.errors import LinrecError

COMMANDS = {
    "measure": "measure per-block linear recoverability of a model",
    "plot": "draw the table linrec measure wrote: R²_lin per block with its k-fold spread",
    "replace": "replace FFN blocks by fitted maps (given, or chosen under a perplexity budget) and save the result",
    "export": "write a replaced model as one directory that loads without linrec where its class allows",
    "evaluate": "score a model on zero-shot tasks, HumanEval and the pruning papers' WikiText-2 perplexity",
    "zoo": "train (or find cached) the offline model zoo and print its table",
    "bench": "time capture + moments against the bare forward on a GPT-2-small-sized model",
}
"""Each command's one-line summary; its module, :mod:`linrec.commands.<name>`, holds its options and handler."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line as the project's are (``linrec: error: ...``), pointing to ``--help``
    instead of printing the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"linrec: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``linrec`` parser: every command by its summary, and ``command``'s options in full.

    Only ``command``'s module is imported (none for ``linrec --help``): the commands' choices come from modules
    that import torch, which takes seconds."""
    import importlib

    parser = Parser(prog="linrec", description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=f"linrec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, summary in COMMANDS.items():
        if name == command:
            importlib.import_module(f"linrec.commands.{name}").add_cli(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """Warnings on the command line read like its errors (no source file and line)."""
    print(f"linrec: warning: {message}", file=sys.stderr)


def _negative_values(argv: list[str]) -> list[str]:
    """``--option -5%`` as ``--option=-5%``: argparse reads a value that starts with a dash and is not a plain number
    as another option, and prints its usage instead of the option's own error (the value is checked as any other)."""
    out: list[str] = []
    for arg in argv:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and len(arg) > 1
            and arg[0] == "-"
            and (arg[1].isdigit() or arg[1] == ".")
        ):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run ``linrec`` on ``argv`` (default: the process's); a ``LinrecError`` prints as ``linrec: error: ...``
    and exits with status 2, Ctrl-C or SIGTERM as ``linrec: interrupted`` with status 130 (no traceback).

    Neither the parser nor this imports torch (a second or more): each command that runs it checks what it can
    first, then imports it and sets its threads (:func:`linrec.threads.set_threads`), so that a bad option, file or
    budget is one line within a fraction of a second."""
    from linrec.files import sigterm_interrupts

    argv = _negative_values(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings(), sigterm_interrupts():
        warnings.showwarning = _show_warning
        try:
            args = build_parser(next((a for a in argv if not a.startswith("-")), None)).parse_args(argv)
            if getattr(args, "no_progress", False):
                from linrec.progress import no_library_bars

                with no_library_bars():  # transformers' bars too, as --no-progress hides linrec's
                    return args.handler(args)
            return args.handler(args)
        except LinrecError as err:
            print(f"linrec: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("linrec: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
