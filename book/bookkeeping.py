"""How much of each chapter's code is bookkeeping: a deterministic count, standard library only.

Usage: ``python book/bookkeeping.py [notebooks/NN_topic.py ...]`` (default: every ``notebooks/[0-9][0-9]_*.py``)
prints one line per chapter, ``chapter  code  bookkeeping  share``, and exits 1 when a chapter's share is above
:data:`TARGET` (``--no-target``: always exit 0). :func:`count` is the same count for one chapter's source.

The rules, applied to a Jupytext percent-format chapter:

* **Cells.** A cell starts at a line ``# %%``; a header ``# %% [markdown]`` (or ``[md]``) makes it a markdown
  cell, which is never counted. A code cell whose header's ``tags=[...]`` holds ``"parameters"`` is not counted
  either (the parameters are the chapter's interface, not its code).
* **Code lines.** The physical lines of the counted code cells, less the blank ones and those whose first
  non-blank character is ``#`` (comments). A line starting ``!`` or ``%`` (an IPython command) is a code line;
  it is read as ``pass`` when parsing.
* **Bookkeeping lines**, among the code lines: every code line of a statement (its first to its last physical
  line, as :mod:`ast` gives them) that is
    1. an *import*: ``import ...`` or ``from ... import ...``;
    2. *set-up*: a statement that calls ``check_params``, ``chapter.start``, ``chapter.begin`` or
       ``chapter.setup`` (or ``start``, ``begin``, ``setup`` by bare name), or that assigns to ``profile``, or
       that rebinds a name the ``parameters`` cell assigns (a parameter being defaulted or resolved, e.g.
       ``MODELS = list(MODELS or profile.models)``);
    3. *wording*: a conditional expression ``a if c else b`` one of whose branches is a string or f-string
       (a sentence chosen by a value: counted over the lines of the conditional expression itself), or a call of
       ``DataFrame`` or ``Series`` (``pd.DataFrame``, ...) with an f-string among its arguments (a table of
       sentences restating results: counted over the lines of the call);
    4. *figure plumbing*: a statement that calls a method of ``plt``, ``matplotlib``, ``sns`` or ``mpl``, or of
       a name called ``ax``, ``axes``, ``axs`` or ``fig`` (``fig.tight_layout()``, ``ax.set_xlabel(...)``), or
       that assigns from ``plt.subplots``/``plt.figure``. A call of a plots function (``fig = ...figure(...)``)
       and ``ch.figure(...)`` are not plumbing.
  A line is counted once, even where several rules match it.
* **Share**: bookkeeping lines / code lines.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

TARGET = 0.10
"""The most bookkeeping a chapter may hold, as a share of its code lines."""

_HEADER = re.compile(r"^# %%(.*)$")
_SETUP_CALLS = {"check_params", "start", "begin", "setup"}
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.If, ast.While, ast.With, ast.Try)
_PLOT_OWNERS = {"plt", "matplotlib", "sns", "mpl", "ax", "axes", "axs", "fig"}


@dataclass(frozen=True)
class Count:
    """One chapter's count: code lines, and bookkeeping lines among them by rule."""

    chapter: str
    code: int
    imports: int
    setup: int
    wording: int
    plumbing: int
    bookkeeping: int

    @property
    def share(self) -> float:
        return self.bookkeeping / self.code if self.code else 0.0


def parameters(source: str) -> set[str]:
    """The names the ``parameters`` cell of a percent-format source assigns."""
    return {name for _, lines in cells(source, counted=False) for name in _assigned(ast.parse("\n".join(lines)))}


def _assigned(tree: ast.Module) -> list[str]:
    return [name for stmt in tree.body for name in _targets(stmt)]


def cells(source: str, counted: bool = True) -> list[tuple[str, list[str]]]:
    """The code cells of a percent-format source that are counted: (header, lines) each; with ``counted`` False,
    the ``parameters`` cell instead."""
    out: list[tuple[str, list[str]]] = []
    header, lines = None, []  # text before the first marker is not a cell (jupytext's metadata header)
    for line in [*source.splitlines(), "# %% [markdown]"]:
        match = _HEADER.match(line)
        if not match:
            lines.append(line)
            continue
        if header is not None and not re.match(r"\s*\[(markdown|md)\]", header):
            tags = re.search(r"tags=\[([^\]]*)\]", header)
            if counted != bool(tags and '"parameters"' in tags.group(1)):
                out.append((header, lines))
        header, lines = match.group(1), []
    return out


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _called(node: ast.AST) -> set[str]:
    """The names called in ``node``: a bare name, or an attribute's last part and its owner ``owner.attr``."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name):
                names.add(f.id)
            elif isinstance(f, ast.Attribute):
                names.add(f.attr)
                if isinstance(f.value, ast.Name):
                    names.add(f"{f.value.id}.{f.attr}")
    return names


def _targets(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _lines(node: ast.AST) -> set[int]:
    return set(range(node.lineno, (node.end_lineno or node.lineno) + 1))  # type: ignore[attr-defined]


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _rules(tree: ast.Module, params: set[str]) -> dict[str, set[int]]:
    """Line numbers (1-based, in the parsed cell) matched by each rule."""
    hit: dict[str, set[int]] = {"imports": set(), "setup": set(), "wording": set(), "plumbing": set()}
    for stmt in ast.walk(tree):
        if not isinstance(stmt, ast.stmt):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            hit["imports"] |= _lines(stmt)
            continue
        if isinstance(stmt, _COMPOUND):
            continue  # its inner statements are judged one by one
        called = _called(stmt)
        targets = _targets(stmt)
        if called & _SETUP_CALLS or "profile" in targets or params & set(targets):
            hit["setup"] |= _lines(stmt)
        plotted = {c.split(".")[0] for c in called if "." in c} & _PLOT_OWNERS
        if plotted or {"plt.subplots", "plt.figure"} & called:
            hit["plumbing"] |= _lines(stmt)
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp) and (_is_text(node.body) or _is_text(node.orelse)):
            hit["wording"] |= _lines(node)
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in {"DataFrame", "Series"} and any(isinstance(n, ast.JoinedStr) for n in ast.walk(node)):
                hit["wording"] |= _lines(node)
    return hit


def count(source: str, chapter: str = "") -> Count:
    """The count of one chapter's percent-format ``source`` (rules: this module's docstring)."""
    code = 0
    totals = {"imports": 0, "setup": 0, "wording": 0, "plumbing": 0}
    bookkeeping = 0
    params = parameters(source)
    for _, lines in cells(source):
        parsed = "\n".join("pass" if line.lstrip().startswith(("!", "%")) else line for line in lines)
        code_lines = {i for i, line in enumerate(lines, 1) if _is_code(line)}
        code += len(code_lines)
        hit = _rules(ast.parse(parsed), params)
        for rule, numbers in hit.items():
            totals[rule] += len(numbers & code_lines)
        bookkeeping += len(set().union(*hit.values()) & code_lines)
    return Count(chapter, code, totals["imports"], totals["setup"], totals["wording"], totals["plumbing"], bookkeeping)


def count_file(path: Path) -> Count:
    return count(path.read_text(encoding="utf-8"), path.stem)


def chapters(root: Path) -> list[Path]:
    """The chapters' percent-format sources under ``root``/notebooks, in order."""
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.py"))


def main(argv: list[str]) -> int:
    check = "--no-target" not in argv
    paths = [Path(a) for a in argv if not a.startswith("--")] or chapters(Path(__file__).resolve().parents[1])
    over = 0
    print(f"{'chapter':<20} {'code':>5} {'import':>6} {'setup':>5} {'words':>5} {'plot':>5} {'bookkeeping':>11} share")
    for path in paths:
        c = count_file(path)
        over += c.share > TARGET
        print(
            f"{c.chapter:<20} {c.code:>5} {c.imports:>6} {c.setup:>5} {c.wording:>5} {c.plumbing:>5} "
            f"{c.bookkeeping:>11} {c.share:5.1%}"
        )
    return 1 if check and over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
