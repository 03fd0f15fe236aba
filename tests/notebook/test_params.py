"""Chapter parameters fail where they are set, in one line; chapter 9 checks its own before any work."""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ROOT
from linrec.errors import LinrecError
from linrec.notebook import chapter as book_chapter
from linrec.notebook.params import RULES, check_params, require

CHAPTER_1 = ROOT / "notebooks" / "01_method.py"


CHAPTER_9 = ROOT / "notebooks" / "09_your_model.py"


def _cells(source: str) -> list[str]:
    return source.split("\n# %%")


def _parameter_check(chapter: Path) -> tuple[dict, Callable[[], None]]:
    """A chapter's parameters (its parameters cell run) and its check (the check_params call, or the checking half
    of the chapter.begin call, of the next code cell), to run on changed parameters."""
    cells = _cells(chapter.read_text(encoding="utf-8"))
    at = next(i for i, c in enumerate(cells) if c.startswith(' tags=["parameters"]'))
    following = next(c for c in cells[at + 1 :] if not c.startswith(" [markdown]"))
    calls = [
        node
        for node in ast.parse(following.split("\n", 1)[1]).body
        if isinstance(node, (ast.Expr, ast.Assign))
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) in {"check_params", "chapter.begin"}
    ]
    assert len(calls) == 1, "the first code cell after the parameters cell calls check_params or chapter.begin once"
    checking = types.SimpleNamespace(begin=lambda name, params, **rules: book_chapter.check(params, **rules))
    namespace = {"check_params": check_params, "chapter": checking}
    exec(cells[at].split("\n", 1)[1], namespace)
    return namespace, lambda: exec(compile(ast.Module(calls, []), chapter.name, "exec"), namespace)


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        ("integer", [0, -3, 7], [1.5, "1", True, None]),
        ("positive_int", [1, 20_000], [0, -5, 2.0, True, None]),
        ("positive_int_or_none", [None, 3], [0, -100, "3"]),
        ("folds", [2, 10], [1, 0, 2.5]),
        ("fraction", [0, 0.95, 1], [-0.1, 1.01, float("nan"), "0.5", True]),
        ("positive_number", [2.0, 7], [0, -1, float("inf")]),
        ("ppl_budget", [2.5, 1, "5%", " 0.5 "], [0, -1, "0%", "nan", "five", None, True, float("inf")]),
        ("flag", [True, False], [0, None, "yes"]),
        ("flag_or_none", [None, True], [1]),
        ("name_or_none", [None, "gpt2"], ["", "  ", 3]),
        ("names_or_none", [None, ["a", "b"], ("a",)], [[], "ab", ["a", ""], [1]]),
        ("names_empty_or_none", [None, [], ["a"], ("a", "b")], ["ab", ["a", ""], [1]]),
        ("seeds", [[0], (0, 1), [3, 2]], [[], None, [-1], [0.5], [True], "01"]),
        ("indices_or_none", [None, [0], (3, 11, 28)], [[], [-1], [0.5], [True], "01"]),
        ("shares", [[0.5], (0.25, 0.99, 1)], [[], None, [0], [1.5], [True], ["0.5"], [float("nan")]]),
    ],
)
def test_rules_accept_good_and_refuse_bad_values(rule, good, bad):
    for value in good:
        require("P", value, rule)
    for value in bad:
        with pytest.raises(LinrecError, match=f"^parameter P must be {RULES[rule][1]}; got "):
            require("P", value, rule)


def test_the_message_is_one_readable_line():
    with pytest.raises(LinrecError) as err:
        check_params({"ROWS": -5, "SEED": 0}, integer=["SEED"], positive_int=["ROWS"])
    assert str(err.value) == "parameter ROWS must be a positive integer; got -5"
    with pytest.raises(
        LinrecError, match="^parameter MODEL must be a non-empty string or None; got '' \\(a hub id\\)$"
    ):
        require("MODEL", "", "name_or_none", "a hub id")


def test_undefined_parameter_and_unknown_rule():
    with pytest.raises(LinrecError, match="parameter ROWS is not defined"):
        check_params({}, positive_int=["ROWS"])
    with pytest.raises(LinrecError, match="unknown parameter rule 'positive'; choose one of integer, positive_int"):
        check_params({"ROWS": 5}, positive=["ROWS"])


def test_chapter_9_checks_its_parameters_before_any_work():
    """The parameters cell run with MAX_ROWS = -100, then the check_params call of the next code cell:
    one LinrecError, never argparse's usage text or SystemExit."""
    namespace, run_check = _parameter_check(CHAPTER_9)
    run_check()  # the defaults pass
    namespace["MAX_ROWS"] = -100
    with pytest.raises(LinrecError, match="^parameter MAX_ROWS must be a positive integer or None; got -100$"):
        run_check()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TINY_WIDTH", 6, "parameter TINY_WIDTH must be a multiple of TINY_HEADS = 4; got 6"),
        ("TINY_HEADS", 3, "parameter TINY_WIDTH must be a multiple of TINY_HEADS = 3; got 64"),
        ("TINY_SEQUENCES", 4, "parameter TINY_SEQUENCES must be at least FOLDS = 5; got 4"),
    ],
)
def test_chapter_1_refuses_parameters_its_tiny_gpt2_cannot_take(name, value, message):
    """Heads must divide the width (GPT2Config would fail cells later), and the sequences must fill the folds."""
    namespace, run_check = _parameter_check(CHAPTER_1)
    run_check()
    namespace[name] = value
    with pytest.raises(LinrecError, match=f"^{re.escape(message)}$"):
        run_check()


def test_relations_between_parameters():
    check_params({"W": 8, "H": 4, "N": 5, "K": 5}, multiple_of=[("W", "H")], at_least=[("N", "K")])
    check_params({"W": 8, "H": None}, multiple_of=[("W", "H")])  # None: the profile's value, checked where it is set
    with pytest.raises(LinrecError, match="^parameter N must be at least K = 5; got 4$"):
        check_params({"N": 4, "K": 5}, at_least=[("N", "K")])
    with pytest.raises(LinrecError, match="parameter H is not defined"):
        check_params({"W": 8}, multiple_of=[("W", "H")])
    with pytest.raises(LinrecError, match="must be numbers"):
        check_params({"W": "8", "H": 4}, multiple_of=[("W", "H")])


def test_chapter_9_leaves_no_temporary_directory(tmp_path, monkeypatch, capsys):
    """The cell that writes the text file and runs the CLI, with the CLI replaced by a stand-in that
    writes a table: the table is read, and the chapter's directory is gone after its last cell, or after an
    error once its holder is collected."""
    import gc
    import tempfile
    from types import SimpleNamespace

    import pandas as pd

    import linrec

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = {}

    def fake_cli(args):
        text = Path(args[args.index("--text-file") + 1])
        seen["text"] = text.read_text(encoding="utf-8")
        pd.DataFrame({"block": [0, 1]}).to_csv(args[args.index("--out") + 1], index=False)
        return 0

    import linrec.cli

    monkeypatch.setattr(linrec.cli, "main", fake_cli)
    cell = next(c for c in _cells(CHAPTER_9.read_text(encoding="utf-8")) if "linrec.cli.main(args)" in c)
    profile = SimpleNamespace(seq_len=16, folds=5, batch_size=8, device=None, shaped=False)
    namespace = {
        "tempfile": tempfile,
        "Path": Path,
        "pd": pd,
        "linrec": linrec,
        "where": "m",
        "rows": 100,
        "SEED": 0,
        "corpus": SimpleNamespace(fit_text="some text"),
        "ch": SimpleNamespace(progress=False, profile=profile),
    }
    exec(cell.split("\n", 1)[1], namespace)
    assert seen["text"] == "some text" and list(namespace["table"].block) == [0, 1]
    assert str(tmp_path) not in capsys.readouterr().out  # the command is printed without the machine's paths
    assert [p.name for p in tmp_path.iterdir()] == [namespace["workdir"].name]  # kept for the later cells ...
    namespace["scratch"].cleanup()  # ... until the chapter's last cell
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(linrec.cli, "main", lambda args: 2)
    with pytest.raises(LinrecError, match="linrec measure failed"):
        exec(cell.split("\n", 1)[1], namespace)
    namespace.pop("scratch")  # an error ends the kernel: the directory goes with the object that holds it
    gc.collect()
    assert list(tmp_path.iterdir()) == []
