"""linrec.data.hub_corpora: Paper corpora: public datasets on the Hugging Face hub, cut once and kept as local
slices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import linrec.data.hub_corpora as hub_corpora
import linrec.experiment.resolve as resolve
import linrec.models.loading as loading
from linrec import LinrecError
from linrec.data.corpora import load_corpus
from linrec.data.hub_corpora import PAPER_CORPORA
from linrec.experiment.profiles import get_profile
from linrec.hub import OFFLINE_HINT
from support.hub_corpora import OTHER, SHA

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


def test_load_model_loads_the_resolved_commit(monkeypatch):
    from transformers import AutoConfig

    seen = {}

    def config(source, **kwargs):
        seen.update(kwargs, source=source)
        raise OSError("stop here")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_reachable", lambda: True)
    monkeypatch.setattr(loading, "resolve_revision", lambda repo, rev, local_files_only, hint: f"{repo}@{rev}")
    monkeypatch.setattr(AutoConfig, "from_pretrained", config)
    with pytest.raises(LinrecError, match="stop here"):
        loading.load_pretrained("org/model", revision="step1", device="cpu")
    assert seen["source"] == "org/model" and seen["revision"] == "org/model@step1"
    assert seen["local_files_only"] is False
    monkeypatch.setattr(loading, "resolve_revision", lambda repo, rev, local_files_only, hint: None)  # unknown offline
    with pytest.raises(LinrecError):
        loading.load_pretrained("org/model", revision="step1", device="cpu")
    assert seen["revision"] == "step1"


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


def test_the_pruning_papers_wikitext_joins_the_test_rows_with_blank_lines_and_is_read_back_offline(online, monkeypatch):
    test_rows = [" = T = \n", "", " Body . \n"]
    rows = {"train": [{"text": " = Train = \n"}, {"text": " More . \n"}], "test": [{"text": t} for t in test_rows]}
    monkeypatch.setattr(hub_corpora, "_datasets_loader", lambda path, config, split, **kw: rows[split])
    text, source = hub_corpora.pruning_wikitext2()
    assert text == "\n\n".join(test_rows)  # what GPTQ's and SLEB's eval_utils build from the test split
    assert "wikitext-2-raw-v1" in source and f"commit {SHA}" in source
    _no_hub(monkeypatch)
    assert hub_corpora.pruning_wikitext2() == (text, source)
