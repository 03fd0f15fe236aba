"""A chapter as a student meets it on Colab: plain Markdown, and exercises whose solutions "Run all" leaves alone.

The chapter sources are written for the book, in MyST: citations ``{cite}``, cross-references ``{numref}`` and
``{ref}``, glued numbers ``{glue:text}``, and ``:::{...}`` directives, among them the exercises of
sphinx-exercise (``exercise``, ``solution``, and the gated ``solution-start`` ... ``solution-end`` pair whose
code cells belong to the solution). Colab renders none of it, and it would run a solution's code on "Run all".
:func:`colab_cells` rewrites a chapter's cells for Colab:

- roles become readable text: a citation "(Author, year)" from ``book/references.bib``, a figure reference
  "the figure above" or "below" (by where the figure's cell is), a reference to an exercise "exercise N", a
  glued value its name (the chapter prints glued values where it computes them, outside the book);
- an exercise becomes a heading "Exercise N: title" with its text;
- a solution becomes its own Markdown cell, a collapsed heading "Solution to exercise N" over the written
  answer, its code shown as fenced Python blocks: there is no code cell for "Run all" to execute. A student
  runs it by pasting it into a cell. Colab collapses the cells listed in the notebook's
  ``colab.collapsed_sections``; JupyterLab reads ``jp-MarkdownHeadingCollapsed`` on the heading cell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from bookbuild.layout import BookError

ROLE = re.compile(r"\{(cite(?::[tp])?|numref|ref|glue:text|glue)\}`([^`]*)`")
FENCE = re.compile(r"^(:{3,})\{([\w-]+)\}[ \t]*(.*)$")
OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
DIRECTIVE_START = re.compile(r"^:{3,}\{|^`{3,}\{", re.MULTILINE)
"""What no Markdown cell of a Colab notebook may contain: a MyST role, or the opening of a MyST directive."""
RAW_MYST = re.compile(rf"{ROLE.pattern}|{DIRECTIVE_START.pattern}", re.MULTILINE)
ORDINALS = ("", "second", "third", "fourth", "fifth")
SOLUTION_TAG = "solution"
"""The tag of a solution's code cells in the sources (between ``solution-start`` and ``solution-end``)."""


def bibliography(path: Path) -> dict[str, str]:
    """Each BibTeX key of ``path`` with its author-year label: "Whipp, 2026", "Chan et al., 1979"."""
    labels = {}
    for match in re.finditer(r"@\w+\{([^,\s]+),(.*?)\n\}", path.read_text(), re.DOTALL):
        key, body = match.groups()
        fields = dict(re.findall(r"(\w+)\s*=\s*\{((?:[^{}]|\{[^{}]*\})*)\}", body))
        if "author" not in fields or "year" not in fields:
            raise BookError(f"{path.name}: entry {key} needs an author and a year for its citation label")
        names = [a.split(",")[0].strip() if "," in a else a.split()[-1] for a in fields["author"].split(" and ")]
        names = [n.strip("{}") for n in names]
        who = names[0] if len(names) == 1 else f"{names[0]} and {names[1]}" if len(names) == 2 else f"{names[0]} et al."
        labels[key] = f"{who}, {fields['year']}"
    return labels


@dataclass
class _Context:
    """What rewriting one chapter needs: citation labels, figure positions, and the exercises seen so far."""

    citations: dict[str, str]
    figures: dict[str, int]  # figure name -> index of its cell among the source cells
    exercises: dict[str, int] = field(default_factory=dict)  # exercise label -> its number in the chapter
    cell: int = 0  # index of the source cell being rewritten

    def role(self, match: re.Match[str]) -> str:
        role, target = match.groups()
        text, label = _explicit(target)
        if role.startswith("cite"):
            keys = [k.strip() for k in label.split(",")]
            missing = [k for k in keys if k not in self.citations]
            if missing:
                raise BookError(f"no entry {missing} in book/references.bib for a citation")
            if role == "cite:t":
                return "; ".join(f"{who} ({year})" for who, year in (self.citations[k].rsplit(", ", 1) for k in keys))
            return f"({'; '.join(self.citations[k] for k in keys)})"
        if role == "numref":
            return text or self.figure(label)
        if role == "ref":
            return text or (f"exercise {self.exercises[label]}" if label in self.exercises else label)
        return f"`{label.split(':')[0]}` (printed above)"  # glue: the chapter prints it where it computes it

    def figure(self, label: str) -> str:
        """Where figure ``label`` is from the current cell: "the figure above", "the second figure below"."""
        if label not in self.figures:
            return "a figure of another chapter"
        at = self.figures[label]
        between = sum(min(at, self.cell) < i < max(at, self.cell) for i in self.figures.values())
        nth = "" if between == 0 else f"{ORDINALS[between] if between < len(ORDINALS) else f'{between + 1}th'} "
        return f"the {nth}figure {'above' if at < self.cell else 'below'}"

    def plain(self, text: str) -> str:
        """``text`` with its roles as readable text, capitalised where one opens a sentence."""

        def replace(match: re.Match[str]) -> str:
            words = self.role(match)
            opens = re.search(r"(^|[.!?:]\s+|\n\s*\n)$", text[: match.start()]) is not None
            return words[:1].upper() + words[1:] if opens else words

        return ROLE.sub(replace, text)


def _explicit(target: str) -> tuple[str, str]:
    """A role's target as (explicit text or "", label): ``Text <label>`` or ``label``."""
    match = re.fullmatch(r"(.*?)\s*<([^<>]+)>", target.strip(), re.DOTALL)
    return (match.group(1), match.group(2)) if match else ("", target.strip())


@dataclass
class _Directive:
    name: str
    argument: str
    options: dict[str, str]
    body: str


def _segments(source: str) -> list[str | _Directive]:
    """A Markdown cell as plain text and the top-level colon-fenced directives in it, in order."""
    lines, plain = source.split("\n"), []
    out: list[str | _Directive] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            plain.append(lines[i])
            i += 1
            continue
        if plain:
            out.append("\n".join(plain))
            plain = []
        colons, name, argument = match.groups()
        i += 1
        options = {}
        while i < len(lines) and (opt := OPTION.match(lines[i])):
            options[opt.group(1)] = opt.group(2)
            i += 1
        body = []
        while i < len(lines) and lines[i].strip() != colons:  # a nested directive uses more colons
            body.append(lines[i])
            i += 1
        i += 1
        out.append(_Directive(name, argument.strip(), options, "\n".join(body).strip("\n")))
    if plain:
        out.append("\n".join(plain))
    return out


def _solution_cell(number: int, text: str, code: list[str]) -> nbformat.NotebookNode:
    blocks = [f"#### Solution to exercise {number}", text.strip(), *(f"```python\n{c.strip()}\n```" for c in code)]
    return nbformat.v4.new_markdown_cell(
        "\n\n".join(b for b in blocks if b), metadata={"jp-MarkdownHeadingCollapsed": True, "solution": True}
    )


def colab_cells(
    cells: list[nbformat.NotebookNode], citations: dict[str, str], source: str
) -> list[nbformat.NotebookNode]:
    """``cells`` of a chapter rewritten for Colab (see the module's docstring); ``source`` names it in errors."""
    figures = {
        name: i
        for i, c in enumerate(cells)
        if (name := c.metadata.get("mystnb", {}).get("figure", {}).get("name")) is not None
    }
    ctx = _Context(citations, figures)
    out: list[nbformat.NotebookNode] = []
    markdown: list[str] = []  # plain text waiting to become a cell
    solution: tuple[int, str, list[str]] | None = None  # a gated solution being read: number, text, code

    def flush() -> None:
        text = "\n\n".join(m.strip("\n") for m in markdown if m.strip())
        if text:
            out.append(nbformat.v4.new_markdown_cell(text))
        markdown.clear()

    for ctx.cell, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            if solution is not None:
                solution[2].append(cell.source)
            elif SOLUTION_TAG in cell.metadata.get("tags", []):
                raise BookError(
                    f"{source}: a code cell tagged '{SOLUTION_TAG}' outside solution-start ... solution-end"
                )
            else:
                flush()
                out.append(cell)
            continue
        for part in _segments(cell.source):
            if isinstance(part, str):
                if solution is not None:  # a gated solution's text, after its solution-start
                    solution = (solution[0], f"{solution[1]}\n{ctx.plain(part)}", solution[2])
                else:
                    markdown.append(ctx.plain(part))
            elif part.name == "exercise":
                label = part.options.get("label", "")
                ctx.exercises[label] = number = len(ctx.exercises) + 1
                flush()  # an exercise is a cell of its own, under its own heading
                markdown.append(f"### Exercise {number}: {ctx.plain(part.argument)}\n\n{ctx.plain(part.body)}")
            elif part.name in ("solution", "solution-start"):
                if part.argument not in ctx.exercises:
                    raise BookError(f"{source}: a solution to '{part.argument}', which no exercise before it labels")
                flush()
                if part.name == "solution":
                    out.append(_solution_cell(ctx.exercises[part.argument], ctx.plain(part.body), []))
                else:
                    solution = (ctx.exercises[part.argument], ctx.plain(part.body), [])
            elif part.name == "solution-end":
                if solution is None:
                    raise BookError(f"{source}: solution-end without a solution-start before it")
                out.append(_solution_cell(solution[0], solution[1], solution[2]))
                solution = None
            else:  # an admonition, note, ...: a bold title over its text
                title = ctx.plain(part.argument) or part.name.capitalize()
                markdown.append(f"**{title}.** {ctx.plain(part.body)}")
        flush()
    if solution is not None:
        raise BookError(f"{source}: solution-start of exercise {solution[0]} without its solution-end")
    flush()
    return out


def collapse_solutions(nb: nbformat.NotebookNode) -> None:
    """List each solution heading cell of ``nb`` in ``colab.collapsed_sections`` (by its ``metadata.id``)."""
    collapsed = []
    for cell in nb.cells:
        if cell.metadata.get("solution"):
            cell.metadata["id"] = cell.id  # Colab names a cell by metadata.id
            collapsed.append(cell.id)
    nb.metadata.setdefault("colab", {})["collapsed_sections"] = collapsed


def raw_myst(text: str) -> list[str]:
    """The MyST roles and directive openings left in ``text`` (what Colab would show as raw markup)."""
    return [m.group(0) for m in RAW_MYST.finditer(text)]
