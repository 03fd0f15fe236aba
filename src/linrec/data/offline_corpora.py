"""Offline corpora: the standard library and the Unicode database of this Python.

Offline corpora are built from what every Python installation carries, without a network and
without importing anything (sources are read and parsed with ``ast``), so they are identical for
a given Python build; each records a sha256 of its content so results say what they were run on.

The third domain, ``unicode-records``, is neither prose nor code: tabular records, like logs, CSV
files or database dumps, where the next token depends mostly on the column and on the entity of the
row (a name predicts its category, its case partner, its decomposition). Algorithmically named characters
(CJK ideographs, Hangul syllables, Tangut, ...) are left out: they would make up three quarters of
the table and carry nothing but a counter. Fit and eval are split by whole unit, never inside one:
by module for the standard library (about 10% of modules are held out) and by block of 128 code
points for the records, so held-out text is not a near-copy of fitted text.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import platform
import sys
import sysconfig
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from linrec.cache import build_entry, cache_dir, cache_key
from linrec.data.corpus import Corpus


def in_eval_split(unit: str, every: int = 10) -> bool:
    """Whether a unit (module, record block) goes to the eval text: a stable hash, about 1 in ``every``."""
    return int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "little") % every == 0


# What can own a docstring (``ast.get_docstring`` accepts these).
_DocOwner = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef

_NOT_LIBRARY = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def _stdlib_files() -> list[tuple[str, Path]]:
    """(module name, path) of every standard-library source file outside test and site dirs, sorted."""
    root = Path(sysconfig.get_path("stdlib"))
    found = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if _NOT_LIBRARY & set(rel.parts[:-1]):
            continue
        found.append((".".join(rel.with_suffix("").parts).removesuffix(".__init__"), path))
    return sorted(found)


def _docstring_nodes(tree: ast.Module) -> list[tuple[_DocOwner, ast.Expr]]:
    """(owner, docstring statement) for the module and every class and function, in source order."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found: list[tuple[_DocOwner, ast.Expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, owners) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append((node, first))
    return sorted(found, key=lambda pair: pair[1].lineno)


def _without_docstrings(source: str, docstrings: list[tuple[_DocOwner, ast.Expr]]) -> str:
    """``source`` with each docstring that fills its own lines removed (``pass`` where it was the whole body)."""
    lines = source.splitlines(keepends=True)
    replace: dict[int, str] = {}
    for owner, doc in docstrings:
        assert doc.end_lineno is not None  # ast.parse sets the end position of every node
        first, last = doc.lineno - 1, doc.end_lineno - 1
        before = lines[first][: doc.col_offset]
        after = lines[last].encode("utf-8")[doc.end_col_offset :].decode("utf-8", "replace")
        if before.strip() or after.strip():
            continue  # shares a line with code: keep it
        for i in range(first, last + 1):
            replace[i] = ""
        if len(owner.body) == 1 and not isinstance(owner, ast.Module):
            replace[first] = before + "pass\n"
    return "".join(replace.get(i, line) for i, line in enumerate(lines))


@functools.cache
def stdlib_modules() -> tuple[tuple[str, Path, list[str], str], ...]:
    """(module, path, docstrings, source without them) of every parseable standard-library module, sorted.

    Read once per process: both offline stdlib corpora and the shaped CodeParrot files are built from it.
    """
    return tuple(_parsed_modules())


def _parsed_modules() -> Iterator[tuple[str, Path, list[str], str]]:
    for module, path in _stdlib_files():
        try:
            source = importlib.util.decode_source(path.read_bytes())
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # not parseable by this Python (e.g. a template): skipped the same way every time
        docstrings = _docstring_nodes(tree)
        # Never None: each owner's first statement is a string constant (_docstring_nodes checked).
        docs = [text for owner, _ in docstrings if (text := ast.get_docstring(owner)) is not None]
        yield module, path, docs, _without_docstrings(source, docstrings)


def joined(units: Iterable[Sequence[str]], sep: str) -> tuple[str, tuple[int, ...]]:
    """The pieces of every unit joined by ``sep`` (as one ``sep.join`` of all of them), and the offset where each
    unit with more than whitespace starts: the units as documents (the first from 0, so leading whitespace joins
    it; a blank unit joins the one before)."""
    pieces: list[str] = []
    starts: list[int] = []
    length = 0
    for unit in units:
        for i, piece in enumerate(unit):
            length += len(sep) if pieces else 0
            if i == 0 and "".join(unit).strip():
                starts.append(length if starts else 0)
            pieces.append(piece)
            length += len(piece)
    return sep.join(pieces), tuple(starts)


@functools.cache
def _stdlib_texts() -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """{"prose"|"code": (fit, eval, where each fit module starts)} from one pass over the standard library's
    sources; a module's docstrings, or its code, are one document."""
    parts: dict[tuple[str, bool], list[list[str]]] = {(d, e): [] for d in ("prose", "code") for e in (False, True)}
    for module, _, docs, code in stdlib_modules():
        held = in_eval_split(module)
        parts["prose", held].append(docs)
        parts["code", held].append([code])
    texts = {}
    for domain in ("prose", "code"):
        fit, starts = joined(parts[domain, False], "\n\n")
        texts[domain] = (fit, joined(parts[domain, True], "\n\n")[0], starts)
    return texts


_DERIVED_NAMES = (
    "CJK UNIFIED IDEOGRAPH-",
    "CJK COMPATIBILITY IDEOGRAPH-",
    "TANGUT IDEOGRAPH-",
    "KHITAN SMALL SCRIPT CHARACTER-",
    "NUSHU CHARACTER-",
    "HANGUL SYLLABLE ",
)


def _code_point(text: str) -> str:
    return "U+" + " U+".join(f"{ord(c):04X}" for c in text)


def _unicode_record(ch: str) -> str:
    """One record: code point | name | category | bidi class | east-asian width | combining class |
    decomposition | numeric value | upper-case | lower-case ('-' where there is none)."""
    numeric = unicodedata.numeric(ch, None)
    fields = [
        _code_point(ch),
        unicodedata.name(ch),
        unicodedata.category(ch),
        unicodedata.bidirectional(ch) or "-",
        unicodedata.east_asian_width(ch),
        str(unicodedata.combining(ch)),
        unicodedata.decomposition(ch) or "-",
        "-" if numeric is None else f"{numeric:g}",
        _code_point(ch.upper()) if ch.upper() != ch else "-",
        _code_point(ch.lower()) if ch.lower() != ch else "-",
    ]
    return " | ".join(fields)


@functools.cache
def _unicode_texts() -> tuple[str, str, tuple[int, ...]]:
    """(fit, eval, where each fit block starts): the records of each block of 128 code points are one document."""
    blocks: dict[bool, list[list[str]]] = {False: [], True: []}
    for block in range((sys.maxunicode >> 7) + 1):
        records = [
            _unicode_record(chr(cp))
            for cp in range(block << 7, (block + 1) << 7)
            if (name := unicodedata.name(chr(cp), "")) and not name.startswith(_DERIVED_NAMES)
        ]
        blocks[in_eval_split(f"block-{block}")].append(records)
    fit, starts = joined(blocks[False], "\n")
    return fit + "\n", joined(blocks[True], "\n")[0] + "\n", starts


def _stdlib_corpus(name: str, domain: str) -> Corpus:
    fit, held, starts = _stdlib_texts()[domain]
    what = "docstrings" if domain == "prose" else "source code without docstrings"
    source = (
        f"{what} of the standard library of Python {platform.python_version()} "
        f"({sys.implementation.name}) at {sysconfig.get_path('stdlib')}; eval: about 1 module in 10"
    )
    return Corpus(name, domain, fit, held, source, starts)


def _unicode_corpus(name: str) -> Corpus:
    fit, held, starts = _unicode_texts()
    source = (
        f"records of named characters from unicodedata {unicodedata.unidata_version} "
        f"(Python {platform.python_version()}); eval: about 1 block of 128 code points in 10"
    )
    return Corpus(name, "records", fit, held, source, starts)


OFFLINE_CORPORA: dict[str, str] = {"stdlib-prose": "prose", "stdlib-code": "code", "unicode-records": "records"}
"""Offline corpus name -> domain."""

CORPUS_FORMAT = 2
"""Bumped whenever the code changes what an offline corpus contains (it keys the on-disk cache)."""


@functools.cache
def offline_corpus(name: str) -> Corpus:
    """The offline corpus ``name``: built once per Python version and cached on disk (building reads the whole
    standard library), read once per process."""
    key = cache_key(
        {
            "corpus": name,
            "format": CORPUS_FORMAT,
            "python": sys.version,
            "stdlib": sysconfig.get_path("stdlib"),
            "unicode": unicodedata.unidata_version,
        }
    )
    path = cache_dir() / "corpora" / f"{name}-{key}"

    def build(tmp: Path) -> None:
        domain = OFFLINE_CORPORA[name]
        corpus = _unicode_corpus(name) if domain == "records" else _stdlib_corpus(name, domain)
        fields = {f: getattr(corpus, f) for f in ("name", "domain", "fit_text", "eval_text", "source", "fit_documents")}
        (tmp / "corpus.json").write_text(json.dumps(fields), encoding="utf-8")

    build_entry(path, build)
    return Corpus(**json.loads((path / "corpus.json").read_text(encoding="utf-8")))
