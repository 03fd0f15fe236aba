"""Named text corpora, each with a fit text (for measurement and training) and a disjoint eval text.

Offline corpora are built from what every Python installation carries, without a network and
without importing anything (sources are read and parsed with ``ast``), so they are identical for
a given Python build; each records a sha256 of its content so results say what they were run on.

===================  ========  ==================================================================
name                 domain    built from
===================  ========  ==================================================================
``stdlib-prose``     prose     docstrings of the standard library's modules, classes and functions
``stdlib-code``      code      the standard library's source with those docstrings removed
``unicode-records``  records   one fixed-schema line per named Unicode character (``unicodedata``)
===================  ========  ==================================================================

The third domain is neither prose nor code: tabular records, like logs, CSV files or database
dumps, where the next token depends mostly on the column and on the entity of the row (a name
predicts its category, its case partner, its decomposition). Algorithmically named characters
(CJK ideographs, Hangul syllables, Tangut, ...) are left out: they would make up three quarters of
the table and carry nothing but a counter. Fit and eval are split by whole unit, never inside one:
by module for the standard library (about 10% of modules are held out) and by block of 128 code
points for the records, so held-out text is not a near-copy of fitted text.

Paper corpora come from the Hugging Face hub through ``datasets``, streamed; WikiText-2 is taken
whole, the others up to 4M characters of fit text and 1M of eval text (:class:`HubCorpus`):

- ``wikitext-2``: ``Salesforce/wikitext``, config ``wikitext-2-raw-v1``; fit: split ``train``,
  eval: split ``test``.
- ``codeparrot``: ``codeparrot/codeparrot-clean-valid`` (field ``content``); it has one split,
  ``train``: every 10th file is eval, the rest fit.
- ``tinystories``: ``roneneldan/TinyStories``; fit: split ``train``, eval: split ``validation``.

WikiText-2 (encyclopedic prose) is the paper's corpus; CodeParrot (Python files from GitHub) is
the code domain, and TinyStories (short, simple narratives) a prose register far from Wikipedia's.
A hub that cannot be reached fails in seconds, naming the offline profile.
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from linrec.cache import build_entry, cache_dir, cache_key
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT, hub_offline, hub_reachable

Loader = Callable[..., Iterable[Mapping[str, object]]]
"""``loader(path, config, split=..., streaming=True)`` -> rows (dicts); ``datasets.load_dataset`` by default."""


@dataclass(frozen=True)
class Corpus:
    """A named text with disjoint fit and eval parts and a sha256 of both (``sha256``)."""

    name: str
    domain: str
    fit_text: str
    eval_text: str
    source: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256()
        for part in (self.fit_text, self.eval_text):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
        object.__setattr__(self, "sha256", digest.hexdigest())

    def text(self, split: str) -> str:
        """The ``"fit"`` or the ``"eval"`` text."""
        if split not in ("fit", "eval"):
            raise LinrecError(f"unknown split '{split}'; choose 'fit' or 'eval'")
        return self.fit_text if split == "fit" else self.eval_text

    def summary(self) -> dict[str, object]:
        """What results should record about the corpus (everything but the text)."""
        return {
            "corpus": self.name,
            "domain": self.domain,
            "sha256": self.sha256,
            "fit_chars": len(self.fit_text),
            "eval_chars": len(self.eval_text),
            "source": self.source,
        }


def in_eval_split(unit: str, every: int = 10) -> bool:
    """Whether a unit (module, record block) goes to the eval text: a stable hash, about 1 in ``every``."""
    return int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "little") % every == 0


# ---------------------------------------------------------------------------------------------
# Offline corpora: the standard library and the Unicode database of this Python.

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


def _docstring_nodes(tree: ast.Module) -> list[tuple[ast.AST, ast.Expr]]:
    """(owner, docstring statement) for the module and every class and function, in source order."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
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


def _without_docstrings(source: str, docstrings: list[tuple[ast.AST, ast.Expr]]) -> str:
    """``source`` with each docstring that fills its own lines removed (``pass`` where it was the whole body)."""
    lines = source.splitlines(keepends=True)
    replace: dict[int, str] = {}
    for owner, doc in docstrings:
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
def _stdlib_texts() -> dict[str, tuple[str, str]]:
    """{"prose"|"code": (fit, eval)} from one pass over the standard library's sources."""
    parts: dict[tuple[str, bool], list[str]] = {(d, e): [] for d in ("prose", "code") for e in (False, True)}
    for module, path in _stdlib_files():
        try:
            source = importlib.util.decode_source(path.read_bytes())
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # not parseable by this Python (e.g. a template): skipped the same way every time
        docstrings = _docstring_nodes(tree)
        held = in_eval_split(module)
        parts["prose", held].extend(ast.get_docstring(owner) for owner, _ in docstrings)
        parts["code", held].append(_without_docstrings(source, docstrings))
    return {d: ("\n\n".join(parts[d, False]), "\n\n".join(parts[d, True])) for d in ("prose", "code")}


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
def _unicode_texts() -> tuple[str, str]:
    fit, held = [], []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        name = unicodedata.name(ch, "")
        if name and not name.startswith(_DERIVED_NAMES):
            (held if in_eval_split(f"block-{cp >> 7}") else fit).append(_unicode_record(ch))
    return "\n".join(fit) + "\n", "\n".join(held) + "\n"


def _stdlib_corpus(name: str, domain: str) -> Corpus:
    fit, held = _stdlib_texts()[domain]
    what = "docstrings" if domain == "prose" else "source code without docstrings"
    source = (
        f"{what} of the standard library of Python {platform.python_version()} "
        f"({sys.implementation.name}) at {sysconfig.get_path('stdlib')}; eval: about 1 module in 10"
    )
    return Corpus(name, domain, fit, held, source)


def _unicode_corpus(name: str) -> Corpus:
    fit, held = _unicode_texts()
    source = (
        f"records of named characters from unicodedata {unicodedata.unidata_version} "
        f"(Python {platform.python_version()}); eval: about 1 block of 128 code points in 10"
    )
    return Corpus(name, "records", fit, held, source)


OFFLINE_CORPORA: dict[str, str] = {"stdlib-prose": "prose", "stdlib-code": "code", "unicode-records": "records"}
"""Offline corpus name -> domain."""


# ---------------------------------------------------------------------------------------------
# Paper corpora: public datasets on the Hugging Face hub.


@dataclass(frozen=True)
class HubCorpus:
    """Where a paper corpus lives on the hub and how its fit and eval texts are cut from it.

    When ``eval_split`` is None, every ``holdout_every``-th row of ``fit_split`` goes to eval.
    Rows are read in dataset order until ``max_fit_chars`` / ``max_eval_chars`` are reached.
    """

    domain: str
    path: str
    config: str | None
    fit_split: str
    eval_split: str | None
    field: str = "text"
    joiner: str = "\n\n"
    holdout_every: int = 10
    max_fit_chars: int = 4_000_000
    max_eval_chars: int = 1_000_000

    def describe(self) -> str:
        held = (
            f"split '{self.eval_split}'"
            if self.eval_split
            else f"every {self.holdout_every}th row of '{self.fit_split}'"
        )
        return (
            f"hub dataset {self.path}"
            + (f" config {self.config}" if self.config else "")
            + f", field '{self.field}'; fit: split '{self.fit_split}'; eval: {held}; "
            f"capped at {self.max_fit_chars} / {self.max_eval_chars} characters"
        )


PAPER_CORPORA: dict[str, HubCorpus] = {
    # The paper's corpus. Raw rows are lines that keep their newline, so they join with "".
    "wikitext-2": HubCorpus(
        "prose",
        "Salesforce/wikitext",
        "wikitext-2-raw-v1",
        "train",
        "test",
        joiner="",
        max_fit_chars=20_000_000,
        max_eval_chars=20_000_000,
    ),
    "codeparrot": HubCorpus("code", "codeparrot/codeparrot-clean-valid", None, "train", None, field="content"),
    "tinystories": HubCorpus("prose", "roneneldan/TinyStories", None, "train", "validation"),
}


def _datasets_loader(path: str, config: str | None, split: str, streaming: bool = True) -> Iterable[Mapping]:
    try:
        import datasets
    except ImportError as err:
        raise LinrecError(
            f"hub corpora need the 'datasets' package: pip install 'linrec[paper]'. {OFFLINE_HINT}"
        ) from err
    return datasets.load_dataset(path, config, split=split, streaming=streaming)


def _take(
    rows: Iterable[Mapping], spec: HubCorpus, limits: tuple[int, int], single_split: bool
) -> tuple[list[str], list[str]]:
    """Texts for (fit, eval) from ``rows``: all to fit, or every holdout_every-th to eval when ``single_split``."""
    out: tuple[list[str], list[str]] = ([], [])
    size = [0, 0]
    for i, row in enumerate(rows):
        part = 1 if single_split and i % spec.holdout_every == 0 else 0
        if size[part] < limits[part]:
            text = str(row[spec.field])
            out[part].append(text)
            size[part] += len(text) + len(spec.joiner)
        if size[0] >= limits[0] and (not single_split or size[1] >= limits[1]):
            break
    return out


def _hub_corpus(name: str, spec: HubCorpus, loader: Loader | None) -> Corpus:
    if loader is None:
        if not hub_offline() and not hub_reachable():
            raise LinrecError(
                f"corpus '{name}' ({spec.path}) needs the Hugging Face hub, which cannot be reached. {OFFLINE_HINT} "
                "If the dataset is already in your local cache, set HF_HUB_OFFLINE=1 to use it."
            )
        loader = _datasets_loader
    try:
        if spec.eval_split is None:
            fit, held = _take(
                loader(spec.path, spec.config, split=spec.fit_split, streaming=True),
                spec,
                (spec.max_fit_chars, spec.max_eval_chars),
                single_split=True,
            )
        else:
            fit, _ = _take(
                loader(spec.path, spec.config, split=spec.fit_split, streaming=True),
                spec,
                (spec.max_fit_chars, 0),
                single_split=False,
            )
            held, _ = _take(
                loader(spec.path, spec.config, split=spec.eval_split, streaming=True),
                spec,
                (spec.max_eval_chars, 0),
                single_split=False,
            )
    except LinrecError:
        raise
    except Exception as err:  # datasets and the hub raise many types; the user needs one message
        raise LinrecError(f"could not load corpus '{name}' ({spec.path}): {err}\n{OFFLINE_HINT}") from err
    if not fit or not held:
        raise LinrecError(f"corpus '{name}' ({spec.path}) gave an empty fit or eval text; check the dataset's splits")
    return Corpus(name, spec.domain, spec.joiner.join(fit), spec.joiner.join(held), spec.describe())


def corpus_names() -> list[str]:
    """Every corpus :func:`load_corpus` knows, offline ones first."""
    return [*OFFLINE_CORPORA, *PAPER_CORPORA]


CORPUS_FORMAT = 1
"""Bumped whenever the code changes what an offline corpus contains (it keys the on-disk cache)."""


@functools.cache
def _offline_corpus(name: str) -> Corpus:
    """Built once per Python version and cached on disk (building reads the whole standard library)."""
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
        fields = {f: getattr(corpus, f) for f in ("name", "domain", "fit_text", "eval_text", "source")}
        (tmp / "corpus.json").write_text(json.dumps(fields), encoding="utf-8")

    build_entry(path, build)
    return Corpus(**json.loads((path / "corpus.json").read_text(encoding="utf-8")))


def load_corpus(name: str, *, loader: Loader | None = None) -> Corpus:
    """The corpus called ``name`` (see the module docstring for the list).

    ``loader`` replaces ``datasets.load_dataset`` for hub corpora (tests inject local rows with it);
    offline corpora are built once per process.
    """
    if name in OFFLINE_CORPORA:
        return _offline_corpus(name)
    if name in PAPER_CORPORA:
        return _hub_corpus(name, PAPER_CORPORA[name], loader)
    raise LinrecError(f"unknown corpus '{name}'; choose one of {', '.join(corpus_names())}")
