"""Hub corpora kept as local slices, revisions resolved with timeouts, canonical checkpoints, shaped corpora."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import linrec.data.hub_corpora as hub_corpora
import linrec.data.shaped_corpora as shaped_corpora
import linrec.experiment.resolve as resolve
import linrec.hub as hub
import linrec.models.loading as loading
from linrec import LinrecError
from linrec.data.corpora import corpus_names, load_corpus
from linrec.data.hub_corpora import PAPER_CORPORA
from linrec.data.shaped_corpora import SHAPED_CORPORA, wikitext_line, wikitext_rows
from linrec.experiment.profiles import get_profile
from linrec.hub import OFFLINE_HINT, datasets_offline, resolve_revision, use_hub_timeouts
from test_hub import serve

SHA = "a" * 40
OTHER = "b" * 40
HELD = [{"text": " Held out . \n"}]
ROWS = {"train": [{"text": " = Title = \n"}, {"text": " Body line . \n"}], "test": HELD, "validation": HELD}


@pytest.fixture
def online(tmp_path, monkeypatch):
    """A temporary linrec cache and a fake hub: reachable, resolving to ``state.commit``, serving ROWS; calls logged."""
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    state = SimpleNamespace(commit=SHA, resolved=[], loaded=[])

    def fake_resolve(repo_id, revision=None, *, repo_type="model", **kwargs):
        state.resolved.append((repo_id, revision, repo_type))
        return state.commit

    def fake_loader(path, config, split, streaming=True, revision=None):
        state.loaded.append((path, split, revision))
        return ROWS[split]

    monkeypatch.setattr(hub_corpora, "hub_reachable", lambda: True)
    monkeypatch.setattr(hub_corpora, "resolve_revision", fake_resolve)
    monkeypatch.setattr(hub_corpora, "_datasets_loader", fake_loader)
    return state


def _no_hub(monkeypatch):
    """Offline as the environment says, with every way to the hub raising if it is used."""

    def boom(*args, **kwargs):
        raise AssertionError("the hub was used")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for name in ("hub_reachable", "resolve_revision", "_datasets_loader"):
        monkeypatch.setattr(hub_corpora, name, boom)


def test_a_hub_corpus_is_cut_once_and_read_back_offline(online, monkeypatch):
    first = load_corpus("wikitext-2")
    assert online.loaded == [("Salesforce/wikitext", "train", SHA), ("Salesforce/wikitext", "test", SHA)]
    assert online.resolved == [("Salesforce/wikitext", None, "dataset")]
    assert first.fit_text == " = Title = \n Body line . \n" and first.eval_text == " Held out . \n"
    assert f"commit {SHA}" in first.summary()["source"]
    again = load_corpus("wikitext-2")  # online, same commit: the slice, without cutting again
    assert len(online.loaded) == 2 and again.sha256 == first.sha256
    _no_hub(monkeypatch)
    cached = load_corpus("wikitext-2")
    assert (cached.sha256, cached.source, cached.fit_text) == (first.sha256, first.source, first.fit_text)


def test_a_new_offline_process_reads_the_slice_without_the_network(online, tmp_path):
    first = load_corpus("tinystories")
    script = (
        "import socket, sys\n"
        "def refuse(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse\n"
        "sys.modules['datasets'] = None\n"  # importing datasets would fail
        "from linrec.data.corpora import load_corpus\n"
        "print(load_corpus('tinystories').sha256)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "LINREC_CACHE": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(hub_corpora.__file__).parents[2]), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == first.sha256


def test_a_moved_dataset_is_cut_again_and_a_pinned_revision_has_its_own_slice(online, monkeypatch):
    load_corpus("tinystories")
    online.commit = OTHER
    moved = load_corpus("tinystories")
    assert [r for *_, r in online.loaded] == [SHA, SHA, OTHER, OTHER]
    assert f"commit {OTHER}" in moved.source
    spec = PAPER_CORPORA["tinystories"]
    pinned = hub_corpora.HubCorpus(**{**spec.__dict__, "revision": "v1"})
    paths = {hub_corpora.slice_path("tinystories", s, {"rows": "hub"}) for s in (spec, pinned)}
    assert len(paths) == 2
    monkeypatch.setitem(PAPER_CORPORA, "tinystories", pinned)
    load_corpus("tinystories")
    assert online.resolved[-1] == ("roneneldan/TinyStories", "v1", "dataset")
    assert len(online.loaded) == 6  # a slice of its own, though the commit is the same


def test_a_profile_pins_a_hub_corpus_and_only_a_hub_corpus(online):
    from linrec.experiment.profiles import get_profile
    from linrec.experiment.resolve import profile_corpus

    profile = get_profile("paper", revisions={"tinystories": "v2", "openai-community/gpt2": "607a30d"})
    assert f"commit {SHA}" in profile_corpus(profile, "tinystories").source
    assert online.resolved[-1] == ("roneneldan/TinyStories", "v2", "dataset")
    with pytest.raises(LinrecError, match="not one of its models or hub corpora"):
        get_profile("offline", revisions={"stdlib-prose": "v1"})
    with pytest.raises(LinrecError, match="'stdlib-prose' is not a hub dataset and has no revision"):
        load_corpus("stdlib-prose", revision="v1")


def test_without_a_slice_offline_or_unreachable_is_an_error_and_unreachable_uses_a_slice(online, monkeypatch):
    monkeypatch.setattr(hub_corpora, "hub_reachable", lambda: False)
    with pytest.raises(LinrecError, match="cannot be reached") as err:
        load_corpus("codeparrot")
    assert OFFLINE_HINT in str(err.value) and not online.loaded
    monkeypatch.setattr(hub_corpora, "hub_reachable", lambda: True)
    rows = [{"content": f"file{i}"} for i in range(30)]
    monkeypatch.setattr(hub_corpora, "_datasets_loader", lambda *a, **k: rows)
    cut = load_corpus("codeparrot")
    monkeypatch.setattr(hub_corpora, "hub_reachable", lambda: False)
    with pytest.warns(UserWarning, match="cannot be reached"):
        assert load_corpus("codeparrot").sha256 == cut.sha256
    _no_hub(monkeypatch)
    with pytest.raises(LinrecError, match="HF_DATASETS_OFFLINE"):
        load_corpus("tinystories")


def test_a_slice_changed_in_place_is_reported_and_cut_again(online):
    first = load_corpus("wikitext-2")
    [entry] = Path(os.environ["LINREC_CACHE"]).glob("corpora/wikitext-2-*/corpus.json")
    stored = json.loads(entry.read_text())
    stored["corpus"]["eval_text"] = stored["corpus"]["eval_text"].upper()  # same size: the checksum tells
    entry.write_text(json.dumps(stored))
    with pytest.warns(UserWarning, match=f"damaged cache entry {entry.parent}"):
        again = load_corpus("wikitext-2")
    assert again.eval_text == first.eval_text and again.sha256 == first.sha256


# ---------------------------------------------------------------------------------------------
# Revisions and timeouts.


class FakeApi:
    """Stands in for huggingface_hub.HfApi: answers with ``sha``, or raises ``error``; records its calls."""

    calls: list = []
    sha: str | None = SHA
    error: Exception | None = None

    def __init__(self, endpoint=None):
        self.endpoint = endpoint

    def _info(self, kind, repo_id, revision=None, timeout=None):
        FakeApi.calls.append((kind, repo_id, revision, timeout, self.endpoint))
        if FakeApi.error is not None:
            raise FakeApi.error
        return SimpleNamespace(sha=FakeApi.sha)

    def model_info(self, repo_id, revision=None, timeout=None):
        return self._info("model", repo_id, revision, timeout)

    def dataset_info(self, repo_id, revision=None, timeout=None):
        return self._info("dataset", repo_id, revision, timeout)


@pytest.fixture
def fake_api(monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(FakeApi, "calls", [])
    monkeypatch.setattr(FakeApi, "error", None)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.test")
    return FakeApi


def test_resolve_revision_asks_with_a_timeout_records_the_ref_and_finds_it_offline(fake_api, tmp_path, monkeypatch):
    assert resolve_revision("org/model", OTHER, cache_dir=tmp_path) == OTHER  # a commit: no request
    assert fake_api.calls == []
    assert resolve_revision("org/model", cache_dir=tmp_path, timeout=2.5) == SHA
    assert resolve_revision("org/data", "v1", repo_type="dataset", cache_dir=tmp_path) == SHA
    assert fake_api.calls == [
        ("model", "org/model", None, 2.5, "http://hub.test"),
        ("dataset", "org/data", "v1", hub.HUB_TIMEOUT, "http://hub.test"),
    ]
    assert (tmp_path / "models--org--model" / "refs" / "main").read_text() == SHA
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_revision("org/model", cache_dir=tmp_path) == SHA
    assert resolve_revision("org/model", "step1", cache_dir=tmp_path) is None
    assert resolve_revision("org/data", "v1", repo_type="dataset", cache_dir=tmp_path) == SHA
    assert len(fake_api.calls) == 2
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")  # datasets' own switch wins for datasets
    resolve_revision("org/data", "v2", repo_type="dataset", cache_dir=tmp_path)
    assert fake_api.calls[-1][:3] == ("dataset", "org/data", "v2")
    with pytest.raises(LinrecError, match="repo_type"):
        resolve_revision("org/model", repo_type="space")


def test_a_failing_hub_falls_back_on_the_recorded_commit_else_names_the_offline_profile(fake_api, tmp_path):
    resolve_revision("org/model", cache_dir=tmp_path)
    fake_api.error = TimeoutError("read timed out")
    with pytest.warns(UserWarning, match="using the cached commit"):
        assert resolve_revision("org/model", cache_dir=tmp_path) == SHA
    with pytest.raises(LinrecError, match="TimeoutError: read timed out") as err:
        resolve_revision("org/model", "step1", cache_dir=tmp_path)
    assert OFFLINE_HINT in str(err.value)
    assert resolve_revision("org/model", "step1", cache_dir=tmp_path, local_files_only=True) is None


@pytest.mark.slow
def test_a_silent_endpoint_fails_within_seconds(monkeypatch, tmp_path):
    port, requests = serve(None)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    start = time.monotonic()
    with pytest.raises(LinrecError) as err:
        resolve_revision("org/model", timeout=1.0, cache_dir=tmp_path)
    assert OFFLINE_HINT in str(err.value) and requests  # it was asked, and gave up
    with pytest.raises(LinrecError) as err:
        load_corpus("wikitext-2")
    assert OFFLINE_HINT in str(err.value)
    assert time.monotonic() - start < 10


def test_hub_timeouts_get_defaults_but_never_replace_the_users(monkeypatch):
    from huggingface_hub import constants

    for name in hub.HUB_TIMEOUT_DEFAULTS:
        monkeypatch.setattr(constants, name, getattr(constants, name))
        monkeypatch.setenv(name, "0")  # so that monkeypatch restores the variable, set or not
    monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 60)
    use_hub_timeouts()
    assert os.environ["HF_HUB_ETAG_TIMEOUT"] == "5" and constants.HF_HUB_ETAG_TIMEOUT == 5
    assert os.environ["HF_HUB_DOWNLOAD_TIMEOUT"] == "60" and constants.HF_HUB_DOWNLOAD_TIMEOUT == 60


def test_datasets_offline_follows_its_own_variable_else_the_hubs(monkeypatch):
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert datasets_offline()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert not datasets_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "true")
    assert datasets_offline()


def test_load_model_loads_the_resolved_commit(monkeypatch):
    from transformers import AutoConfig

    seen = {}

    def config(source, **kwargs):
        seen.update(kwargs, source=source)
        raise OSError("stop here")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_reachable", lambda: True)
    monkeypatch.setattr(loading, "resolve_revision", lambda repo, rev, local_files_only: f"{repo}@{rev}")
    monkeypatch.setattr(AutoConfig, "from_pretrained", config)
    with pytest.raises(LinrecError, match="stop here"):
        loading.load_model("org/model", revision="step1", device="cpu")
    assert seen["source"] == "org/model" and seen["revision"] == "org/model@step1"
    assert seen["local_files_only"] is False
    monkeypatch.setattr(loading, "resolve_revision", lambda repo, rev, local_files_only: None)  # unknown offline
    with pytest.raises(LinrecError):
        loading.load_model("org/model", revision="step1", device="cpu")
    assert seen["revision"] == "step1"


# ---------------------------------------------------------------------------------------------
# Canonical checkpoints and the revision a profile's model loads at.


def test_pythias_last_step_is_final_and_init_is_its_first_checkpoint():
    paper = get_profile("paper")
    pythia = "EleutherAI/pythia-160m"
    canon = {c: paper.canonical_checkpoint(pythia, c) for c in ("final", "step143000", "init", "step0", "step1000")}
    assert canon == {"final": "final", "step143000": "final", "init": "step0", "step0": "step0", "step1000": "step1000"}
    assert paper.canonical_checkpoint("openai-community/gpt2", "final") == "final"
    pinned = get_profile(paper, revisions={pythia: "step1000"})
    assert pinned.canonical_checkpoint(pythia, "step1000") == "final"
    assert pinned.canonical_checkpoint(pythia, "step143000") == "step143000"
    with pytest.raises(LinrecError, match="no checkpoint 'step999'"):
        paper.canonical_checkpoint(pythia, "step999")
    smoke = get_profile("smoke")
    for checkpoint in ("init", "final", "step4"):
        assert smoke.canonical_checkpoint(smoke.models[0], checkpoint) == checkpoint


def test_model_revision_resolves_the_checkpoints_revision(monkeypatch, tmp_path):
    from huggingface_hub import constants

    asked = []
    monkeypatch.setattr(resolve, "hub_reachable", lambda: True)
    monkeypatch.setattr(
        resolve, "resolve_revision", lambda repo, rev, local_files_only: asked.append((repo, rev, local_files_only))
    )
    resolve.model_revision(get_profile("paper"), "EleutherAI/pythia-160m", "init")
    resolve.model_revision(get_profile("paper"), "openai-community/gpt2")
    assert asked == [("EleutherAI/pythia-160m", "step0", False), ("openai-community/gpt2", None, False)]
    smoke = get_profile("smoke")
    assert resolve.model_revision(smoke, smoke.models[0], "final") is None
    monkeypatch.undo()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    ref = tmp_path / "models--EleutherAI--pythia-160m" / "refs" / "step1000"
    ref.parent.mkdir(parents=True)
    ref.write_text(SHA)
    assert resolve.model_revision(get_profile("paper"), "EleutherAI/pythia-160m", "step1000") == SHA
    assert resolve.model_revision(get_profile("paper"), "EleutherAI/pythia-160m", "step2000") is None


# ---------------------------------------------------------------------------------------------
# Shaped corpora.


def test_wikitext_tokenisation_is_planted_exactly():
    line = wikitext_line("The well-known 1,000 items cost 3.5 dollars (each); it's fine.")
    assert line == " The well @-@ known 1 @,@ 000 items cost 3 @.@ 5 dollars ( each ) ; it 's fine . \n"
    filler = " More words follow here." * 20  # paragraphs of WikiText's row length stay whole
    text = "\n\n".join(f"Paragraph {i} says a thing-or-two.{filler}" for i in range(20))
    rows, cycles = wikitext_rows(text, 20_000)
    once = rows[: len(rows) // cycles]
    assert rows == once * cycles and cycles == -(-20_000 // sum(map(len, once)))
    assert once[:3] == ["", " = Paragraph 0 says = \n", ""]
    assert once[3].startswith(" Paragraph 0 says a thing @-@ or @-@ two . More words")
    assert once[4].startswith(" Paragraph 1 says")  # rows of one section follow each other, as in WikiText
    assert " = = Paragraph 4 says = = \n" in once and " = Paragraph 16 says = \n" in once
    assert len(once) == 20 + 3 * 5 and all(r == "" or (r.startswith(" ") and r.endswith(" \n")) for r in rows)
    short, _ = wikitext_rows("One.\n\nTwo.\n \nThree.", 1)  # short paragraphs merge into one row
    assert short == ["", " = One . Two . Three . = \n", "", " One . Two . Three . \n"]


@pytest.fixture(scope="module")
def shaped_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LINREC_CACHE", str(tmp_path_factory.mktemp("shaped")))
        mp.setenv("HF_HUB_OFFLINE", "1")  # local files need no hub
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        yield Path(os.environ["LINREC_CACHE"])


@pytest.mark.slow
def test_shaped_corpora_have_the_paper_layouts_and_come_through_datasets(shaped_cache, monkeypatch):
    read = []
    real = shaped_corpora._local_rows

    def spy(builder, files, *args, **kwargs):
        rows = real(builder, files, *args, **kwargs)
        read.append((builder, type(rows).__name__))
        return rows

    monkeypatch.setattr(shaped_corpora, "_local_rows", spy)
    shaped = {name: load_corpus(name) for name in SHAPED_CORPORA}
    assert set(SHAPED_CORPORA) <= set(corpus_names())
    assert {b for b, _ in read} == {"parquet", "json", "text"} and {t for _, t in read} == {"IterableDataset"}
    wiki = shaped["shaped-wikitext-2"]
    assert len(wiki.eval_text) >= 600_000 and len(wiki.fit_text) >= 10_000_000
    assert " @-@ " in wiki.fit_text and "\n = = " in wiki.fit_text and wiki.fit_text.startswith(" = ")
    assert "not for science" in wiki.source and "cycled" in wiki.source
    code = shaped["shaped-codeparrot"]
    assert code.domain == "code" and len(code.fit_text) >= 4_000_000 and "def " in code.eval_text
    first = json.loads((next(shaped_cache.glob("corpora/shaped-files-codeparrot-*")) / "train.json").open().readline())
    assert set(first) == {"repo_name", "path", "content", "size"} and first["size"] == len(first["content"])
    story = shaped["shaped-tinystories"]
    assert all("\n" not in row for row in story.eval_text.split("\n\n"))
    monkeypatch.setattr(shaped_corpora, "_local_rows", lambda *a, **k: pytest.fail("rows read again"))  # slices now
    assert {n: load_corpus(n).sha256 for n in SHAPED_CORPORA} == {n: c.sha256 for n, c in shaped.items()}


def test_wikitext_rows_on_disk_are_lines_blank_rows_and_headings(shaped_cache):
    import pyarrow.parquet as pq

    load_corpus("shaped-wikitext-2")
    [folder] = shaped_cache.glob("corpora/shaped-files-wikitext-2-*")
    assert sorted(p.name for p in folder.glob("*.parquet")) == ["test.parquet", "train.parquet"]
    rows = pq.read_table(folder / "train.parquet").column("text").to_pylist()
    assert 36_000 <= len(rows) <= 120_000
    assert rows[:3] == ["", rows[1], ""] and rows[1].startswith(" = ") and rows[1].endswith(" = \n")
    assert all(r == "" or r.endswith(" \n") for r in rows)
    assert sum(map(len, pq.read_table(folder / "test.parquet").column("text").to_pylist())) >= 1_000_000
