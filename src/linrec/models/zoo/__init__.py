"""The offline model zoo: small causal LMs of the paper's three families, trained here from scratch.

One model per family the paper measures, all of the same width, depth and FFN width, so that
GPT-2 against GPT-NeoX mirrors the paper's "same width, same activation" comparison:

=============  ======================================  ==================================
family         block                                   as in
=============  ======================================  ==================================
``gpt2``       LayerNorm, GELU (tanh), sequential      GPT-2 (tied embeddings)
``gpt_neox``   LayerNorm, GELU, parallel residual      Pythia (rotary on 25% of dims)
``llama``      RMSNorm, gated SiLU (SwiGLU)            llama-160m (FFN width 4x, untied)
=============  ======================================  ==================================

plus a second seed of GPT-2, to tell what training learns from what a seed decides. The seed
sets both the initialisation and the order of training batches; families with the same seed see
exactly the same batches.

Training data is a weighted mix of the offline corpora's fit texts (their eval texts stay held
out): 45% prose, 45% code and 10% records, so that all three domains of the robustness chapter are
in distribution, as the paper's domains are for its models. It is tokenised with a byte-level BPE
trained on the same texts (:mod:`linrec.data.bpe`). Each model
is trained by AdamW with linear warm-up and cosine decay, without dropout, and saved with
``save_pretrained`` (safetensors, with its tokenizer) at init, at several intermediate steps and
at the end, so ``AutoModelForCausalLM.from_pretrained(path)`` and ``linrec.load_model(path)``
load any checkpoint.

Determinism and speed. A model is trained by one process on one thread with deterministic
algorithms, so its weights depend on its config and data only, not on the machine's core count;
two models train at a time (``workers``), which uses two cores better than one model on two
threads, since matrices this small parallelise poorly within an operation.

Cache. Everything is cached under :func:`cache_dir` (``$LINREC_CACHE``, else
``$XDG_CACHE_HOME/linrec``, else ``~/.cache/linrec``): ``tokenizers/<key>``, ``data/<key>`` (the
tokenised texts) and ``zoo/<model>-<key>``, each key a hash of everything that decides the
content (entry config, corpus hashes, tokenizer settings, :data:`ZOO_FORMAT`). Results are
written to a temporary directory and renamed into place when complete, so an interrupted build is
never taken for a finished one. ``<model dir>/zoo.json`` records the training statistics.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from linrec.data.bpe import train_bpe
from linrec.cache import atomic_dir, cache_dir, cache_key
from linrec.data.corpora import Corpus, load_corpus
from linrec.errors import LinrecError
from linrec.data.tokens import tokenize

ZOO_FORMAT = 1
"""Bumped whenever the code changes what a given configuration trains to (it is part of every key)."""

FAMILIES = ("gpt2", "gpt_neox", "llama")


@dataclass(frozen=True)
class ZooEntry:
    """One model of the zoo: architecture, seed and training schedule."""

    name: str
    family: str
    width: int
    depth: int
    heads: int
    ffn: int
    seed: int
    steps: int
    batch_size: int
    seq_len: int
    lr: float
    warmup_steps: int
    checkpoints: tuple[int, ...]  # optimiser steps at which weights are saved, 0 (init) and steps included
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise LinrecError(f"zoo entry '{self.name}': unknown family '{self.family}'; choose one of {', '.join(FAMILIES)}")
        for attr in ("width", "depth", "heads", "ffn", "steps", "batch_size", "seq_len"):
            if getattr(self, attr) < 1:
                raise LinrecError(f"zoo entry '{self.name}': {attr} must be positive; got {getattr(self, attr)}")
        if self.width % self.heads:
            raise LinrecError(f"zoo entry '{self.name}': width {self.width} is not divisible by heads {self.heads}")
        if self.checkpoints[0] != 0 or self.checkpoints[-1] != self.steps or list(self.checkpoints) != sorted(set(self.checkpoints)):
            raise LinrecError(f"zoo entry '{self.name}': checkpoints must rise strictly from 0 to steps={self.steps}; got {self.checkpoints}")

    @property
    def tokens_seen(self) -> int:
        return self.steps * self.batch_size * self.seq_len

    def checkpoint_names(self) -> list[str]:
        return [f"step{s}" for s in self.checkpoints]


@dataclass(frozen=True)
class ZooSpec:
    """A zoo: shared tokenizer and data settings, and its entries."""

    name: str
    vocab_size: int
    train_mix: tuple[tuple[str, float], ...]  # (offline corpus, share of training sequences)
    eval_corpora: tuple[str, ...]
    eval_tokens: int  # held-out tokens per corpus scored at each checkpoint
    max_chars: int | None  # fit-text characters per corpus used for the tokenizer and training (None: all)
    entries: tuple[ZooEntry, ...] = field(default=())

    def entry(self, name: str | ZooEntry) -> ZooEntry:
        if isinstance(name, ZooEntry):
            return name
        for e in self.entries:
            if e.name == name:
                return e
        raise LinrecError(f"the '{self.name}' zoo has no model '{name}'; choose one of {', '.join(self.names())}")

    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    @property
    def train_corpora(self) -> list[str]:
        return [c for c, _ in self.train_mix]


def _family_entries(width: int, depth: int, heads: int, steps: int, batch_size: int, seq_len: int, lr: float,
                    checkpoint_fractions: tuple[float, ...], second_seed: str = "gpt2") -> tuple[ZooEntry, ...]:
    """One entry per family (seed 0) plus a seed-1 twin of ``second_seed``, all of one size and schedule."""
    checkpoints = tuple(sorted({0, steps, *(round(f * steps) for f in checkpoint_fractions)}))
    short = {"gpt2": "gpt2", "gpt_neox": "neox", "llama": "llama"}
    common = dict(width=width, depth=depth, heads=heads, ffn=4 * width, steps=steps, batch_size=batch_size,
                  seq_len=seq_len, lr=lr, warmup_steps=max(1, steps // 20), checkpoints=checkpoints)
    entries = [ZooEntry(f"zoo-{short[f]}", f, seed=0, **common) for f in FAMILIES]
    entries.append(ZooEntry(f"zoo-{short[second_seed]}-seed1", second_seed, seed=1, **common))
    return tuple(entries)


_OFFLINE_MIX = (("stdlib-prose", 0.45), ("stdlib-code", 0.45), ("unicode-records", 0.1))
_OFFLINE_CORPORA = tuple(c for c, _ in _OFFLINE_MIX)

# Sizing. One training step (16 x 128 tokens) of a width-128, 6-layer model costs about 0.33 (NeoX),
# 0.37 (GPT-2) and 0.41 (Llama) CPU-seconds on one core, so four models of 1000 steps on two
# workers take about 13 minutes plus a minute of preparation and evaluation: inside the
# 20-minute budget with room for a slower machine. The smoke zoo trains in seconds.
ZOOS: dict[str, ZooSpec] = {
    "offline": ZooSpec(
        "offline", vocab_size=4096, train_mix=_OFFLINE_MIX, eval_corpora=_OFFLINE_CORPORA, eval_tokens=32_768,
        max_chars=None,
        entries=_family_entries(width=128, depth=6, heads=4, steps=1000, batch_size=16, seq_len=128, lr=2e-3,
                                checkpoint_fractions=(1 / 16, 1 / 8, 1 / 4, 1 / 2)),
    ),
    "smoke": ZooSpec(
        "smoke", vocab_size=512, train_mix=_OFFLINE_MIX, eval_corpora=_OFFLINE_CORPORA, eval_tokens=2048,
        max_chars=300_000,
        entries=_family_entries(width=32, depth=3, heads=2, steps=200, batch_size=8, seq_len=64, lr=3e-3,
                                checkpoint_fractions=(1 / 4, 1 / 2, 3 / 4)),
    ),
}


def get_zoo(zoo: ZooSpec | str | object) -> ZooSpec:
    """A zoo by name, or the zoo of a profile (anything with a ``zoo`` attribute)."""
    if isinstance(zoo, ZooSpec):
        return zoo
    if isinstance(zoo, str):
        if zoo not in ZOOS:
            raise LinrecError(f"no zoo named '{zoo}'; zoos exist for the profiles {', '.join(ZOOS)} "
                              "(the other profiles load hub models)")
        return ZOOS[zoo]
    inner = getattr(zoo, "zoo", None)
    if isinstance(inner, ZooSpec):
        return inner
    raise LinrecError(f"profile '{getattr(zoo, 'name', zoo)}' has no model zoo (it loads hub models); "
                      f"zoos exist for the profiles {', '.join(ZOOS)}")


# ---------------------------------------------------------------------------------------------
# Cache layout (keys, atomic writes and the cache directory come from linrec.cache).


@dataclass(frozen=True)
class ZooLayout:
    """Where one zoo's tokenizer, tokenised data (train and eval streams) and model directories live."""

    tokenizer: Path
    data: Path
    models: dict[str, Path]
    corpora: dict[str, str]  # name -> sha256


def _layout(spec: ZooSpec, corpora: dict[str, Corpus]) -> ZooLayout:
    hashes = {name: corpora[name].sha256 for name in sorted(corpora)}
    tok_key = cache_key({"format": ZOO_FORMAT, "vocab": spec.vocab_size, "max_chars": spec.max_chars,
                    "max_length": _max_length(spec), "corpora": {c: hashes[c] for c in spec.train_corpora}})
    data_key = cache_key({"tokenizer": tok_key, "max_chars": spec.max_chars, "corpora": hashes})
    root = cache_dir()
    models = {
        e.name: root / "zoo" / f"{e.name}-{cache_key({'format': ZOO_FORMAT, 'entry': asdict(e), 'data': data_key, 'mix': spec.train_mix, 'eval': [spec.eval_corpora, spec.eval_tokens]})}"
        for e in spec.entries
    }
    return ZooLayout(root / "tokenizers" / tok_key, root / "data" / f"{data_key}.safetensors", models, hashes)


def _max_length(spec: ZooSpec) -> int:
    """The tokenizer's model_max_length: the longest context of the zoo's models."""
    return max((e.seq_len for e in spec.entries), default=1024)


def _corpora(spec: ZooSpec) -> dict[str, Corpus]:
    return {name: load_corpus(name) for name in dict.fromkeys([*spec.train_corpora, *spec.eval_corpora])}


def _fit_text(spec: ZooSpec, corpus: Corpus) -> str:
    return corpus.fit_text if spec.max_chars is None else corpus.fit_text[: spec.max_chars]


def prepare_zoo(zoo: ZooSpec | str | object, progress: bool = True) -> ZooLayout:
    """Build (or find in the cache) a zoo's tokenizer and tokenised data; where everything lives."""
    spec = get_zoo(zoo)
    corpora = _corpora(spec)
    layout = _layout(spec, corpora)
    if not layout.tokenizer.exists():
        with atomic_dir(layout.tokenizer) as tmp:
            if progress:
                tqdm.write(f"training a {spec.vocab_size}-token byte-level BPE on {', '.join(spec.train_corpora)}")
            train_bpe([_fit_text(spec, corpora[c]) for c in spec.train_corpora], spec.vocab_size, tmp,
                      max_length=_max_length(spec))
    if not layout.data.exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(layout.tokenizer))
        tensors = {}
        parts = [("train", c, _fit_text(spec, corpora[c])) for c in spec.train_corpora]
        parts += [("eval", c, corpora[c].eval_text) for c in spec.eval_corpora]
        for kind, name, text in tqdm(parts, desc="tokenising", disable=not progress):
            tensors[f"{kind}/{name}"] = tokenize(tokenizer, text).to(torch.int32)
        layout.data.parent.mkdir(parents=True, exist_ok=True)
        tmp = layout.data.with_name(f".tmp-{layout.data.name}-{os.getpid()}")
        save_file(tensors, str(tmp), metadata={"corpora": json.dumps(layout.corpora)})
        os.replace(tmp, layout.data)
    return layout


# ---------------------------------------------------------------------------------------------
# Training.


def model_config(entry: ZooEntry, vocab_size: int, eos_id: int):
    """The transformers config of a zoo entry (dropout off everywhere)."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    ids = dict(bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id, vocab_size=vocab_size)
    if entry.family == "gpt2":
        return GPT2Config(n_embd=entry.width, n_layer=entry.depth, n_head=entry.heads, n_inner=entry.ffn,
                          n_positions=entry.seq_len, activation_function="gelu_new", resid_pdrop=0.0,
                          embd_pdrop=0.0, attn_pdrop=0.0, **ids)
    if entry.family == "gpt_neox":
        return GPTNeoXConfig(hidden_size=entry.width, num_hidden_layers=entry.depth, num_attention_heads=entry.heads,
                             intermediate_size=entry.ffn, hidden_act="gelu", rotary_pct=0.25, use_parallel_residual=True,
                             max_position_embeddings=entry.seq_len, tie_word_embeddings=False, hidden_dropout=0.0,
                             attention_dropout=0.0, **ids)
    return LlamaConfig(hidden_size=entry.width, num_hidden_layers=entry.depth, num_attention_heads=entry.heads,
                       num_key_value_heads=entry.heads, intermediate_size=entry.ffn, hidden_act="silu",
                       max_position_embeddings=entry.seq_len, tie_word_embeddings=False, attention_dropout=0.0, **ids)


@contextmanager
def _deterministic_cpu(threads: int = 1) -> Iterator[None]:
    """Deterministic algorithms on a fixed number of threads, and the caller's RNG state left untouched."""
    old_threads, old_det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)


@contextmanager
def _quiet_saves() -> Iterator[None]:
    """Silence transformers' per-save progress bars (the zoo's own bars say what is happening)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class ZooData:
    """A zoo's tokenised texts (``ZooLayout.data``): training streams sampled by mix weight, held-out
    windows, and the unigram baseline."""

    def __init__(self, path: Path, mix: tuple[tuple[str, float], ...], eval_corpora: tuple[str, ...]) -> None:
        tensors = load_file(str(path))
        self.names = [c for c, _ in mix]
        self.weights = torch.tensor([w for _, w in mix], dtype=torch.float64)
        self.streams = [tensors[f"train/{c}"].long() for c in self.names]
        self.eval = {c: tensors[f"eval/{c}"].long() for c in eval_corpora}

    def sample(self, gen: torch.Generator, batch_size: int, seq_len: int) -> torch.Tensor:
        """A (batch_size, seq_len) batch of random windows, each from a corpus drawn by mix weight."""
        which = torch.multinomial(self.weights, batch_size, replacement=True, generator=gen)
        rows = []
        for c in which.tolist():
            stream = self.streams[c]
            if stream.numel() < seq_len:
                raise LinrecError(f"corpus '{self.names[c]}' has {stream.numel()} training tokens, fewer than seq_len={seq_len}")
            start = int(torch.randint(stream.numel() - seq_len + 1, (1,), generator=gen))
            rows.append(stream[start : start + seq_len])
        return torch.stack(rows)

    def windows(self, corpus: str, seq_len: int, max_tokens: int) -> torch.Tensor:
        """Consecutive non-overlapping held-out windows of ``corpus`` (up to ``max_tokens`` tokens)."""
        ids = self.eval[corpus]
        n = min(ids.numel(), max_tokens) // seq_len
        if n == 0:
            raise LinrecError(f"the eval text of '{corpus}' has {ids.numel()} tokens, fewer than seq_len={seq_len}")
        return ids[: n * seq_len].reshape(n, seq_len)

    def unigram_loss(self, windows: torch.Tensor, vocab_size: int) -> float:
        """Cross-entropy (nats/token) of the predicted tokens under a unigram model of the training mix:
        the weighted mixture of each corpus's add-one-smoothed token frequencies."""
        probs = torch.zeros(vocab_size, dtype=torch.float64)
        for w, stream in zip((self.weights / self.weights.sum()).tolist(), self.streams):
            counts = torch.bincount(stream, minlength=vocab_size).double() + 1
            probs += w * counts / counts.sum()
        return float(-probs.log()[windows[:, 1:].reshape(-1)].mean())


@torch.no_grad()
def eval_loss(model: torch.nn.Module, windows: torch.Tensor, batch_size: int = 32) -> float:
    """Mean next-token cross-entropy (nats) of ``model`` over ``windows`` (every position after the first)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for chunk in windows.split(batch_size):
        logits = model(input_ids=chunk).logits[:, :-1].float()
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1), reduction="sum"))
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def _lr_factor(entry: ZooEntry) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < entry.warmup_steps:
            return (step + 1) / entry.warmup_steps
        progress = (step - entry.warmup_steps) / max(1, entry.steps - entry.warmup_steps)
        return entry.min_lr_ratio + (1 - entry.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor


@dataclass(frozen=True)
class TrainJob:
    """Everything one training process needs for one entry (picklable): the entry, its zoo, the prepared
    tokenizer and data, the output directory and the corpus hashes to record."""

    spec: ZooSpec
    entry: ZooEntry
    tokenizer: Path
    data: Path
    out: Path
    corpora: dict[str, str]


def train_entry(job: TrainJob, report: Callable[[int], None] | None = None) -> dict:
    """Train ``job.entry`` and save its checkpoints and ``zoo.json`` into ``job.out`` (atomically)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    entry, spec = job.entry, job.spec
    tokenizer = AutoTokenizer.from_pretrained(str(job.tokenizer))
    data = ZooData(job.data, spec.train_mix, spec.eval_corpora)
    windows = {c: data.windows(c, entry.seq_len, spec.eval_tokens) for c in spec.eval_corpora}
    vocab = len(tokenizer)
    record = {
        "name": entry.name, "family": entry.family, "zoo": spec.name, "config": asdict(entry), "corpora": job.corpora,
        "train_mix": dict(spec.train_mix), "eval_tokens": {c: int(w[:, 1:].numel()) for c, w in windows.items()},
        "unigram_loss": {c: data.unigram_loss(w, vocab) for c, w in windows.items()},
        "versions": {"torch": torch.__version__, "zoo_format": ZOO_FORMAT}, "checkpoints": [], "train_loss": [],
    }
    with _deterministic_cpu(threads=1), _quiet_saves(), atomic_dir(job.out) as tmp:
        torch.manual_seed(entry.seed)
        model = AutoModelForCausalLM.from_config(model_config(entry, vocab, tokenizer.eos_token_id))
        record["params"] = sum(p.numel() for p in model.parameters())
        gen = torch.Generator().manual_seed(entry.seed)
        decay = [p for p in model.parameters() if p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": entry.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=entry.lr, betas=(0.9, 0.95))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_factor(entry))
        start_wall, start_cpu = time.perf_counter(), time.process_time()

        def checkpoint(step: int) -> None:
            name = f"step{step}"
            model.save_pretrained(str(tmp / name))
            tokenizer.save_pretrained(str(tmp / name))
            record["checkpoints"].append({
                "checkpoint": name, "step": step, "tokens": step * entry.batch_size * entry.seq_len,
                "eval_loss": {c: eval_loss(model, w) for c, w in windows.items()},
            })

        model.train()
        checkpoint(0)
        for step in range(1, entry.steps + 1):
            batch = data.sample(gen, entry.batch_size, entry.seq_len)
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            record["train_loss"].append(loss.item())
            if step in entry.checkpoints:
                checkpoint(step)
            if report is not None:
                report(1)
        record["tokens_seen"] = entry.tokens_seen
        record["train_seconds"] = time.perf_counter() - start_wall
        record["cpu_seconds"] = time.process_time() - start_cpu
        (tmp / "zoo.json").write_text(json.dumps(record, indent=1))
    return record


def _worker_main() -> None:
    """Entry point of a training subprocess: a pickled job on stdin, one line per step on stdout."""
    job = pickle.load(sys.stdin.buffer)
    # The parent keeps stdin open while it waits: end-of-file means it is gone, so stop too.
    stdin = sys.stdin.fileno()  # read unbuffered: a buffered reader's lock would block interpreter shutdown
    threading.Thread(target=lambda: (os.read(stdin, 1), os._exit(1)), daemon=True).start()
    train_entry(job, report=lambda n: print(n, flush=True))


def _train_subprocess(job: TrainJob, bar: tqdm) -> None:
    """Train one job in a fresh interpreter (no fork of this process, no re-import of its main script)."""
    cmd = [sys.executable, "-c", "from linrec.models.zoo import _worker_main; _worker_main()"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
        try:
            proc.stdin.write(pickle.dumps(job))
            proc.stdin.flush()
            for line in proc.stdout:
                bar.update(int(line))
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdin.close()
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-3000:]
            raise LinrecError(f"training zoo model '{job.entry.name}' failed (exit {proc.returncode}):\n{tail}")


def _train_all(jobs: list[TrainJob], workers: int, progress: bool) -> None:
    """Train ``jobs``: in this process when ``workers`` is 1, else ``workers`` subprocesses at a time."""
    bars = {j.entry.name: tqdm(total=j.entry.steps, desc=j.entry.name, unit="step", position=i, disable=not progress)
            for i, j in enumerate(jobs)}
    try:
        if workers <= 1 or len(jobs) == 1:
            for job in jobs:
                train_entry(job, report=bars[job.entry.name].update)
            return
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(_train_subprocess, job, bars[job.entry.name]) for job in jobs]:
                future.result()
    finally:
        for bar in bars.values():
            bar.close()


def default_workers() -> int:
    """Models trained at a time: one per core, at most two (the budget the zoo is sized for)."""
    return max(1, min(2, os.cpu_count() or 1))


def build_zoo(zoo: ZooSpec | str | object, *, models: list[str] | None = None, force: bool = False,
              progress: bool = True, workers: int | None = None) -> pd.DataFrame:
    """Train whatever of the zoo is not cached yet (all of it with ``force``) and return its table.

    ``zoo`` is a :class:`ZooSpec`, a zoo name (``"offline"``, ``"smoke"``) or a profile with a zoo.
    One row per model (see :func:`zoo_table`).
    """
    spec = get_zoo(zoo)
    entries = [spec.entry(m) for m in (models or spec.names())]
    layout = prepare_zoo(spec, progress)
    jobs = [TrainJob(spec, e, layout.tokenizer, layout.data, layout.models[e.name], layout.corpora)
            for e in entries if force or not layout.models[e.name].exists()]
    if jobs:
        _train_all(jobs, workers or default_workers(), progress)
    return zoo_table([json.loads((layout.models[e.name] / "zoo.json").read_text()) for e in entries])


def zoo_table(records: list[dict]) -> pd.DataFrame:
    """One row per model: size, tokens, time, and for each held-out corpus the final loss (nats/token),
    its perplexity, and the unigram baseline's loss, as ``loss:<corpus>``, ``ppl:<corpus>``, ``unigram:<corpus>``."""
    rows = []
    for r in records:
        final = r["checkpoints"][-1]["eval_loss"]
        row = {"model": r["name"], "family": r["family"], "width": r["config"]["width"], "depth": r["config"]["depth"],
               "params": r["params"], "tokens_seen": r["tokens_seen"], "train_seconds": r["train_seconds"],
               "cpu_seconds": r["cpu_seconds"]}
        for corpus, loss in final.items():
            row[f"loss:{corpus}"] = loss
            row[f"ppl:{corpus}"] = math.exp(loss)
            row[f"unigram:{corpus}"] = r["unigram_loss"][corpus]
        rows.append(row)
    return pd.DataFrame(rows)


def _resolve_checkpoint(entry: ZooEntry, checkpoint: str) -> str:
    names = entry.checkpoint_names()
    name = {"init": names[0], "final": names[-1]}.get(checkpoint, checkpoint)
    if name not in names:
        raise LinrecError(f"zoo model '{entry.name}' has no checkpoint '{checkpoint}'; choose init, final or one of {', '.join(names)}")
    return name


def zoo_model_path(zoo: ZooSpec | str | object, model: str | ZooEntry, checkpoint: str = "final") -> Path:
    """Where a checkpoint (``"init"``, ``"final"`` or ``"step<N>"``) of a zoo model is or will be; builds nothing."""
    spec = get_zoo(zoo)
    entry = spec.entry(model)
    return _layout(spec, _corpora(spec)).models[entry.name] / _resolve_checkpoint(entry, checkpoint)


def ensure_zoo_model(zoo: ZooSpec | str | object, model: str | ZooEntry, checkpoint: str = "final",
                     progress: bool = True) -> Path:
    """The path of a zoo checkpoint, training that model first if it is not cached."""
    spec = get_zoo(zoo)
    path = zoo_model_path(spec, model, checkpoint)
    if not path.exists():
        build_zoo(spec, models=[spec.entry(model).name], progress=progress, workers=1)
    return path


def zoo_record(zoo: ZooSpec | str | object, model: str | ZooEntry, progress: bool = True) -> dict:
    """The training record (``zoo.json``) of a zoo model, training it first if needed."""
    return json.loads((ensure_zoo_model(zoo, model, "final", progress).parent / "zoo.json").read_text())


# ---------------------------------------------------------------------------------------------
# CLI: `linrec zoo`.


def _print_zoo(table: pd.DataFrame) -> None:
    sizes = table[["model", "family", "width", "depth", "params", "tokens_seen", "train_seconds", "cpu_seconds"]]
    print(sizes.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    corpora = [c.split(":", 1)[1] for c in table.columns if c.startswith("loss:")]
    quality = pd.DataFrame([
        {"model": row["model"], "corpus": c, "loss": row[f"loss:{c}"], "ppl": row[f"ppl:{c}"],
         "unigram_loss": row[f"unigram:{c}"], "unigram_ppl": math.exp(row[f"unigram:{c}"]),
         "loss/unigram": row[f"loss:{c}"] / row[f"unigram:{c}"]}
        for _, row in table.iterrows() for c in corpora
    ])
    print("\nheld-out loss (nats/token) and perplexity, final checkpoint, against a unigram model of the training mix:")
    print(quality.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def _cli_zoo(args: argparse.Namespace) -> int:
    table = build_zoo(args.profile, force=args.force, workers=args.workers)
    _print_zoo(table)
    print(f"\ncache: {cache_dir()}")
    return 0


def add_cli(subparsers) -> None:
    """Register ``linrec zoo [--profile offline|smoke] [--force] [--workers N]``; its handler is ``args.handler``."""
    p = subparsers.add_parser("zoo", help="train (or find cached) the offline model zoo and print its table",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="offline", help=f"whose zoo to build: {', '.join(ZOOS)} (default: offline)")
    p.add_argument("--force", action="store_true", help="retrain even what is cached")
    p.add_argument("--workers", type=int, default=None, help="models trained at a time (default: min(2, cores))")
    p.set_defaults(handler=_cli_zoo)
