"""Shaped corpora: local files laid out like the paper's hub datasets, to exercise shapes, not science.

Shaped corpora (``shaped-*``) exist to exercise the paper's shapes, not for science: each takes
the spec of its paper corpus (same splits, field, joiner and caps) through the same code path and
cache, but its rows come from local parquet / JSON-lines / text files laid out like the hub
dataset's, written here from the offline corpora and read back by ``datasets.load_dataset``.
WikiText's rows are lines with WikiText-raw's tokenisation (``" @-@ "`` and the like), headings
and blank rows, its text cycled to the real splits' sizes (:data:`WIKITEXT_SIZES`).
"""

from __future__ import annotations

import functools
import json
import re
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path

from linrec.cache import build_entry, cache_dir, cache_key
from linrec.data.corpus import Corpus
from linrec.data.hub_corpora import PAPER_CORPORA, import_datasets, load_slice, slice_path
from linrec.data.offline_corpora import offline_corpus, stdlib_modules
from linrec.errors import LinrecError

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
        for _, path, _, code in stdlib_modules()
    ]


def _shaped_splits(paper: str) -> tuple[str, dict[str, list], str]:
    """(``datasets`` builder, {split: rows}, what they were built from) of the shaped copy of ``paper``."""
    if paper == "wikitext-2":
        prose = offline_corpus("stdlib-prose")
        train, n_train = wikitext_rows(prose.fit_text, WIKITEXT_SIZES["train"])
        test, n_test = wikitext_rows(prose.eval_text, WIKITEXT_SIZES["test"])
        made = f"stdlib-prose {prose.sha256[:12]} (fit text cycled {n_train}x, eval text {n_test}x)"
        return "parquet", {"train": [{"text": r} for r in train], "test": [{"text": r} for r in test]}, made
    if paper == "codeparrot":
        return "json", {"train": _codeparrot_rows()}, f"stdlib-code {offline_corpus('stdlib-code').sha256[:12]}"
    prose = offline_corpus("stdlib-prose")
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
    key = cache_key({"shaped": paper, "from": offline_corpus(source).sha256, "format": SHAPED_FORMAT})
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
    """A :data:`~linrec.data.hub_corpora.Loader` that reads ``files[split]`` with ``datasets``' ``builder``
    instead of the hub dataset."""
    return import_datasets().load_dataset(
        builder, data_files={split: str(files[split])}, split=split, streaming=streaming
    )


def shaped_corpus(name: str) -> Corpus:
    """A shaped corpus: the paper corpus's spec and cut, on rows read from local files by ``datasets``."""
    spec = PAPER_CORPORA[SHAPED_CORPORA[name]]
    builder, files, key, made = _shaped_files(SHAPED_CORPORA[name])
    source = (
        f"local {builder} files laid out like {spec.describe()}; rows built from {made}. "
        "Shaped like the paper's corpus to exercise its sizes and code path, not for science."
    )
    loader = functools.partial(_local_rows, builder, files)
    return load_slice(name, spec, slice_path(name, spec, {"rows": "shaped", "files": key}), loader, None, source)
