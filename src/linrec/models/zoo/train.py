"""Training one zoo model: the data sampler, the held-out loss, the schedule and the training loop."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from linrec.cache import build_entry
from linrec.errors import LinrecError
from linrec.models.zoo.spec import ZOO_FORMAT, ZooEntry, ZooSpec, model_config
from linrec.progress import no_library_bars


@contextmanager
def _deterministic_cpu(threads: int = 1) -> Iterator[None]:
    """Deterministic algorithms on a fixed number of threads, and the caller's RNG state left untouched.

    Deterministic mode would also fill every new tensor with NaN (a guard against reading memory
    no kernel wrote); that costs about 4% of a step and changes no result, so it is off here."""
    # torch gives this module a class with the fill_uninitialized_memory property, which the checker cannot see.
    determinism: Any = torch.utils.deterministic
    old_threads, old_det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    old_fill = determinism.fill_uninitialized_memory
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    determinism.fill_uninitialized_memory = False
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)
        determinism.fill_uninitialized_memory = old_fill


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
                raise LinrecError(
                    f"corpus '{self.names[c]}' has {stream.numel()} training tokens, fewer than seq_len={seq_len}"
                )
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
def eval_loss(model: torch.nn.Module, windows: torch.Tensor, batch_size: int = 8) -> float:
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
    """Everything one training process needs for one entry, as plain data (it travels to a worker as JSON):
    the entry, its zoo, the prepared tokenizer and data, the output directory, the corpus hashes to
    record, and whether to replace a cached model (``force``)."""

    spec: ZooSpec
    entry: ZooEntry
    tokenizer: Path
    data: Path
    out: Path
    corpora: dict[str, str]
    force: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> TrainJob:
        """The job :meth:`to_json` wrote, equal to the original (tuples restored, paths as ``Path``)."""
        job = json.loads(text)
        spec = job["spec"]
        return cls(
            spec=ZooSpec(
                **{
                    **spec,
                    "train_mix": tuple(tuple(pair) for pair in spec["train_mix"]),
                    "eval_corpora": tuple(spec["eval_corpora"]),
                    "entries": tuple(_entry_from_dict(e) for e in spec["entries"]),
                }
            ),
            entry=_entry_from_dict(job["entry"]),
            tokenizer=Path(job["tokenizer"]),
            data=Path(job["data"]),
            out=Path(job["out"]),
            corpora=job["corpora"],
            force=job["force"],
        )


def _entry_from_dict(entry: dict) -> ZooEntry:
    return ZooEntry(**{**entry, "checkpoints": tuple(entry["checkpoints"])})


def train_entry(job: TrainJob, report: Callable[[int], object] | None = None) -> dict:
    """Train ``job.entry``, save its checkpoints and ``zoo.json`` into ``job.out`` (atomically), return the record.

    Training holds the cache key's lock: a process that finds another one training the same model
    waits for it, then returns its record instead of training again (unless ``job.force``).
    """
    record: dict = {}
    if build_entry(job.out, lambda tmp: record.update(_train_into(job, tmp, report)), refresh=job.force):
        return record
    return json.loads((job.out / "zoo.json").read_text())


def _train_into(job: TrainJob, tmp: Path, report: Callable[[int], object] | None) -> dict:
    """The training run of :func:`train_entry`, written into the temporary directory ``tmp``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    entry, spec = job.entry, job.spec
    tokenizer = AutoTokenizer.from_pretrained(str(job.tokenizer))
    data = ZooData(job.data, spec.train_mix, spec.eval_corpora)
    windows = {c: data.windows(c, entry.seq_len, spec.eval_tokens) for c in spec.eval_corpora}
    vocab = len(tokenizer)
    record: dict[str, Any] = {
        "name": entry.name,
        "family": entry.family,
        "zoo": spec.name,
        "config": asdict(entry),
        "corpora": job.corpora,
        "train_mix": dict(spec.train_mix),
        "eval_tokens": {c: int(w[:, 1:].numel()) for c, w in windows.items()},
        "unigram_loss": {c: data.unigram_loss(w, vocab) for c, w in windows.items()},
        "versions": {"torch": torch.__version__, "zoo_format": ZOO_FORMAT},
        "checkpoints": [],
        "train_loss": [],
    }
    with _deterministic_cpu(threads=1), no_library_bars():
        torch.manual_seed(entry.seed)
        model = AutoModelForCausalLM.from_config(model_config(entry, vocab, tokenizer.eos_token_id))
        record["params"] = sum(p.numel() for p in model.parameters())
        gen = torch.Generator().manual_seed(entry.seed)
        decay = [p for p in model.parameters() if p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.ndim < 2]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": entry.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=entry.lr,
            betas=(0.9, 0.95),
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_factor(entry))
        start_wall, start_cpu = time.perf_counter(), time.process_time()

        def checkpoint(step: int) -> None:
            name = f"step{step}"
            model.save_pretrained(str(tmp / name))
            tokenizer.save_pretrained(str(tmp / name))
            record["checkpoints"].append(
                {
                    "checkpoint": name,
                    "step": step,
                    "tokens": step * entry.batch_size * entry.seq_len,
                    "eval_loss": {c: eval_loss(model, w) for c, w in windows.items()},
                }
            )

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
