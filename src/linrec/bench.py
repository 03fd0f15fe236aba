"""What the measurement costs on a GPT-2-small-sized model (random weights, no download); ``linrec bench`` prints it.

Times, on the same batches (default 8 × 128 tokens): the bare full-model forward; forward +
capture + float64 moments for all 12 blocks (the forward stops after block 11, so no LM head);
and the naive alternative, materialising every row and calling ``torch.linalg.lstsq`` per block.
Peak memory of capture + moments is measured in a fresh process per token count, to show that it
does not grow with the number of tokens.
"""

from __future__ import annotations

import multiprocessing as mp
import platform
import resource
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import pandas as pd
import torch
from torch import nn

from linrec.core.capture import BatchRows, MomentSink, RowSink, run_capture
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.models.arch import ffn_blocks
from linrec.models.loading import pick_device

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

    from transformers import GPT2LMHeadModel


def gpt2_small(device: torch.device, seed: int = 0) -> GPT2LMHeadModel:
    """A GPT-2-small-shaped causal LM (GPT2Config() defaults) with random weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config())
    # transformers wraps Module.to with functools.wraps, which the checker cannot bind to the model: call it as
    # nn.Module's (the same method, which moves the model in place and returns it).
    cast(nn.Module, model).to(device)
    return model.eval().requires_grad_(False)


def random_batches(n_tokens: int, batch_size: int, seq_len: int, vocab: int, seed: int = 0) -> TokenBatches:
    """Uniformly random token ids, ``n_tokens`` rounded up to whole sequences of ``seq_len``: timing needs no text."""
    n_seq = -(-n_tokens // seq_len)
    ids = torch.randint(0, vocab, (n_seq, seq_len), generator=torch.Generator().manual_seed(seed))
    return TokenBatches(ids, torch.ones_like(ids), batch_size)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], object], device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


class _RowStore(RowSink):
    """The naive sink: keeps every row (what the moments make unnecessary)."""

    def __init__(self) -> None:
        self.rows: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        self.rows.setdefault(block, []).append((x.clone(), y.clone()))


def _lstsq_all(store: _RowStore) -> None:
    for pairs in store.rows.values():
        x = torch.cat([p[0] for p in pairs]).double()
        y = torch.cat([p[1] for p in pairs]).double()
        x1 = torch.cat([x, torch.ones_like(x[:, :1])], 1)
        torch.linalg.lstsq(x1.cpu(), y.cpu(), driver="gelsd")


def _capture_moments(model: nn.Module, batches: TokenBatches, folds: int = 5) -> None:
    sink = MomentSink(folds)
    run_capture(model, batches, ffn_blocks(model), [sink], batches.folds(folds, 0), progress=False)
    sink.moments()


def _peak_child(n_tokens: int, batch_size: int, seq_len: int, device: str, queue: Queue[int]) -> None:
    dev = torch.device(device)
    model = gpt2_small(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    _capture_moments(model, random_batches(n_tokens, batch_size, seq_len, model.config.vocab_size))
    peak = (
        torch.cuda.max_memory_allocated(dev)
        if dev.type == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    queue.put(peak)


def peak_memory(n_tokens: int, batch_size: int, seq_len: int, device: torch.device) -> int:
    """Peak bytes (GPU allocations on CUDA, else process RSS) of capture + moments over ``n_tokens``."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_child, args=(n_tokens, batch_size, seq_len, str(device), queue))
    proc.start()
    peak = queue.get()
    proc.join()
    return peak


def capture_overhead(model: nn.Module, batches: TokenBatches, repeats: int = 2) -> dict[str, float]:
    """Seconds (best of ``repeats``) of the bare full forward and of forward + capture + moments, on ``batches``."""
    dev = next(model.parameters()).device
    extra = {"use_cache": False} if getattr(model.config, "use_cache", None) is not None else {}

    def bare() -> None:
        with torch.no_grad():
            for b in batches:
                model(input_ids=b.input_ids.to(dev), attention_mask=b.attention_mask.to(dev), **extra)

    first = next(iter(batches))
    _capture_moments(model, TokenBatches(first.input_ids, first.attention_mask, batches.batch_size))  # warm-up
    return {
        "tokens": batches.n_rows,
        "bare_s": min(_timed(bare, dev) for _ in range(repeats)),
        "capture_s": min(_timed(lambda: _capture_moments(model, batches), dev) for _ in range(repeats)),
    }


def run_bench(
    device: str | None = None,
    n_batches: int = 6,
    batch_size: int = 8,
    seq_len: int = 128,
    peak_tokens: tuple[int, ...] = (20_000, 200_000),
) -> pd.DataFrame:
    """One row per measurement: what, tokens/s or MiB, and the time ratio to the bare forward; ``seq_len`` beyond
    the shape's context (GPT2Config's n_positions) is refused before anything is built."""
    from transformers import GPT2Config

    context = GPT2Config().n_positions
    if seq_len > context:
        raise LinrecError(
            f"seq_len {seq_len} exceeds the context of {context} tokens of the GPT-2-small shape; "
            f"use --seq-len {context} or less"
        )
    dev = pick_device(device)
    model = gpt2_small(dev)
    batches = random_batches(n_batches * batch_size * seq_len, batch_size, seq_len, model.config.vocab_size)
    tokens = batches.n_rows

    def naive() -> None:
        store = _RowStore()
        run_capture(model, batches, ffn_blocks(model), [store], batches.folds(5, 0), progress=False)
        _lstsq_all(store)

    times = capture_overhead(model, batches)
    t_bare, t_mom = times["bare_s"], times["capture_s"]
    t_naive = _timed(naive, dev)
    machine = (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
        if dev.type == "cpu"
        else torch.cuda.get_device_name(dev)
    )
    rows = [
        {"measure": "bare forward (full model)", "value": tokens / t_bare, "unit": "tokens/s", "ratio_to_bare": 1.0},
        {
            "measure": "forward + capture + moments (12 blocks)",
            "value": tokens / t_mom,
            "unit": "tokens/s",
            "ratio_to_bare": t_mom / t_bare,
        },
        {
            "measure": "forward + materialise rows + lstsq",
            "value": tokens / t_naive,
            "unit": "tokens/s",
            "ratio_to_bare": t_naive / t_bare,
        },
    ]
    for n in peak_tokens:
        rows.append(
            {
                "measure": f"peak memory, capture + moments, {n} tokens",
                "value": peak_memory(n, batch_size, seq_len, dev) / 2**20,
                "unit": "MiB",
                "ratio_to_bare": float("nan"),
            }
        )
    table = pd.DataFrame(rows)
    table["device"] = machine
    table["tokens_timed"] = tokens
    return table
