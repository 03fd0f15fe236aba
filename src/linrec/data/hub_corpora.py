"""Paper corpora: public datasets on the Hugging Face hub, cut once and kept as local slices.

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
"""

from __future__ import annotations

import dataclasses
import json
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from linrec.cache import build_entry, cache_dir, cache_key, entry_complete
from linrec.data.corpus import Corpus
from linrec.errors import LinrecError
from linrec.hub import OFFLINE_HINT, datasets_offline, hub_reachable, resolve_revision, use_hub_timeouts

Loader = Callable[..., Iterable[Mapping[str, object]]]
"""``loader(path, config, split=..., streaming=True)`` -> rows (dicts); ``datasets.load_dataset`` by default.
A ``revision=`` keyword is added when the dataset's revision is known."""


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

PRUNING_WIKITEXT2 = HubCorpus(
    "prose",
    "Salesforce/wikitext",
    "wikitext-2-raw-v1",
    "train",
    "test",
    joiner="\n\n",
    max_fit_chars=1,
    max_eval_chars=20_000_000,
)
"""WikiText-2's raw test split as the layer-pruning papers read it (GPTQ's ``eval_utils``, which SLEB and BlockPruner
reuse): every row, joined with blank lines (``"\\n\\n".join(test["text"])``); only its eval text is read, so its fit
text is the train split's first row."""


def pruning_wikitext2(loader: Loader | None = None) -> tuple[str, str]:
    """(text, where it came from) of :data:`PRUNING_WIKITEXT2`: its cached slice, cut from the hub the first time
    as :func:`hub_corpus` cuts a paper corpus (``loader`` injects rows, uncached)."""
    corpus = hub_corpus("wikitext-2-pruning", PRUNING_WIKITEXT2, loader)
    return corpus.eval_text, corpus.source


SLICE_FORMAT = 1
"""Bumped whenever the code changes how a hub corpus is cut from its rows (it keys the cached slices)."""


def import_datasets() -> types.ModuleType:
    """The ``datasets`` package, which hub and shaped corpora read their rows with."""
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
    return import_datasets().load_dataset(path, config, split=split, streaming=streaming, revision=revision)


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


def slice_path(name: str, spec: HubCorpus, origin: Mapping[str, object]) -> Path:
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


def load_slice(
    name: str, spec: HubCorpus, path: Path, loader: Loader, commit: str | None, source: str, refresh: bool = False
) -> Corpus:
    """The slice at ``path``, cut from ``loader``'s rows at ``commit`` first if it is not cached (or ``refresh``)."""

    def build(tmp: Path) -> None:
        corpus = Corpus(name, spec.domain, *_cut(name, spec, loader, commit), source)
        fields = {f: getattr(corpus, f) for f in ("name", "domain", "fit_text", "eval_text", "source")}
        stored = {"corpus": fields, "sha256": corpus.sha256, "commit": commit}
        (tmp / "corpus.json").write_text(json.dumps(stored), encoding="utf-8")

    build_entry(path, build, refresh=refresh)
    found = _read_slice(path)
    assert found is not None  # build_entry returns once the entry is complete
    return found[0]


def hub_corpus(name: str, spec: HubCorpus, loader: Loader | None) -> Corpus:
    """A paper corpus: its cached slice, cut from the hub first when there is none or the dataset has moved.

    Online, the revision is resolved to a commit and a slice cut at another commit is cut again.
    Offline (``HF_DATASETS_OFFLINE`` / ``HF_HUB_OFFLINE``), or with the hub unreachable, the cached
    slice is used as it is, without a request. Rows from an injected ``loader`` are cut every time
    and not cached: the cache key could not name them.
    """
    if loader is not None:
        return Corpus(name, spec.domain, *_cut(name, spec, loader, spec.revision), spec.describe())
    path = slice_path(name, spec, {"rows": "hub"})
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
    return load_slice(name, spec, path, _datasets_loader, commit, source, refresh=cached is not None)
