"""linrec.models.zoo.build: Building a zoo: its cache layout, the tokenizer and tokenised data, and the training
workers."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from linrec import ffn_blocks
from linrec.cache import cache_dir
from linrec.data.bpe import EOS
from linrec.models.zoo import (
    OFFLINE_MIX,
    ZOOS,
    ZooData,
    build_zoo,
    eval_loss,
    prepare_zoo,
    zoo_model_path,
)


def _children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in "ZX":
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


_INTERRUPT_ZOO = """
import dataclasses, signal, sys
from linrec.cli import main

# Ctrl-C as in a terminal, even when the tests run as a background job (which starts them with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
from linrec.models.zoo import ZOOS

smoke = ZOOS["smoke"]
a, b, c, d = (dataclasses.replace(e, steps=n, warmup_steps=2, checkpoints=(0, n))
              for e, n in zip(smoke.entries, (8, 200, 200, 8)))
ZOOS["interrupt"] = dataclasses.replace(smoke, name="interrupt", entries=(a, b, c, d))
sys.exit(main(["zoo", "--profile", "interrupt", "--workers", "2"]))
"""


@pytest.mark.slow
def test_subprocess_workers_train_the_same_models(built):
    spec, table = built
    names = ["zoo-gpt2", "zoo-llama"]
    again = build_zoo(spec, models=names, force=True, workers=2, progress=False)
    first = table.set_index("model").loc[names]
    loss_cols = [c for c in table.columns if c.startswith("loss:")]
    assert np.allclose(again.set_index("model")[loss_cols].to_numpy(), first[loss_cols].to_numpy(), rtol=0, atol=1e-6)


def test_checkpoints_load_with_auto_classes_and_reproduce_their_losses(built):
    spec, table = built
    for entry in spec.entries[:3]:
        record = json.loads((zoo_model_path(spec, entry.name).parent / "zoo.json").read_text())
        assert [c["checkpoint"] for c in record["checkpoints"]] == entry.checkpoint_names()
        weights = []
        for ckpt in entry.checkpoint_names():
            path = zoo_model_path(spec, entry.name, ckpt)
            model = AutoModelForCausalLM.from_pretrained(str(path))
            assert AutoTokenizer.from_pretrained(str(path)).eos_token == EOS
            assert model.config.model_type == entry.family
            assert len(ffn_blocks(model)) == entry.depth
            weights.append(model.get_input_embeddings().weight.detach().clone())
        assert not torch.equal(weights[0], weights[-1])
        data = ZooData(prepare_zoo(spec, progress=False).data, spec.train_mix, spec.eval_corpora)
        windows = data.windows("stdlib-prose", entry.seq_len, spec.eval_tokens)
        ours = eval_loss(model, windows)
        assert ours == pytest.approx(record["checkpoints"][-1]["eval_loss"]["stdlib-prose"], abs=1e-5)
        with torch.no_grad():  # transformers' own loss, averaged over the same positions
            assert ours == pytest.approx(float(model(input_ids=windows, labels=windows).loss), abs=1e-4)
    assert list(table["model"]) == spec.names()
    assert (table["params"] > 0).all() and (table["tokens_seen"] == spec.entries[0].tokens_seen).all()


def test_cache_is_reused_and_an_interrupted_build_leaves_nothing(built, monkeypatch):
    spec, table = built

    def no_training(*args, **kwargs):
        raise AssertionError("a cached model was retrained")

    monkeypatch.setattr("linrec.models.zoo.build.train_entry", no_training)
    timings = ["train_seconds", "cpu_seconds"]  # the rest is deterministic
    assert build_zoo(spec, workers=1, progress=False).drop(columns=timings).equals(table.drop(columns=timings))
    monkeypatch.undo()
    broken = dataclasses.replace(spec, entries=(dataclasses.replace(spec.entries[0], name="zoo-broken", seed=7),))
    calls = []

    def failing_eval(model, windows, batch_size=32):
        calls.append(1)
        if len(calls) > 3:
            raise KeyboardInterrupt
        return 1.0

    monkeypatch.setattr("linrec.models.zoo.train.eval_loss", failing_eval)
    with pytest.raises(KeyboardInterrupt):
        build_zoo(broken, workers=1, progress=False)
    assert not zoo_model_path(broken, "zoo-broken").parent.exists()
    assert not list((cache_dir() / "zoo").glob(".tmp-*"))


@pytest.mark.slow
def test_a_truncated_zoo_data_file_is_named_and_rebuilt(built):
    """The tokenised texts are a cache entry too: a damaged file is reported with its entry's path and rebuilt."""
    spec, table = built
    data = prepare_zoo(spec, progress=False).data
    good = data.read_bytes()
    with data.open("r+b") as f:
        f.truncate(len(good) // 2)
    entry = cache_dir() / "data" / data.parent.name.split("-", 2)[2]
    with pytest.warns(UserWarning, match=f"damaged cache entry {entry} "):
        again = prepare_zoo(spec, progress=False).data
    assert again != data and again.read_bytes() == good
    timings = ["train_seconds", "cpu_seconds"]
    assert build_zoo(spec, workers=1, progress=False).drop(columns=timings).equals(table.drop(columns=timings))


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "here"))
    assert cache_dir() == tmp_path / "here"
    monkeypatch.delenv("LINREC_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "linrec"


def test_cache_keys_change_only_on_purpose():
    """Every key input is pinned: a refactor that changed one would silently orphan every trained model.
    These keys are those of ZOO_FORMAT 2 and the current configurations; change them only with those."""
    from types import SimpleNamespace

    from linrec.models.zoo.build import _layout

    assert OFFLINE_MIX == (("stdlib-prose", 0.45), ("stdlib-code", 0.45), ("unicode-records", 0.1))
    known = {  # from these corpus hashes
        "offline": (
            "46df1657e1fccddc",
            ["6a743688af36fd9b", "ef15a40c1fc701ee", "c81b0b7e9431ab52", "29f140c926072d3d"],
        ),
        "smoke": ("de767603333fadc0", ["5b0b477727ef865e", "e702844b756daac4", "e0d1c90db6d963ed", "71acf1c947bf024e"]),
    }
    for name, (tokenizer_key, model_keys) in known.items():
        spec = ZOOS[name]
        corpora = {c: SimpleNamespace(sha256=f"{i:064x}") for i, c in enumerate(spec.train_corpora)}
        layout = _layout(spec, corpora)
        assert layout.tokenizer.name == tokenizer_key
        assert [p.name for p in layout.models.values()] == [f"{e.name}-{k}" for e, k in zip(spec.entries, model_keys)]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads worker processes from /proc")
def test_an_interrupt_stops_all_zoo_work_and_a_rerun_resumes(built, tmp_path):
    """`linrec zoo` on a smoke-sized zoo (a short model A, long B and C, short D; two workers), in a subprocess:
    Ctrl-C to its process group, then SIGTERM to it alone, each while a worker trains, then a rerun."""
    cache = tmp_path / "cache"  # fresh but for the corpora, tokenizer and tokenised data of the smoke zoo
    for part in ("corpora", "tokenizers", "data"):
        shutil.copytree(cache_dir() / part, cache / part)
    models = cache / "zoo"
    env = {**os.environ, "LINREC_CACHE": str(cache)}
    entry_dirs = lambda: {p.name.rsplit("-", 1)[0]: p for p in models.glob("zoo-*")}  # noqa: E731

    def interrupted(ready, send) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(
            [sys.executable, "-c", _INTERRUPT_ZOO],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 240
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, "the zoo build ended before it was interrupted"
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert workers and list(models.glob(".tmp-*"))
        sent = time.monotonic()
        send(proc)
        out, err = proc.communicate(timeout=60)
        assert time.monotonic() - sent < 15, "the build did not stop promptly"
        assert proc.returncode == 130, err.decode()
        assert "interrupted" in err.decode().strip().splitlines()[-1]
        assert not any(_running(pid) for pid in workers)
        assert not list(models.glob(".tmp-*"))
        return proc

    # A finished, B training, C training or queued, D queued: Ctrl-C in a terminal signals the whole group.
    interrupted(
        lambda: "zoo-gpt2" in entry_dirs() and list(models.glob(".tmp-*")), lambda p: os.killpg(p.pid, signal.SIGINT)
    )
    assert list(entry_dirs()) == ["zoo-gpt2"]  # the queued D never started
    first = (entry_dirs()["zoo-gpt2"] / "zoo.json").stat()

    # Again, now B and C train and D waits; SIGTERM to the command alone: it ends its workers itself.
    interrupted(lambda: list(models.glob(".tmp-*")), lambda p: p.send_signal(signal.SIGTERM))
    assert list(entry_dirs()) == ["zoo-gpt2"]

    done = subprocess.run([sys.executable, "-c", _INTERRUPT_ZOO], env=env, capture_output=True, timeout=400)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert sorted(entry_dirs()) == ["zoo-gpt2", "zoo-gpt2-seed1", "zoo-llama", "zoo-neox"]
    assert (entry_dirs()["zoo-gpt2"] / "zoo.json").stat().st_mtime_ns == first.st_mtime_ns  # kept, not retrained
    assert not list(models.glob(".tmp-*"))


def test_parallel_training_shows_one_bar_with_each_models_share():
    from types import SimpleNamespace

    from linrec.models.zoo.build import _Progress

    jobs = [SimpleNamespace(entry=SimpleNamespace(name=n, steps=s)) for n, s in (("a", 10), ("b", 4))]
    shown = _Progress(jobs, enabled=True)  # type: ignore[arg-type]
    a, b = shown.reporter("a"), shown.reporter("b")
    threads = [threading.Thread(target=lambda r=r: [r(1) for _ in range(4)]) for r in (a, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shown.bar.n == 12 and shown.bar.total == 14
    assert shown.bar.postfix == "a 80%"  # b is done (4 of 4): only models still training are listed
