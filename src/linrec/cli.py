"""The ``linrec`` command: ``profile`` measures a model, ``zoo`` builds the offline models, ``bench`` times the core.

This module only assembles the parser and runs a command; each command's options and handler are in
:mod:`linrec.commands` (``profile``, ``zoo``, ``bench``), the helpers they share in
:mod:`linrec.commands.args`.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from linrec import __version__
from linrec.errors import LinrecError


def build_parser() -> argparse.ArgumentParser:
    """The ``linrec`` parser with its three commands (their modules are imported here, not at import of this one)."""
    from linrec.commands import bench, profile, zoo

    parser = argparse.ArgumentParser(prog="linrec", description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--version", action="version", version=f"linrec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    profile.add_cli(sub)
    zoo.add_cli(sub)
    bench.add_cli(sub)
    return parser


def _show_warning(message: Warning | str, *_: object, **__: object) -> None:
    """Warnings on the command line read like its errors (no source file and line)."""
    print(f"linrec: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run ``linrec`` on ``argv`` (default: the process's); a ``LinrecError`` prints as ``linrec: error: ...``
    and exits with status 2, Ctrl-C or SIGTERM as ``linrec: interrupted`` with status 130 (no traceback)."""
    from linrec.files import sigterm_interrupts

    with warnings.catch_warnings(), sigterm_interrupts():
        warnings.showwarning = _show_warning
        try:
            args = build_parser().parse_args(argv)
            return args.handler(args)
        except LinrecError as err:
            print(f"linrec: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("linrec: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
