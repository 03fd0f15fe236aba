"""Named text corpora, each with a fit text (for measurement and training) and a disjoint eval text.

Offline corpora are built from what every Python installation carries, without a network and
without importing anything (sources are read and parsed with ``ast``), so they are identical for
a given Python build; each records a sha256 of its content so results say what they were run on.

======================  ========  ===============================================================
name                    domain    built from
======================  ========  ===============================================================
``stdlib-prose``        prose     docstrings of the standard library's modules, classes and functions
``stdlib-code``         code      the standard library's source with those docstrings removed
``unicode-records``     records   one fixed-schema line per named Unicode character (``unicodedata``)
``shaped-wikitext-2``   prose     ``stdlib-prose`` laid out as WikiText-2-raw rows (see below)
``shaped-codeparrot``   code      the standard library's files as CodeParrot rows
``shaped-tinystories``  prose     ``stdlib-prose`` paragraphs as TinyStories rows
======================  ========  ===============================================================

The third domain is neither prose nor code: tabular records, like logs, CSV files or database
dumps, where the next token depends mostly on the column and on the entity of the row (a name
predicts its category, its case partner, its decomposition). Algorithmically named characters
(CJK ideographs, Hangul syllables, Tangut, ...) are left out: they would make up three quarters of
the table and carry nothing but a counter. Fit and eval are split by whole unit, never inside one:
by module for the standard library (about 10% of modules are held out) and by block of 128 code
points for the records, so held-out text is not a near-copy of fitted text.

Paper corpora come from the Hugging Face hub through ``datasets``, streamed; WikiText-2 is taken
whole, the others up to 4M characters of fit text and 1M of eval text (:class:`HubCorpus`). The
cut texts are kept as a local slice in the linrec cache with their sha256 and the dataset commit
they were cut at, so a re-run reads them without the network (``HF_HUB_OFFLINE=1`` works):

- ``wikitext-2``: ``Salesforce/wikitext``, config ``wikitext-2-raw-v1``; fit: split ``train``,
  eval: split ``test``.
- ``codeparrot``: ``codeparrot/codeparrot-clean-valid`` (field ``content``); it has one split,
  ``train``: every 10th file is eval, the rest fit.
- ``tinystories``: ``roneneldan/TinyStories``; fit: split ``train``, eval: split ``validation``.

WikiText-2 (encyclopedic prose) is the paper's corpus; CodeParrot (Python files from GitHub) is
the code domain, and TinyStories (short, simple narratives) a prose register far from Wikipedia's.
A hub that cannot be reached fails in seconds, naming the offline profile.

Shaped corpora (``shaped-*``) exist to exercise the paper's shapes, not for science: each takes
the spec of its paper corpus (same splits, field, joiner and caps) through the same code path and
cache, but its rows come from local parquet / JSON-lines / text files laid out like the hub
dataset's, written here from the offline corpora and read back by ``datasets.load_dataset``.
WikiText's rows are lines with WikiText-raw's tokenisation (``" @-@ "`` and the like), headings
and blank rows, its text cycled to the real splits' sizes (:data:`WIKITEXT_SIZES`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import json
import platform
import re
import sys
import sysconfig
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from linrec.cache import build_entry, cache_dir, cache_key, entry_complete
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT, datasets_offline, hub_reachable, resolve_revision, use_hub_timeouts

Loader = Callable[..., Iterable[Mapping[str, object]]]
"""``loader(path, config, split=..., streaming=True)`` -> rows (dicts); ``datasets.load_dataset`` by default.
A ``revision=`` keyword is added when the dataset's revision is known."""


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
def _stdlib_modules() -> tuple[tuple[str, Path, list[str], str], ...]:
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
        docs = [ast.get_docstring(owner) for owner, _ in docstrings]
        yield module, path, docs, _without_docstrings(source, docstrings)


@functools.cache
def _stdlib_texts() -> dict[str, tuple[str, str]]:
    """{"prose"|"code": (fit, eval)} from one pass over the standard library's sources."""
    parts: dict[tuple[str, bool], list[str]] = {(d, e): [] for d in ("prose", "code") for e in (False, True)}
    for module, _, docs, code in _stdlib_modules():
        held = in_eval_split(module)
        parts["prose", held].extend(docs)
        parts["code", held].append(code)
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
# Paper corpora: public datasets on the Hugging Face hub, cut once and kept as local slices.


@dataclass(frozen=True)
class HubCorpus:
    """Where a paper corpus lives on the hub and how its fit and eval texts are cut from it.

    When ``eval_split`` is None, every ``holdout_every``-th row of ``fit_split`` goes to eval.
    Rows are read in dataset order until ``max_fit_chars`` / ``max_eval_chars`` are reached.
    ``revision`` pins the dataset (a branch, tag or commit; None: the default branch).
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
    revision: str | None = None

    def describe(self) -> str:
        held = (
            f"split '{self.eval_split}'"
            if self.eval_split
            else f"every {self.holdout_every}th row of '{self.fit_split}'"
        )
        return (
            f"hub dataset {self.path}"
            + (f" config {self.config}" if self.config else "")
            + (f" revision {self.revision}" if self.revision else "")
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

SLICE_FORMAT = 1
"""Bumped whenever the code changes how a hub corpus is cut from its rows (it keys the cached slices)."""


def _datasets():
    try:
        import datasets
    except ImportError as err:
        raise LinrecError(
            f"hub corpora need the 'datasets' package: pip install 'linrec[paper]'. {OFFLINE_HINT}"
        ) from err
    return datasets


def _datasets_loader(
    path: str, config: str | None, split: str, streaming: bool = True, revision: str | None = None
) -> Iterable[Mapping]:
    use_hub_timeouts()
    return _datasets().load_dataset(path, config, split=split, streaming=streaming, revision=revision)


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


def _cut(name: str, spec: HubCorpus, loader: Loader, revision: str | None) -> tuple[str, str]:
    """The (fit, eval) texts of ``spec`` from the rows ``loader`` gives (``revision`` passed on when known)."""
    pinned = {"revision": revision} if revision else {}

    def rows(split: str) -> Iterable[Mapping]:
        return loader(spec.path, spec.config, split=split, streaming=True, **pinned)

    try:
        if spec.eval_split is None:
            fit, held = _take(rows(spec.fit_split), spec, (spec.max_fit_chars, spec.max_eval_chars), True)
        else:
            fit, _ = _take(rows(spec.fit_split), spec, (spec.max_fit_chars, 0), False)
            held, _ = _take(rows(spec.eval_split), spec, (spec.max_eval_chars, 0), False)
    except LinrecError:
        raise
    except Exception as err:  # datasets and the hub raise many types; the user needs one message
        raise LinrecError(f"could not load corpus '{name}' ({spec.path}): {err}\n{OFFLINE_HINT}") from err
    if not fit or not held:
        raise LinrecError(f"corpus '{name}' ({spec.path}) gave an empty fit or eval text; check the dataset's splits")
    return spec.joiner.join(fit), spec.joiner.join(held)


def _slice_path(name: str, spec: HubCorpus, origin: Mapping[str, object]) -> Path:
    """The cache entry of a corpus cut by ``spec`` from the rows ``origin`` names (the hub, or local files).

    For the hub the key holds the *requested* revision (``spec.revision``), so an offline run, which
    cannot resolve it, still finds the slice; the commit it was cut at is recorded inside.
    """
    key = cache_key({"spec": dataclasses.asdict(spec), "origin": origin, "format": SLICE_FORMAT})
    return cache_dir() / "corpora" / f"{name}-{key}"


def _read_slice(path: Path) -> tuple[Corpus, str | None] | None:
    """(corpus, commit it was cut at) of a cached slice, or None when there is none."""
    if not entry_complete(path):
        return None
    stored = json.loads((path / "corpus.json").read_text(encoding="utf-8"))
    corpus = Corpus(**stored["corpus"])
    if corpus.sha256 != stored["sha256"]:
        raise LinrecError(f"the cached corpus {path} does not match its sha256; delete that folder to cut it again")
    return corpus, stored["commit"]


def _sliced(
    name: str, spec: HubCorpus, path: Path, loader: Loader, commit: str | None, source: str, refresh: bool = False
) -> Corpus:
    """The slice at ``path``, cut from ``loader``'s rows at ``commit`` first if it is not cached (or ``refresh``)."""

    def build(tmp: Path) -> None:
        corpus = Corpus(name, spec.domain, *_cut(name, spec, loader, commit), source)
        fields = {f: getattr(corpus, f) for f in ("name", "domain", "fit_text", "eval_text", "source")}
        stored = {"corpus": fields, "sha256": corpus.sha256, "commit": commit}
        (tmp / "corpus.json").write_text(json.dumps(stored), encoding="utf-8")

    build_entry(path, build, refresh=refresh)
    return _read_slice(path)[0]


def _hub_corpus(name: str, spec: HubCorpus, loader: Loader | None) -> Corpus:
    """A paper corpus: its cached slice, cut from the hub first when there is none or the dataset has moved.

    Online, the revision is resolved to a commit and a slice cut at another commit is cut again.
    Offline (``HF_DATASETS_OFFLINE`` / ``HF_HUB_OFFLINE``), or with the hub unreachable, the cached
    slice is used as it is, without a request. Rows from an injected ``loader`` are cut every time
    and not cached: the cache key could not name them.
    """
    if loader is not None:
        return Corpus(name, spec.domain, *_cut(name, spec, loader, spec.revision), spec.describe())
    path = _slice_path(name, spec, {"rows": "hub"})
    cached = _read_slice(path)
    offline = datasets_offline()
    if offline or not hub_reachable():
        if cached is not None:
            if not offline:
                warnings.warn(f"the hub cannot be reached; corpus '{name}' is read from its cached slice", stacklevel=3)
            return cached[0]
        why = "HF_DATASETS_OFFLINE / HF_HUB_OFFLINE forbid the hub" if offline else "the hub cannot be reached"
        raise LinrecError(
            f"corpus '{name}' ({spec.path}) is not in the local cache ({path.parent}) and {why}. {OFFLINE_HINT} "
            "Load it once with a network; later runs read the cached slice, with HF_HUB_OFFLINE=1 too."
        )
    commit = resolve_revision(spec.path, spec.revision, repo_type="dataset")
    if cached is not None and cached[1] == commit:
        return cached[0]
    source = f"{spec.describe()}; commit {commit}"
    return _sliced(name, spec, path, _datasets_loader, commit, source, refresh=cached is not None)


# ---------------------------------------------------------------------------------------------
# Shaped corpora: local files laid out like the paper's hub datasets, to exercise shapes, not science.

SHAPED_CORPORA: dict[str, str] = {
    "shaped-wikitext-2": "wikitext-2",
    "shaped-codeparrot": "codeparrot",
    "shaped-tinystories": "tinystories",
}
"""Shaped corpus name -> the paper corpus whose dataset layout its local files copy."""

SHAPED_FORMAT = 1
"""Bumped whenever the code changes what a shaped corpus's files contain (it keys them on disk)."""

WIKITEXT_SIZES = {"train": 10_900_000, "test": 1_300_000}
"""Characters of each WikiText-2-raw split (about), which the shaped splits reach by cycling their text."""

_WIKI_TOKEN = re.compile(r"@[-,.]@|'\w+|\w+|[^\w\s]")


def _paragraphs(text: str, min_chars: int = 1) -> list[str]:
    """The blank-line separated paragraphs of ``text``, each on one line; short ones merge into the next up to
    ``min_chars``."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        line = " ".join(block.split())
        if not line:
            continue
        if out and len(out[-1]) < min_chars:
            out[-1] += " " + line
        else:
            out.append(line)
    return out


def wikitext_line(text: str) -> str:
    """``text`` tokenised as WikiText-raw rows are: tokens spaced out, a leading space and a trailing ``" \\n"``,
    with in-word hyphens ``" @-@ "``, thousands commas ``" @,@ "`` and decimal points ``" @.@ "``."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "@,@", text)
    text = re.sub(r"(?<=\d)\.(?=\d)", "@.@", text)
    text = re.sub(r"(?<=\w)-(?=\w)", "@-@", text)
    text = re.sub(r"@([-,.])@", r" @\1@ ", text)
    return " " + " ".join(_WIKI_TOKEN.findall(text)) + " \n"


def wikitext_rows(text: str, min_chars: int) -> tuple[list[str], int]:
    """(rows laid out like WikiText-2-raw's, times ``text`` was cycled to reach ``min_chars``).

    Every 16th paragraph opens an article (``" = Title = \\n"``), every 4th other one a section
    (``" = = Title = = \\n"``), each heading between blank rows (``""``); titles are the paragraph's
    first words. Paragraphs are merged up to about WikiText's row length (~500 characters).
    """
    paragraphs = _paragraphs(text, min_chars=400)
    if not paragraphs:
        raise LinrecError("no text to lay out as WikiText rows")
    once: list[str] = []
    for i, paragraph in enumerate(paragraphs):
        if i % 4 == 0:
            title = wikitext_line(" ".join(paragraph.split()[:3])).strip()
            marks = "=" if i % 16 == 0 else "= ="
            once += ["", f" {marks} {title} {marks} \n", ""]
        once.append(wikitext_line(paragraph))
    cycles = -(-min_chars // sum(map(len, once)))
    return once * cycles, cycles


def _codeparrot_rows() -> list[dict[str, object]]:
    """One row per standard-library module, as CodeParrot's: the file's text (docstrings removed) and its metadata."""
    root = Path(sysconfig.get_path("stdlib"))
    return [
        {"repo_name": "python/cpython", "path": path.relative_to(root).as_posix(), "content": code, "size": len(code)}
        for _, path, _, code in _stdlib_modules()
    ]


def _shaped_splits(paper: str) -> tuple[str, dict[str, list], str]:
    """(``datasets`` builder, {split: rows}, what they were built from) of the shaped copy of ``paper``."""
    if paper == "wikitext-2":
        prose = _offline_corpus("stdlib-prose")
        train, n_train = wikitext_rows(prose.fit_text, WIKITEXT_SIZES["train"])
        test, n_test = wikitext_rows(prose.eval_text, WIKITEXT_SIZES["test"])
        made = f"stdlib-prose {prose.sha256[:12]} (fit text cycled {n_train}x, eval text {n_test}x)"
        return "parquet", {"train": [{"text": r} for r in train], "test": [{"text": r} for r in test]}, made
    if paper == "codeparrot":
        return "json", {"train": _codeparrot_rows()}, f"stdlib-code {_offline_corpus('stdlib-code').sha256[:12]}"
    prose = _offline_corpus("stdlib-prose")
    splits = {"train": _paragraphs(prose.fit_text), "validation": _paragraphs(prose.eval_text)}
    return "text", splits, f"stdlib-prose {prose.sha256[:12]}, a paragraph a row"


def _write_rows(builder: str, rows: list, file: Path) -> None:
    if builder == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), file)
    elif builder == "json":
        file.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        file.write_text("".join(row + "\n" for row in rows), encoding="utf-8")


def _shaped_files(paper: str) -> tuple[str, dict[str, Path], str, str]:
    """(builder, {split: local file}, cache key, what they were built from) of the shaped copy of ``paper``,
    written on first use."""
    source = {"wikitext-2": "stdlib-prose", "codeparrot": "stdlib-code", "tinystories": "stdlib-prose"}[paper]
    key = cache_key({"shaped": paper, "from": _offline_corpus(source).sha256, "format": SHAPED_FORMAT})
    path = cache_dir() / "corpora" / f"shaped-files-{paper}-{key}"

    def build(tmp: Path) -> None:
        builder, splits, made = _shaped_splits(paper)
        for split, rows in splits.items():
            _write_rows(builder, rows, tmp / f"{split}.{builder}")
        (tmp / "made.json").write_text(json.dumps({"builder": builder, "made": made}), encoding="utf-8")

    build_entry(path, build)
    made = json.loads((path / "made.json").read_text(encoding="utf-8"))
    files = {f.stem: f for f in path.glob(f"*.{made['builder']}")}
    return made["builder"], files, key, made["made"]


def _local_rows(
    builder: str, files: Mapping[str, Path], path: str, config: str | None, split: str, streaming: bool = True
) -> Iterable[Mapping]:
    """A :data:`Loader` that reads ``files[split]`` with ``datasets``' ``builder`` instead of the hub dataset."""
    return _datasets().load_dataset(builder, data_files={split: str(files[split])}, split=split, streaming=streaming)


def _shaped_corpus(name: str) -> Corpus:
    """A shaped corpus: the paper corpus's spec and cut, on rows read from local files by ``datasets``."""
    spec = PAPER_CORPORA[SHAPED_CORPORA[name]]
    builder, files, key, made = _shaped_files(SHAPED_CORPORA[name])
    source = (
        f"local {builder} files laid out like {spec.describe()}; rows built from {made}. "
        "Shaped like the paper's corpus to exercise its sizes and code path, not for science."
    )
    loader = functools.partial(_local_rows, builder, files)
    return _sliced(name, spec, _slice_path(name, spec, {"rows": "shaped", "files": key}), loader, None, source)


def corpus_names() -> list[str]:
    """Every corpus :func:`load_corpus` knows, offline ones first."""
    return [*OFFLINE_CORPORA, *PAPER_CORPORA, *SHAPED_CORPORA]


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


def load_corpus(name: str, *, loader: Loader | None = None, revision: str | None = None) -> Corpus:
    """The corpus called ``name`` (see the module docstring for the list).

    ``loader`` replaces ``datasets.load_dataset`` for hub corpora (tests inject local rows with it;
    such rows are not cached); offline corpora are built once per process. ``revision`` pins a hub
    corpus's dataset (a branch, tag or commit); other corpora have none.
    """
    if revision is not None and name not in PAPER_CORPORA:
        raise LinrecError(
            f"corpus '{name}' is not a hub dataset and has no revision; pin one of {', '.join(PAPER_CORPORA)}"
        )
    if name in OFFLINE_CORPORA:
        return _offline_corpus(name)
    if name in PAPER_CORPORA:
        spec = PAPER_CORPORA[name]
        return _hub_corpus(name, spec if revision is None else dataclasses.replace(spec, revision=revision), loader)
    if name in SHAPED_CORPORA:
        return _shaped_corpus(name)
    raise LinrecError(f"unknown corpus '{name}'; choose one of {', '.join(corpus_names())}")
