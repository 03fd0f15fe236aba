"""``linrec plot``: draw a table written by ``linrec measure --out`` as the book draws a depth profile."""

from __future__ import annotations

import argparse
from pathlib import Path

from linrec.commands.args import HelpFormatter, check_output, read_table, short_name
from linrec.errors import LinrecError
from linrec.files import write_atomically

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def add_cli(sub: argparse._SubParsersAction) -> None:
    """Register ``linrec plot``; its handler is ``args.handler``."""
    p = sub.add_parser(
        "plot",
        formatter_class=HelpFormatter,
        description="Draw R²_lin per block (k-fold mean ± std) beside the median over output features, one panel\n"
        "per model, from a table written by `linrec measure --out`, with the figure code of the book.",
    )
    p.add_argument("table", type=Path, metavar="TABLE", help="a .csv or .json table from linrec measure --out")
    p.add_argument("--out", type=Path, required=True, metavar="FIGURE", help="the figure to write: .png, .pdf or .svg")
    p.add_argument("--model", action="append", metavar="MODEL", help="draw only this model (repeat for several)")
    p.add_argument("--title", help="a title over the figure")
    p.add_argument(
        "--scores",
        action="store_true",
        help="draw the layer-pruning scores per block instead (one panel per score, one line per model; chapter 11 "
        "of the book says how well each predicts what dropping a block costs)",
    )
    p.set_defaults(handler=_plot)


def _plot(args: argparse.Namespace) -> int:
    """Read the table, keep ``--model``'s rows, draw them with :func:`linrec.plots.measured.measured_figure` (with
    ``--scores``, :func:`linrec.plots.pruning.scores_by_block`)."""
    check_output(args.out, suffixes=FIGURE_SUFFIXES)
    table = read_table(args.table)
    if "model" in table and args.model:
        names = list(dict.fromkeys(table["model"]))
        chosen = [n for n in names if n in args.model or short_name(n) in args.model]
        unknown = [m for m in args.model if m not in names and m not in map(short_name, names)]
        if unknown:
            raise LinrecError(f"no model {unknown} in {args.table}; it has {', '.join(map(short_name, names))}")
        table = table[table["model"].isin(chosen)]
    if "model" in table:
        table = table.assign(model=table["model"].map(short_name))
    import matplotlib

    matplotlib.use("Agg")  # a file, never a window
    from linrec.plots import use_book_style
    from linrec.plots.measured import measured_figure
    from linrec.plots.pruning import scores_by_block

    use_book_style()
    fig = scores_by_block(table, args.title) if args.scores else measured_figure(table, args.title)
    write_atomically(args.out, lambda file: fig.savefig(file, format=args.out.suffix[1:], dpi=150), binary=True)
    print(f"wrote {args.out}")
    return 0
