"""Building a zoo: its cache layout, the tokenizer and tokenised data, and the training workers.

Cache layout: ``tokenizers/<key>``, ``data/<key>`` (the tokenised texts, ``tokens.safetensors``) and
``zoo/<model>-<key>`` under :func:`linrec.cache.cache_dir`, each key a hash of everything that
decides the content (entry config, corpus hashes, tokenizer settings, :data:`ZOO_FORMAT`). Each is a
cache entry (:mod:`linrec.cache`): verified against its checksums when read, and rebuilt, with a
warning naming it, when damaged. :func:`prepare_zoo` gives the paths of their current versions.

Workers. With more than one worker each model trains in a fresh interpreter that gets its
:class:`TrainJob` as one line of JSON on stdin and prints one line per step. An interrupt
(Ctrl-C, or SIGTERM to ``linrec zoo``) or a failed model stops the whole build: queued models never
start, live workers are terminated and their temporary directories removed; finished models stay
cached, so a rerun trains only the rest.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import save_file

from linrec.cache import build_entry, built_entry, cache_dir, cache_key, entry_complete, remove_stale
from linrec.data.bpe import train_bpe
from linrec.data.corpora import load_corpus
from linrec.data.corpus import Corpus
from linrec.data.tokens import tokenize
from linrec.errors import LinrecError
from linrec.models.zoo.spec import ZOO_FORMAT, ZooEntry, ZooSpec
from linrec.models.zoo.train import TrainJob, train_entry
from linrec.progress import progress_bar


@dataclass(frozen=True)
class ZooLayout:
    """Where one zoo's tokenizer, tokenised data (train and eval streams: a safetensors file) and model directories
    live: the cache entries' names, or the paths of their current versions (:func:`prepare_zoo`)."""

    tokenizer: Path
    data: Path
    models: dict[str, Path]
    corpora: dict[str, str]  # name -> sha256


def _layout(spec: ZooSpec, corpora: dict[str, Corpus]) -> ZooLayout:
    hashes = {name: corpora[name].sha256 for name in sorted(corpora)}
    tok_key = cache_key(
        {
            "format": ZOO_FORMAT,
            "vocab": spec.vocab_size,
            "max_chars": spec.max_chars,
            "max_length": _max_length(spec),
            "corpora": {c: hashes[c] for c in spec.train_corpora},
        }
    )
    data_key = cache_key({"tokenizer": tok_key, "max_chars": spec.max_chars, "corpora": hashes})
    root = cache_dir()
    evaluation = [spec.eval_corpora, spec.eval_tokens]
    model_keys = {
        e.name: cache_key(
            {"format": ZOO_FORMAT, "entry": asdict(e), "data": data_key, "mix": spec.train_mix, "eval": evaluation}
        )
        for e in spec.entries
    }
    models = {name: root / "zoo" / f"{name}-{key}" for name, key in model_keys.items()}
    return ZooLayout(root / "tokenizers" / tok_key, root / "data" / data_key / DATA_FILE, models, hashes)


DATA_FILE = "tokens.safetensors"
"""The file of a zoo's data entry (``data/<key>``) that holds its tokenised texts."""


def _max_length(spec: ZooSpec) -> int:
    """The tokenizer's model_max_length: the longest context of the zoo's models."""
    return max((e.seq_len for e in spec.entries), default=1024)


def _corpora(spec: ZooSpec) -> dict[str, Corpus]:
    return {name: load_corpus(name) for name in dict.fromkeys([*spec.train_corpora, *spec.eval_corpora])}


def _fit_text(spec: ZooSpec, corpus: Corpus) -> str:
    return corpus.fit_text if spec.max_chars is None else corpus.fit_text[: spec.max_chars]


def prepare_zoo(spec: ZooSpec, progress: bool = True) -> ZooLayout:
    """Build (or find in the cache) a zoo's tokenizer and tokenised data; where everything lives, the tokenizer
    and data at their current versions (read them there: a rebuild beside a reader never changes them)."""
    corpora = _corpora(spec)
    layout = _layout(spec, corpora)

    def tokenizer(tmp: Path) -> None:
        if progress:
            print(
                f"training a {spec.vocab_size}-token byte-level BPE on {', '.join(spec.train_corpora)}", file=sys.stderr
            )
        train_bpe(
            [_fit_text(spec, corpora[c]) for c in spec.train_corpora],
            spec.vocab_size,
            tmp,
            max_length=_max_length(spec),
        )

    build_entry(layout.tokenizer, tokenizer)
    tokenizer_dir = built_entry(layout.tokenizer)

    def data(tmp: Path) -> None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        tensors = {}
        parts = [("train", c, _fit_text(spec, corpora[c])) for c in spec.train_corpora]
        parts += [("eval", c, corpora[c].eval_text) for c in spec.eval_corpora]
        for kind, name, text in progress_bar(parts, desc="tokenising", disable=not progress):
            tensors[f"{kind}/{name}"] = tokenize(tok, text).to(torch.int32)
        save_file(tensors, str(tmp / DATA_FILE), metadata={"corpora": json.dumps(layout.corpora)})

    build_entry(layout.data.parent, data)
    return replace(layout, tokenizer=tokenizer_dir, data=built_entry(layout.data.parent) / DATA_FILE)


# ---------------------------------------------------------------------------------------------
# Workers.


def _worker_main() -> None:
    """Entry point of a training subprocess: a job as one JSON line on stdin, one line per step on stdout."""
    job = TrainJob.from_json(sys.stdin.buffer.readline().decode())
    # The parent keeps stdin open while it waits: end-of-file means it is gone, so stop too.
    stdin = sys.stdin.fileno()  # read unbuffered: a buffered reader's lock would block interpreter shutdown
    threading.Thread(target=lambda: (os.read(stdin, 1), os._exit(1)), daemon=True).start()
    train_entry(job, report=lambda n: print(n, flush=True))


def _end(proc: subprocess.Popen) -> None:
    """Terminate ``proc`` if it still runs (kill it if it lingers) and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdin is not None:  # always a pipe here
        proc.stdin.close()


class _Workers:
    """The training subprocesses of one build, so that :meth:`stop` can end them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen] = set()
        self._stopped = False

    def train(self, job: TrainJob, report: Callable[[int], object]) -> None:
        """Train one job in a fresh interpreter (no fork of this process, no re-import of its main script)."""
        cmd = [sys.executable, "-c", "from linrec.models.zoo.build import _worker_main; _worker_main()"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        with tempfile.TemporaryFile() as err:
            with self._lock:
                if self._stopped:
                    return  # cancelled before it started
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env)
                self._live.add(proc)
            stdin, stdout = proc.stdin, proc.stdout
            assert stdin is not None and stdout is not None  # both are pipes (Popen above)
            try:
                try:
                    stdin.write(job.to_json().encode() + b"\n")
                    stdin.flush()
                except BrokenPipeError:
                    pass  # it ended at once: its exit status says why
                for line in stdout:
                    report(int(line))
                proc.wait()
            finally:
                _end(proc)
                with self._lock:
                    self._live.discard(proc)
            if proc.returncode != 0:
                remove_stale(job.out.parent, older_than=0)  # what the ended worker was writing
                if self._stopped or proc.returncode == -signal.SIGINT:
                    raise KeyboardInterrupt(f"training zoo model '{job.entry.name}' was interrupted")
                err.seek(0)
                tail = err.read().decode(errors="replace")[-3000:]
                raise LinrecError(f"training zoo model '{job.entry.name}' failed (exit {proc.returncode}):\n{tail}")

    def stop(self) -> None:
        """Start no more workers and terminate the live ones."""
        with self._lock:
            self._stopped = True
            live = list(self._live)
        for proc in live:
            proc.terminate()


class _Progress:
    """One progress bar for a build's training, however many models train at once: the total steps, and each
    model's own share in its postfix (separate bars per worker interleave in a log that is not a terminal)."""

    def __init__(self, jobs: list[TrainJob], enabled: bool) -> None:
        self._lock = threading.Lock()
        self._steps = {j.entry.name: j.entry.steps for j in jobs}
        self._done = dict.fromkeys(self._steps, 0)
        self.bar = progress_bar(total=sum(self._steps.values()), desc=f"training {len(jobs)} zoo model(s)", unit="step",
                        disable=not enabled)  # fmt: skip

    def reporter(self, name: str) -> Callable[[int], None]:
        """The callback through which model ``name`` reports steps done (thread-safe)."""

        def report(steps: int) -> None:
            with self._lock:
                self._done[name] += steps
                self.bar.set_postfix_str(
                    ", ".join(
                        f"{m} {100 * d // self._steps[m]}%" for m, d in self._done.items() if 0 < d < self._steps[m]
                    ),
                    refresh=False,
                )
                self.bar.update(steps)

        return report


def _train_all(jobs: list[TrainJob], workers: int, progress: bool) -> None:
    """Train ``jobs``: in this process when ``workers`` is 1, else ``workers`` subprocesses at a time.

    The first failure or interrupt stops the rest (see the module docstring) and is raised.
    """
    shown = _Progress(jobs, progress)
    try:
        if workers <= 1 or len(jobs) == 1:
            for job in jobs:
                train_entry(job, report=shown.reporter(job.entry.name))
            return
        pool = _Workers()
        with ThreadPoolExecutor(max_workers=workers) as executor:
            futures = [executor.submit(pool.train, job, shown.reporter(job.entry.name)) for job in jobs]
            try:
                for future in as_completed(futures):
                    future.result()
            except BaseException:
                executor.shutdown(wait=False, cancel_futures=True)  # queued jobs never start
                pool.stop()
                raise
    finally:
        shown.bar.close()


def default_workers() -> int:
    """Models trained at a time: one per core, at most two (the budget the zoo is sized for)."""
    return max(1, min(2, os.cpu_count() or 1))


# ---------------------------------------------------------------------------------------------
# The zoo's models and their table.


def build_zoo(
    spec: ZooSpec,
    *,
    models: list[str] | None = None,
    force: bool = False,
    progress: bool = True,
    workers: int | None = None,
) -> pd.DataFrame:
    """Train whatever of the zoo is not cached yet (all of it with ``force``) and return its table.

    One row per model (see :func:`zoo_table`). A damaged cached model is reported and retrained.
    """
    entries = [spec.entry(m) for m in (models or spec.names())]
    layout = prepare_zoo(spec, progress)
    jobs = [
        TrainJob(spec, e, layout.tokenizer, layout.data, layout.models[e.name], layout.corpora, force)
        for e in entries
        if force or not entry_complete(layout.models[e.name])
    ]
    if jobs:
        _train_all(jobs, workers or default_workers(), progress)
    return zoo_table([json.loads((built_entry(layout.models[e.name]) / "zoo.json").read_text()) for e in entries])


def zoo_table(records: list[dict]) -> pd.DataFrame:
    """One row per model: size, tokens, time, and for each held-out corpus the final loss (nats/token),
    its perplexity, and the unigram baseline's loss, as ``loss:<corpus>``, ``ppl:<corpus>``, ``unigram:<corpus>``."""
    rows = []
    for r in records:
        final = r["checkpoints"][-1]["eval_loss"]
        row = {
            "model": r["name"],
            "family": r["family"],
            "width": r["config"]["width"],
            "depth": r["config"]["depth"],
            "params": r["params"],
            "tokens_seen": r["tokens_seen"],
            "train_seconds": r["train_seconds"],
            "cpu_seconds": r["cpu_seconds"],
        }
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
        raise LinrecError(
            f"zoo model '{entry.name}' has no checkpoint '{checkpoint}'; choose "
            f"init, final or one of {', '.join(names)}"
        )
    return name


def zoo_model_path(spec: ZooSpec, model: str | ZooEntry, checkpoint: str = "final") -> Path:
    """Where a checkpoint (``"init"``, ``"final"`` or ``"step<N>"``) of a zoo model is or will be; builds nothing."""
    entry = spec.entry(model)
    return _layout(spec, _corpora(spec)).models[entry.name] / _resolve_checkpoint(entry, checkpoint)


def zoo_missing(spec: ZooSpec) -> list[str]:
    """The zoo's models not (completely) in the cache: what a first use would train. Builds nothing."""
    models = _layout(spec, _corpora(spec)).models
    return [e.name for e in spec.entries if not entry_complete(models[e.name])]


def ensure_zoo_model(spec: ZooSpec, model: str | ZooEntry, checkpoint: str = "final", progress: bool = True) -> Path:
    """The path of a zoo checkpoint, training that model first if it is not cached (or is damaged)."""
    path = zoo_model_path(spec, model, checkpoint)
    if not entry_complete(path.parent):
        build_zoo(spec, models=[spec.entry(model).name], progress=progress, workers=1)
    return built_entry(path.parent) / path.name  # the version to load, whatever replaces it meanwhile


def zoo_record(spec: ZooSpec, model: str | ZooEntry, progress: bool = True) -> dict:
    """The training record (``zoo.json``) of a zoo model, training it first if needed."""
    return json.loads((ensure_zoo_model(spec, model, "final", progress).parent / "zoo.json").read_text())
