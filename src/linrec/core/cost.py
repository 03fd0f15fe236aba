"""What the measurement costs, split into its parts, on a real model shape with random weights: the machinery of
``linrec bench`` (:mod:`linrec.commands.bench`). The shapes are :data:`linrec.models.shapes.BENCH_SHAPES`.

Every path runs on the same batches after its own warm-up, timed with CUDA events on a GPU:

* the **full forward** (LM head included) and the **truncated forward**, stopped after the deepest
  FFN block as the capture stops it (:func:`linrec.core.capture.stop_after`: so the capture never pays for
  later layers or the LM head);
* the **capture with a null sink**: the forward with the hooks and the row planning, no arithmetic;
* the **moments alone**: the float64 moment arithmetic on synthetic rows of the blocks' widths, with
  the same rows per batch and folds, and no forward;
* **forward + capture + moments**, the real path; its finalisation (centring, and on a GPU the one
  copy to the host) is a fixed per-run cost, timed on its own line rather than spread over tokens.

So the overhead over the truncated forward splits into hooks (null sink), arithmetic (moments alone)
and the rest. The table also counts host-device syncs per batch (:class:`~linrec.core.syncs.SyncCounter`,
on two untimed batches) and, as before, times the naive alternative (every row kept, then
``torch.linalg.lstsq`` per block) and the peak memory of capture + moments in a fresh process per
token count, which does not grow with the tokens.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import platform
import resource
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd
import torch
from torch import nn

from linrec.core.capture import forward_until_stopped, run_capture, stop_after
from linrec.core.moment_sink import MomentSink
from linrec.core.plan import FREE_SHARE, config_weights_bytes, device_free, footprint, gigabytes, host_available
from linrec.core.rows import BatchRows, RowSink, to_device
from linrec.core.syncs import SyncCounter
from linrec.data.tokens import TokenBatches
from linrec.errors import LinrecError
from linrec.models.arch import ffn_blocks
from linrec.models.loading import parse_dtype, pick_device
from linrec.models.shapes import bench_config

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

    from transformers import PretrainedConfig, PreTrainedModel

FOLDS = 5
WARMUP = 2  # batches each path runs before it is timed


def layered_config(shape: str, layers: int | None = None) -> PretrainedConfig:
    """The bench shape ``shape``'s configuration with its first ``layers`` decoder layers (None: all of them): the
    same width, heads and vocabulary, so a block costs what it costs in the whole model. More layers than the shape
    has are refused."""
    config = bench_config(shape)
    if layers is not None:
        if layers > config.num_hidden_layers:
            raise LinrecError(f"the {shape} shape has {config.num_hidden_layers} layers, not {layers}")
        config.num_hidden_layers = layers
    return config


def shaped_model(
    shape: str, device: torch.device, dtype: torch.dtype = torch.float32, seed: int = 0, layers: int | None = None
) -> PreTrainedModel:
    """A causal LM of ``shape`` (its first ``layers`` layers, :func:`layered_config`) with seeded random weights, in
    eval mode, on ``device`` in ``dtype``: drawn there, in ``dtype`` (no float32 copy of a 7B shape, and no minutes of
    drawing on the host for a GPU)."""
    from transformers import AutoModelForCausalLM

    config = layered_config(shape, layers)
    torch.manual_seed(seed)
    with device:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval().requires_grad_(False)


def random_batches(n_tokens: int, batch_size: int, seq_len: int, vocab: int, seed: int = 0) -> TokenBatches:
    """Uniformly random token ids, ``n_tokens`` rounded up to whole sequences of ``seq_len``: timing needs no text."""
    n_seq = -(-n_tokens // seq_len)
    ids = torch.randint(0, vocab, (n_seq, seq_len), generator=torch.Generator().manual_seed(seed))
    return TokenBatches(ids, torch.ones_like(ids), batch_size)


def _first(batches: TokenBatches, n: int) -> TokenBatches:
    """The first ``n`` batches of ``batches``, and at least enough sequences to fill the folds."""
    end = max(n * batches.batch_size, FOLDS)
    return TokenBatches(batches.input_ids[:end], batches.attention_mask[:end], batches.batch_size)


def seconds(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of ``fn``: CUDA events around it on a GPU (one wait at the end), else the host clock."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000
    begin = time.perf_counter()
    fn()
    return time.perf_counter() - begin


def forward(model: nn.Module, batches: TokenBatches, truncated: bool = False) -> None:
    """The model over ``batches``, in full or stopped after its deepest FFN block (as the capture stops it)."""
    device = next(model.parameters()).device
    handle = stop_after(model, ffn_blocks(model)[-1].output) if truncated else None
    try:
        with torch.no_grad():
            for b in batches:
                forward_until_stopped(
                    model,
                    input_ids=to_device(b.input_ids, device),
                    attention_mask=to_device(b.attention_mask, device),
                    use_cache=False,
                )
    finally:
        if handle is not None:
            handle.remove()


class NullSink(RowSink):
    """Takes every block's rows and does nothing with them: what the hooks alone cost."""

    def add(self, block: int, x: torch.Tensor, y: torch.Tensor, rows: BatchRows) -> None:
        pass


def capture(model: nn.Module, batches: TokenBatches, sink: RowSink) -> None:
    """Every FFN block of ``model`` over ``batches`` into ``sink``, with the bench's folds."""
    run_capture(model, batches, ffn_blocks(model), [sink], batches.folds(FOLDS, 0), progress=False)


def moments_alone(model: nn.Module, batches: TokenBatches) -> Callable[[], MomentSink]:
    """A run of only the moment arithmetic the capture of ``batches`` does: synthetic rows of every block's
    widths, in the model's dtype and on its device, the same rows per batch, fold runs and first positions (kept
    apart, as the capture does), no forward."""
    parameter = next(model.parameters())
    blocks = ffn_blocks(model)
    width = cast(Any, model).config.hidden_size
    g = torch.Generator(device=parameter.device).manual_seed(0)
    per_batch = batches.batch_size * batches.seq_len
    rows = torch.randn(per_batch, width, generator=g, device=parameter.device, dtype=parameter.dtype)
    folds = batches.folds(FOLDS, 0)
    grouped = batches.grouped(folds)
    plans = [
        BatchRows.of_mask(i, i * per_batch, np.ones(tuple(b.input_ids.shape), dtype=bool), folds[b.seq_index])
        for i, b in enumerate(grouped)
    ]

    def run() -> MomentSink:
        sink = MomentSink(FOLDS)
        for plan in plans:
            n = plan.n
            for block in blocks:
                sink.add(block.index, rows[:n], rows[:n], plan)
            sink.end_batch(plan)
        return sink

    return run


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


def _naive(model: nn.Module, batches: TokenBatches) -> None:
    store = _RowStore()
    capture(model, batches, store)
    _lstsq_all(store)


def _capture_into(model: nn.Module, batches: TokenBatches) -> MomentSink:
    """Forward + capture + moments, not finalised."""
    sink = MomentSink(FOLDS)
    capture(model, batches, sink)
    return sink


def _capture_moments(model: nn.Module, batches: TokenBatches) -> None:
    _capture_into(model, batches).moments()


def _peak_child(
    n_tokens: int, batch_size: int, seq_len: int, device: str, shape: str, dtype: str, layers: int | None,
    queue: Queue[int],
) -> None:  # fmt: skip
    dev = torch.device(device)
    model = shaped_model(shape, dev, parse_dtype(dtype), layers=layers)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    _capture_moments(model, random_batches(n_tokens, batch_size, seq_len, model.config.vocab_size))
    peak = (
        torch.cuda.max_memory_allocated(dev)
        if dev.type == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    queue.put(peak)


def peak_memory(
    n_tokens: int,
    batch_size: int,
    seq_len: int,
    device: torch.device,
    shape: str = "gpt2-small",
    dtype: str = "float32",
    layers: int | None = None,
) -> int:
    """Peak bytes (GPU allocations on CUDA, else process RSS) of capture + moments over ``n_tokens``."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    args = (n_tokens, batch_size, seq_len, str(device), shape, dtype, layers, queue)
    proc = ctx.Process(target=_peak_child, args=args)
    proc.start()
    peak = queue.get()
    proc.join()
    return peak


def _best(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    return min(seconds(fn, device) for _ in range(repeats))


def capture_overhead(model: nn.Module, batches: TokenBatches, repeats: int = 2) -> dict[str, float]:
    """Seconds (best of ``repeats``, each path warmed up first) of the full forward ("bare_s"), the truncated
    forward ("truncated_s") and forward + capture + moments, finalisation included ("capture_s"), on ``batches``."""
    dev = next(model.parameters()).device
    warm = _first(batches, 1)
    paths = {
        "bare_s": lambda b: forward(model, b),
        "truncated_s": lambda b: forward(model, b, truncated=True),
        "capture_s": lambda b: _capture_moments(model, b),
    }
    times: dict[str, float] = {"tokens": batches.n_rows}
    for name, path in paths.items():
        path(warm)
        times[name] = _best(functools.partial(path, batches), dev, repeats)
    return times


def _syncs_per_batch(model: nn.Module, batch_size: int, seq_len: int) -> dict[str, float]:
    """Host-device syncs per batch of the truncated forward alone, and those the capture adds to it: the
    difference between runs of 6 and 3 batches, so what happens once per run cancels."""

    def count(fn: Callable[[], object]) -> int:
        with SyncCounter() as counter:
            fn()
        return counter.total

    runs = {n: random_batches(max(n * batch_size, FOLDS) * seq_len, batch_size, seq_len, 2) for n in (3, 6)}
    extra = len(runs[6]) - len(runs[3])
    alone = [count(functools.partial(forward, model, b, truncated=True)) for b in runs.values()]
    captured = [count(functools.partial(_capture_into, model, b)) for b in runs.values()]
    return {
        "forward": (alone[1] - alone[0]) / extra,
        "capture": (captured[1] - captured[0]) / extra - (alone[1] - alone[0]) / extra,
    }


def default_batch_size(device: torch.device) -> int:
    """Sequences per batch when none is given: 32 on a GPU (a size that keeps it busy), 2 on a CPU."""
    return 32 if device.type == "cuda" else 2


def _check_memory(
    config: PretrainedConfig, shape: str, windows: int, seq_len: int, batch_size: int, dtype: torch.dtype,
    dev: torch.device,
) -> None:  # fmt: skip
    """Refuse, before any weights are drawn, a bench whose one pass over every layer cannot fit this machine: the
    bench holds every block's moments at once (no plan), so a 7B shape needs more than a GPU host has. The message
    names the most layers of the shape that fit (``--layers``)."""
    on_gpu = dev.type == "cuda"
    weights = config_weights_bytes(config, dtype)

    def needs(layers: int) -> tuple[int, int]:
        fp = footprint(config, blocks=layers, folds=FOLDS, windows=windows, seq_len=seq_len, batch_size=batch_size,
                       dtype=dtype, on_gpu=on_gpu, weights=(0, weights) if on_gpu else (weights, 0))  # fmt: skip
        fp = replace(fp, layers=layers, weights_host=fp.weights_host * layers // config.num_hidden_layers,
                     weights_device=fp.weights_device * layers // config.num_hidden_layers)  # fmt: skip
        merged = FOLDS * fp.sums * layers if on_gpu else 0  # finalised moments, beside the pinned ones freed to a cache
        return fp.host(layers, 1) + merged, fp.device(layers)

    host_cap = int(FREE_SHARE * host_available())
    free = device_free(dev)
    device_cap = None if free is None else int(FREE_SHARE * free)

    def fits(layers: int) -> bool:
        host, device = needs(layers)
        return host <= host_cap and (device_cap is None or device <= device_cap)

    total = config.num_hidden_layers
    if fits(total):
        return
    most = next((n for n in range(total - 1, 0, -1) if fits(n)), 0)
    host, device = needs(total)
    raise LinrecError(
        f"linrec bench holds every block's moments at once: the {shape} shape's {total} layers need about "
        f"{gigabytes(host)} of host memory{'' if device_cap is None else f' and {gigabytes(device)} on the GPU'}, "
        f"more than the {FREE_SHARE:.0%} of what is free here ({gigabytes(host_cap)}"
        f"{'' if device_cap is None else f', {gigabytes(device_cap)}'}); "
        + (f"time its first layers, which cost per block what the whole shape's do: --layers {most}"
           if most else "no layer of it fits: try a smaller --batch-size or another machine")
    )  # fmt: skip


def run_bench(
    device: str | None = None,
    n_batches: int = 50,
    batch_size: int | None = None,
    seq_len: int = 128,
    peak_tokens: tuple[int, ...] = (20_000, 200_000),
    shape: str = "gpt2-small",
    dtype: str = "float32",
    naive_batches: int = 4,
    layers: int | None = None,
) -> pd.DataFrame:
    """One row per measurement: what, its value and unit, and its time as a multiple of the truncated and of the
    full forward's; the settings in every row. ``layers``: time the shape's first layers only
    (:func:`layered_config`). Settings that cannot work (a ``seq_len`` beyond the shape's context, too few tokens for
    the folds, more memory than the machine has) are refused before anything is built."""
    config = layered_config(shape, layers)
    torch_dtype = parse_dtype(dtype)
    context = getattr(config, "n_positions", None) or config.max_position_embeddings
    if seq_len > context:
        raise LinrecError(
            f"seq_len {seq_len} exceeds the context of {context} tokens of the {shape} shape; "
            f"use --seq-len {context} or less"
        )
    too_few = [n for n in peak_tokens if n < FOLDS * seq_len]
    if too_few:
        raise LinrecError(
            f"peak-memory token counts {too_few} cannot fill {FOLDS} folds of {seq_len}-token sequences; "
            f"give at least {FOLDS * seq_len}"
        )
    dev = pick_device(device)
    batch_size = batch_size or default_batch_size(dev)
    if n_batches * batch_size < FOLDS:
        raise LinrecError(f"{n_batches} batches of {batch_size} sequences cannot fill {FOLDS} folds; time more batches")
    warm_sequences = max(WARMUP * batch_size, FOLDS)
    _check_memory(config, shape, warm_sequences + n_batches * batch_size, seq_len, batch_size, torch_dtype, dev)
    model = shaped_model(shape, dev, torch_dtype, layers=layers)
    everything = random_batches(
        (warm_sequences + n_batches * batch_size) * seq_len, batch_size, seq_len, model.config.vocab_size
    )
    warm = _first(everything, WARMUP)
    batches = TokenBatches(
        everything.input_ids[warm_sequences:], everything.attention_mask[warm_sequences:], batch_size
    )
    tokens = batches.n_rows
    sinks: dict[str, MomentSink] = {}

    def real(b: TokenBatches) -> None:
        sinks.clear()  # the previous run's moments go first: one capture's worth held at a time
        sinks["last"] = _capture_into(model, b)

    paths: dict[str, Callable[[TokenBatches], object]] = {
        "full forward (LM head included)": lambda b: forward(model, b),
        "truncated forward (stops after the deepest block)": lambda b: forward(model, b, truncated=True),
        "capture, null sink (hooks and row planning only)": lambda b: capture(model, b, NullSink()),
        "moments alone (float64 arithmetic on synthetic rows)": lambda b: moments_alone(model, b)(),
        "forward + capture + moments": real,
    }
    times: dict[str, float] = {}
    for name, path in paths.items():
        path(warm)
        if name.startswith("moments alone"):
            run = moments_alone(model, batches)  # the synthetic rows are made before the clock starts
            times[name] = seconds(run, dev)
        else:
            times[name] = seconds(functools.partial(path, batches), dev)
    finalise = seconds(sinks["last"].moments, dev)
    sinks.clear()
    naive = _first(batches, min(naive_batches, n_batches))
    t_naive = seconds(lambda: _naive(model, naive), dev)
    syncs = _syncs_per_batch(model, batch_size, seq_len)

    t_full = times["full forward (LM head included)"]
    t_trunc = times["truncated forward (stops after the deepest block)"]
    rows: list[dict[str, Any]] = [
        {"measure": name, "value": tokens / t, "unit": "tokens/s", "vs_truncated": t / t_trunc, "vs_full": t / t_full}
        for name, t in times.items()
    ]
    rows.append({"measure": "finalisation of the moments, once per run", "value": finalise, "unit": "s"})
    rows.append(
        {
            "measure": f"materialise every row + lstsq per block ({naive.n_rows:,} tokens)",
            "value": naive.n_rows / t_naive,
            "unit": "tokens/s",
            "vs_truncated": (t_naive / naive.n_rows) / (t_trunc / tokens),
            "vs_full": (t_naive / naive.n_rows) / (t_full / tokens),
        }
    )
    rows += [
        {"measure": "host syncs per batch, truncated forward alone", "value": syncs["forward"], "unit": "syncs"},
        {"measure": "host syncs per batch added by capture + moments", "value": syncs["capture"], "unit": "syncs"},
    ]
    for n in peak_tokens:
        peak = peak_memory(n, batch_size, seq_len, dev, shape, dtype, layers)
        rows.append({"measure": f"peak memory, capture + moments, {n} tokens", "value": peak / 2**20, "unit": "MiB"})
    table = pd.DataFrame(rows)
    table["shape"] = shape if layers is None else f"{shape}, first {layers} layers"
    table["dtype"] = str(torch_dtype).removeprefix("torch.")
    table["device"] = (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
        if dev.type == "cpu"
        else torch.cuda.get_device_name(dev)
    )
    table["tf32"] = (
        f"matmul {torch.backends.cuda.matmul.allow_tf32}, float32 precision {torch.get_float32_matmul_precision()}"
    )
    table["batch"] = f"{batch_size} × {seq_len}"
    table["timed_batches"] = n_batches
    table["tokens_timed"] = tokens
    table["torch"] = torch.__version__
    return table
