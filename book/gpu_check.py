"""The prepared GPU check: what the core costs and holds on one GPU, in one command for a bare machine.

``make gpu-check`` (or ``PYTHONPATH=src python3 book/gpu_check.py OUT``) needs python3 with torch, transformers,
pandas and safetensors and nothing else: no pip, no network, no tokenizer (the models are real shapes with seeded
random weights, the text random token ids). Each step is timed and its failure recorded, not fatal, and the results
go to ``OUT/gpu-check.json`` and ``OUT/gpu-check.md`` after every step (an interrupted check keeps what it measured):

1. ``cpu_vs_gpu``: a small model's table measured on the GPU and on the CPU, the largest difference of each column;
2. ``bench_gpt2``: ``linrec bench`` on the GPT-2 small shape (float32, CUDA events): capture + float64 moments
   against the bare and the truncated forward; ``bench_7b`` the same on the Pythia-6.9b shape's first 8 layers in
   bfloat16 (the bench holds every block's moments at once: all 32 do not fit the host of an H200 machine);
   ``grams`` the float64 products of one chunk of rows at the GPT-2 and the large shape's widths, as the core
   computes them and two other ways (which is fastest on the card: the moments' arithmetic is what the bench found
   slow there); ``layouts`` a block's chunk of rows added as a capture adds them, cast and shift included, in the
   accumulator's split layout and its one-product one (:mod:`linrec.core.accumulator`), at GPT-2's width and about it:
   where one product pays (the width up to which a GPU takes it); ``products`` the same chunk by each product scheme
   of :mod:`linrec.core.schemes` (``float32``, ``ozaki:S``), its time against float64's and its error, and by
   cuBLAS's own float64 emulation (``CUBLAS_EMULATE_DOUBLE_PRECISION=1``, in a process of its own) where torch's CUDA
   and the card allow it;
3. ``cuda_tests``: the test suite's GPU tests, where pytest is installed;
   ``profile``: where the planned capture's time goes, the large shape's first ``--profile-blocks`` blocks under
   torch.profiler, three times (the finished folds sent to pinned host memory as a fresh process meets it, that
   memory being allocated, then again; and kept on the GPU, as a table's plan keeps them where there is room): each
   run's wall time and the operators with the most self time on the device and on the host;
4. ``large``: the Pythia-6.9b shape in bfloat16 (``--large-dtype``), drawn on the GPU: the forward stopped after the
   last block, one float64 eigendecomposition at its width (a table row's unit of cost), the profile itself by plan
   (5 folds, the first position apart, at least 1e5 tokens; every block, or the first ``--large-blocks``): time, peak
   device and host memory, the plan's own figures beside them; then the planned capture of every block with its
   moments (no table, planned as the table's; CUDA events) against the forward, then with every extra, then with
   the products emulated (``ozaki:5``). Last,
   as the longest: what it measured is written as it comes, so a check stopped at its limit keeps it.

Where no CUDA device is visible it says so in one line and exits 1 before any work. ``--device cpu`` with small
settings runs the same steps on the host (how the test suite checks this script).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

try:
    import torch
except ImportError:  # before any work: one line, as for a machine without CUDA
    sys.exit(f"gpu-check: torch is not installed for {sys.executable}; run it with a python that has it (PYTHON=...)")

from linrec.core.accumulator import ONE_PRODUCT_WIDTH, MomentAccumulator, one_product  # noqa: E402
from linrec.core.capture import CaptureOptions  # noqa: E402
from linrec.core.cost import forward, random_batches, run_bench, seconds  # noqa: E402
from linrec.core.extras import EXTRAS  # noqa: E402
from linrec.core.moments import add_gram, symmetric  # noqa: E402
from linrec.core.plan import gigabytes, parse_memory  # noqa: E402
from linrec.core.planned import capture_groups, plan_for  # noqa: E402
from linrec.core.products import Products, add_float64, products_for  # noqa: E402
from linrec.data.tokens import TokenBatches  # noqa: E402
from linrec.models.loading import DTYPES, parse_dtype  # noqa: E402
from linrec.models.shapes import (  # noqa: E402 (the repository's own linrec, from src)
    bench_config,
    build_shaped,
    shaped_config,
)

LIMIT_S = 480
"""The check's own time limit: a step that would start after it is skipped (it is reported as such)."""


def host_peak() -> int:
    """The process's peak resident bytes so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_vs_gpu(device: torch.device, name: str, tokens: int) -> dict[str, Any]:
    """One small model's table on ``device`` and on the CPU, from the same weights and tokens."""
    import linrec

    model = build_shaped(name)
    batches = random_batches(tokens, 16, 128, model.config.vocab_size)
    on_cpu = linrec.measure(model, batches, progress=False)
    on_device = linrec.measure(model.to(device), batches, progress=False)
    numeric = [c for c in on_cpu.columns if on_cpu[c].dtype.kind == "f"]
    differences = {c: float((on_cpu[c] - on_device[c]).abs().max()) for c in numeric}
    return {
        "model": name,
        "tokens": batches.n_rows,
        "r2_lin_max_abs_difference": differences["r2_lin"],
        "largest_difference": max(differences.items(), key=lambda kv: kv[1]),
        "r2_lin_cpu": on_cpu.r2_lin.round(6).tolist(),
        "r2_lin_device": on_device.r2_lin.round(6).tolist(),
    }


def bench(
    device: torch.device, batches: int, shape: str = "gpt2-small", dtype: str = "float32", layers: int | None = None
) -> dict[str, Any]:
    """``linrec bench`` on ``shape`` (its first ``layers`` layers: the bench holds every block's moments at once, and
    a 7B shape's 32 do not fit a GPU machine's host): its rows (tokens/s and the ratios to the forward passes)."""
    table = run_bench(device=str(device), n_batches=batches, peak_tokens=(20_000,), shape=shape, dtype=dtype,
                      naive_batches=1 if shape == "pythia-6.9b" else 2, layers=layers)  # fmt: skip
    return {"rows": table[["measure", "value", "unit", "vs_truncated", "vs_full"]].to_dict("records"),
            "device": str(table.device.iloc[0]), "batch": str(table.batch.iloc[0])}  # fmt: skip


def grams(device: torch.device, widths: list[int], rows: int = 4096, repeats: int = 10) -> dict[str, Any]:
    """Tokens per second of the float64 product sums of one chunk of ``rows`` rows (X and Y of one width, already cast
    and shifted), three ways: as the core adds them (:func:`linrec.core.moments.add_gram`: XᵀX and YᵀY on and above
    the diagonal in column blocks; XᵀY whole), three whole products, and one product of [X | Y] with itself (more
    arithmetic in one large product; the cast could write X and Y into one buffer, so joining them is not counted).
    With the largest difference of their XᵀX sums, relative to its largest entry: the three ways agree."""
    out: dict[str, Any] = {"rows": rows}
    for width in widths:
        x, y = (torch.randn(rows, width, dtype=torch.float64, device=device) for _ in range(2))
        z = torch.cat([x, y], 1)
        core, whole = ([torch.zeros(width, width, dtype=torch.float64, device=device) for _ in range(3)] for _ in "ab")
        joined = torch.zeros(2 * width, 2 * width, dtype=torch.float64, device=device)
        ways: dict[str, Callable[[], object]] = {
            "core": lambda: (add_gram(core[0], x), core[1].addmm_(x.T, y), add_gram(core[2], y)),  # noqa: B023
            "whole": lambda: (whole[0].addmm_(x.T, x), whole[1].addmm_(x.T, y), whole[2].addmm_(y.T, y)),  # noqa: B023
            "joined": lambda: joined.addmm_(z.T, z),  # noqa: B023
        }
        for way, fn in ways.items():
            fn()  # warm-up: the library's workspace
            took = seconds(lambda: [fn() for _ in range(repeats)], device)  # noqa: B023 (called at once, here)
            out[f"{way}_{width}_tokens_per_s"] = rows * repeats / took
        xx = symmetric(core[0])
        differences = [(whole[0] - xx).abs().max(), (joined[:width, :width] - xx).abs().max()]
        out[f"largest_difference_{width}"] = float(max(differences) / xx.abs().max())
    return out


def layouts(device: torch.device, widths: list[int], rows: int = 4096, repeats: int = 20) -> dict[str, Any]:
    """Seconds per chunk of ``rows`` float32 rows of a block's X and Y (each of one width) as a capture adds them,
    cast and shifted included (:meth:`MomentAccumulator.add`), in the split layout and in the one-product one
    (:mod:`linrec.core.accumulator`), and how much faster the one product is (above 1: faster): where it pays sets
    :data:`linrec.core.accumulator.ONE_PRODUCT_WIDTH`, which the core uses now (``taken``)."""
    out: dict[str, Any] = {"rows": rows, "one_product_width": ONE_PRODUCT_WIDTH}
    for width in widths:
        x, y = (t.to(torch.float32) for t in shifted_chunk(device, rows, width))
        took = {}
        for joined in (False, True):
            acc = MomentAccumulator(width, width, device, joined=joined)
            acc.add(x, y)  # warm-up: the shift, the sums, the library's workspace
            took[joined] = seconds(lambda: [acc.add(x, y) for _ in range(repeats)], device) / repeats  # noqa: B023
        out[f"split_{width}_s"], out[f"one_product_{width}_s"] = took[False], took[True]
        out[f"one_product_{width}_vs_split"] = took[False] / took[True]
        out[f"taken_{width}"] = "one product" if one_product(device, width, width) else "split"
    return out


PRODUCTS = ("float64", "float32", "ozaki:3", "ozaki:4", "ozaki:5", "ozaki:6")
"""The schemes the ``products`` step times (:mod:`linrec.core.schemes`), float64 first: the reference."""


def shifted_chunk(device: torch.device, rows: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of (x, y) rows as the products get them: float64, shifted to about zero, features of scales 0.1 to 10;
    the same numbers in every process (a seeded generator on ``device``)."""
    g = torch.Generator(device=device).manual_seed(0)
    scale = torch.logspace(-1, 1, width, dtype=torch.float64, device=device)
    x, y = (torch.randn(rows, width, generator=g, dtype=torch.float64, device=device) * scale for _ in range(2))
    return x, y


def timed_products(
    add: Products, x: torch.Tensor, y: torch.Tensor, device: torch.device, repeats: int
) -> tuple[float, list[torch.Tensor]]:
    """Seconds per chunk of ``add``'s products of ``x`` and ``y`` (XᵀX's upper block triangle and XᵀY, as a capture
    sums them by default), and the sums of one chunk (the first call, which also warms the library up)."""
    sums = [torch.zeros(x.shape[1], w, dtype=torch.float64, device=device) for w in (x.shape[1], y.shape[1])]
    add(sums[0], sums[1], None, x, y)
    scratch = [torch.zeros_like(s) for s in sums]

    def chunks() -> None:
        for _ in range(repeats):
            add(scratch[0], scratch[1], None, x, y)

    return seconds(chunks, device) / repeats, sums


def relative_error(sums: list[torch.Tensor], exact: list[torch.Tensor]) -> float:
    """The largest error of XᵀX's upper triangle and of XᵀY, each relative to its largest entry."""
    pairs = [(sums[0].triu(), exact[0].triu()), (sums[1], exact[1])]
    return max(float((s - e).abs().max() / e.abs().max()) for s, e in pairs)


def products(device: torch.device, widths: list[int], rows: int = 4096, repeats: int = 3) -> dict[str, Any]:
    """Each scheme of :data:`PRODUCTS` on one chunk of ``rows`` shifted rows per width: seconds per chunk, the speed
    against float64 (above 1: faster) and the error against float64 (:func:`relative_error`); then cuBLAS's own float64
    emulation (:func:`cublas_emulation`)."""
    out: dict[str, Any] = {"rows": rows, "schemes": list(PRODUCTS)}
    exact: dict[int, tuple[float, list[torch.Tensor]]] = {}
    for width in widths:
        x, y = shifted_chunk(device, rows, width)
        for name in PRODUCTS:
            took, sums = timed_products(products_for(name), x, y, device, repeats)
            exact.setdefault(width, (took, sums))
            out[f"{name}_{width}_s"] = took
            out[f"{name}_{width}_vs_float64"] = exact[width][0] / took
            out[f"{name}_{width}_error"] = relative_error(sums, exact[width][1])
    out["cublas_emulation"] = cublas_emulation(device, widths, rows, repeats, exact)
    return out


def cublas_emulation(
    device: torch.device, widths: list[int], rows: int, repeats: int, exact: dict[int, tuple[float, list[torch.Tensor]]]
) -> dict[str, Any] | str:
    """cuBLAS's float64 emulation on the integer tensor cores (CUDA 13.0 update 2 on, compute capability 8.0 on) of
    the same chunks, in a process started with ``CUBLAS_EMULATE_DOUBLE_PRECISION=1`` (read before CUDA initialises),
    per strategy: ``performant`` (cuBLAS's default: it emulates where it finds that faster) and ``eager`` (wherever
    it can). Seconds, speed and error against this process's float64 as :func:`products` has them; where the sums
    are float64's bit for bit, cuBLAS did not emulate. "not available", with the reason, where it cannot run."""
    if device.type != "cuda":
        return "not available: no CUDA device (the check runs on the CPU)"
    if torch.version.cuda is None or int(torch.version.cuda.split(".")[0]) < 13:
        return (f"not available: torch {torch.__version__} is built for CUDA {torch.version.cuda}; cuBLAS emulates "
                "float64 from CUDA 13.0 update 2")  # fmt: skip
    major, minor = torch.cuda.get_device_capability(device)
    if major < 8:
        return f"not available: the card's compute capability is {major}.{minor}; cuBLAS emulates float64 from 8.0"
    cublas = {d.metadata["Name"]: d.version for d in metadata.distributions() if d.name.startswith("nvidia-cublas")}
    out: dict[str, Any] = {"cuda": torch.version.cuda, "cublas_packages": cublas}
    for strategy in ("performant", "eager"):
        env = {**os.environ, "CUBLAS_EMULATE_DOUBLE_PRECISION": "1", "CUBLAS_EMULATION_STRATEGY": strategy}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "sums.pt"
            code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import gpu_check; "
                    f"gpu_check.emulated_products({str(path)!r}, {widths!r}, {rows}, {repeats})")  # fmt: skip
            run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
            if run.returncode != 0:
                out[strategy] = f"failed: {run.stderr.strip()[-1000:]}"
                continue
            emulated = torch.load(path)
        out[strategy] = {}
        for width in widths:
            took, sums = emulated[width]
            same = all(torch.equal(s, e.cpu()) for s, e in zip(sums, exact[width][1], strict=True))
            out[strategy][str(width)] = {"s": took, "vs_float64": exact[width][0] / took,
                                         "error": relative_error(sums, [e.cpu() for e in exact[width][1]]),
                                         "emulated": not same}  # fmt: skip
    return out


def emulated_products(path: str, widths: list[int], rows: int, repeats: int) -> None:
    """Run by :func:`cublas_emulation` in a process whose environment asks cuBLAS to emulate float64: the float64
    products of :func:`products`' chunks timed, and their sums saved to ``path`` with the seconds."""
    device = torch.device("cuda")
    results = {}
    for width in widths:
        took, sums = timed_products(add_float64, *shifted_chunk(device, rows, width), device, repeats)
        results[width] = (took, [s.cpu() for s in sums])
    torch.save(results, path)


def large_shape(device: torch.device, name: str, tokens: int, dtype: torch.dtype) -> tuple[Any, TokenBatches, float]:
    """The large shape in ``dtype``, drawn on ``device`` (seconds on a GPU, minutes on its host), its random batches
    of at least ``tokens`` tokens, and the seconds the drawing took. First, what the steps before left in torch's
    caches (device memory, pinned host memory) is given back, so that a plan made next sees what a fresh process
    would, and pinned memory is allocated anew."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        memory = getattr(torch.accelerator, "memory", None)  # its empty_host_cache is new in 2026; before, torch 2.5 on
        empty_host = getattr(memory, "empty_host_cache", None) or getattr(torch._C, "_host_emptyCache", None)
        if empty_host is not None:
            empty_host()
    built = time.perf_counter()
    model = build_shaped(name, dtype=dtype, device=device)
    return model, random_batches(tokens, 16, 128, model.config.vocab_size), time.perf_counter() - built


def profile(
    device: torch.device, name: str, dtype: torch.dtype, tokens: int, memory: str | None, blocks: int, top: int = 12
) -> dict[str, Any]:
    """The large shape's planned capture of its first ``blocks`` blocks (moments, no table, no extras) under
    torch.profiler, three times: with the finished folds sent to pinned host memory (``first``, which allocates that
    memory, then ``second``, which finds it in torch's cache), and kept on the GPU as a table's plan keeps them
    (``kept``, where the budget has the room). Per run: the plan, the wall time and the ``top`` operators by self
    time on the device and on the host (seconds, calls): where the capture's twenty-fold excess over the forward
    goes, and what keeping the folds on the GPU saves of it."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiled

    model, batches, _ = large_shape(device, name, tokens, dtype)
    chosen, budget = list(range(blocks)), parse_memory(memory)
    sent, kept = (plan_for(model, batches, chosen, 5, memory=budget, table=table) for table in (False, True))
    assert sent is not None and kept is not None
    options = CaptureOptions(folds=5, seed=0, progress=False)
    runs = {"first": (sent, options), "second": (sent, options),
            "kept": (kept, replace(options, keep_on_gpu=kept.footprint.kept_on_gpu))}  # fmt: skip
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out: dict[str, Any] = {"model": name, "tokens": batches.n_rows}
    for run, (plan, how) in runs.items():
        with profiled(activities=activities) as prof:
            wall = seconds(lambda: [None for _ in capture_groups(model, batches, plan, how)], device)  # noqa: B023
        events = list(prof.key_averages())
        out[run] = {"plan": plan.describe(), "wall_s": wall, "host": _busiest(events, "self_cpu_time_total", top)}
        if device.type == "cuda":
            out[run]["device"] = _busiest(events, "self_device_time_total", top)
    return out


def _busiest(events: list[Any], attribute: str, top: int) -> list[dict[str, Any]]:
    """The ``top`` profiler events by ``attribute`` (microseconds): operator (a kernel's name cut to 160 characters),
    seconds, calls."""
    ranked = sorted(events, key=lambda e: getattr(e, attribute), reverse=True)[:top]
    return [{"op": e.key[:160], "self_s": getattr(e, attribute) / 1e6, "calls": e.count} for e in ranked]


def eigh_seconds(device: torch.device, width: int) -> float:
    """One float64 eigendecomposition of a width² symmetric matrix on ``device``: the unit of a table row's cost
    (a row takes about twenty of them, :func:`linrec.core.fit.kfold`)."""
    a = torch.randn(width, width, dtype=torch.float64, device=device)
    spd = a @ a.T / width
    torch.linalg.eigh(spd)  # warm-up: the solver's workspace
    return seconds(lambda: torch.linalg.eigh(spd), device)


def large(
    device: torch.device, name: str, dtype: torch.dtype, tokens: int, memory: str | None, blocks: int | None,
    record: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:  # fmt: skip
    """The large shape in ``dtype``: the forward, one float64 eigendecomposition at its width, the profile by plan
    (its first ``blocks`` blocks, None: every block), then the planned capture of every block with its moments (no
    table; planned as a table's, so the profile's time less this is its fits' when it covers every block) against
    the forward, without the extras (the default) and with all of them (:mod:`linrec.core.extras`: the whole output
    covariance, the residual-stream scores). What is measured is ``record``-ed as it
    comes, so a check stopped at its limit keeps it."""
    import linrec

    out: dict[str, Any] = {"model": name, "dtype": str(dtype).removeprefix("torch.")}

    def note(**values: Any) -> None:
        out.update(values)
        record(out)

    model, batches, build_s = large_shape(device, name, tokens, dtype)
    note(build_s=build_s, tokens=batches.n_rows)
    forward(model, random_batches(2048, 16, 128, model.config.vocab_size), truncated=True)  # warm-up
    note(truncated_forward_s=seconds(lambda: forward(model, batches, truncated=True), device))
    note(eigh_float64_s=eigh_seconds(device, model.config.hidden_size))
    chosen = None if blocks is None else list(range(blocks))
    plan = plan_for(model, batches, chosen, 5, memory=parse_memory(memory), table=True)  # as measure() plans
    assert plan is not None
    note(profile_blocks=sum(len(g) for g in plan.groups), plan=plan.describe(),
         planned_peak_host_gb=plan.peak_host / 1e9, planned_peak_device_gb=plan.peak_device / 1e9)  # fmt: skip
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    table = linrec.measure(model, batches, blocks=chosen, memory=plan, progress=False)
    note(
        profile_s=time.perf_counter() - start,
        peak_device_gb=torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None,
        peak_host_gb=host_peak() / 1e9,
        r2_lin={"min": float(table.r2_lin.min()), "median": float(table.r2_lin.median()),
                "max": float(table.r2_lin.max()), "blocks": len(table)},
    )  # fmt: skip
    every = plan_for(model, batches, None, 5, memory=parse_memory(memory), table=True)  # as measure() captures
    assert every is not None
    options = CaptureOptions(folds=5, seed=0, progress=False, keep_on_gpu=every.footprint.kept_on_gpu)
    capture = seconds(lambda: [None for _ in capture_groups(model, batches, every, options)], device)  # fmt: skip
    note(capture_plan=every.describe(), planned_capture_s=capture, peak_host_gb_after_capture=host_peak() / 1e9,
         capture_vs_truncated_forward=capture / out["truncated_forward_s"])  # fmt: skip
    extra = replace(options, extras=frozenset(EXTRAS))  # what the extras add (the layer linearity: 6 fits per block)
    capture = seconds(lambda: [None for _ in capture_groups(model, batches, every, extra)], device)  # fmt: skip
    note(planned_capture_all_extras_s=capture, all_extras_vs_truncated_forward=capture / out["truncated_forward_s"])
    emulated = replace(options, products="ozaki:5")  # int8 tensor cores for the float64 products (linrec.core.schemes)
    capture = seconds(lambda: [None for _ in capture_groups(model, batches, every, emulated)], device)  # fmt: skip
    note(planned_capture_ozaki5_s=capture, ozaki5_vs_truncated_forward=capture / out["truncated_forward_s"])
    return out


def cuda_tests() -> dict[str, Any]:
    """The test suite's GPU tests (those that skip without CUDA), where pytest is installed."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        return {"status": "not run: pytest is not installed on this machine"}
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if "cuda" in p.read_text())
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-k", "cuda or gpu or device", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.strip().splitlines()
    return {"files": files, "returncode": run.returncode, "summary": lines[-1:],
            "failed": [line for line in lines if line.startswith(("FAILED", "ERROR"))]}  # fmt: skip


def write(out: Path, results: dict[str, Any]) -> None:
    """The results as JSON and as a short Markdown page."""
    (out / "gpu-check.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lines = [f"# GPU check, {results['date']}", "", f"{results['device']}; torch {results['torch']}, transformers "
             f"{results['transformers']}; {results['elapsed_s']:.0f} s in all.", ""]  # fmt: skip
    for step, result in results["steps"].items():
        lines.append(f"## {step} ({result.get('seconds', 0):.0f} s)")
        lines.append("")
        lines.append("```")
        lines.append(json.dumps({k: v for k, v in result.items() if k != "seconds"}, indent=1, default=str))
        lines.append("```")
        lines.append("")
    (out / "gpu-check.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for gpu-check.json and gpu-check.md (made if missing)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu, to try the check itself")
    parser.add_argument("--large", default="EleutherAI/pythia-6.9b", help="the large shape (linrec.models.shapes)")
    parser.add_argument("--large-dtype", default="bfloat16", choices=list(DTYPES),
                        help="the large shape's weights and activations (float32 for a try on a CPU without bfloat16 "
                        "instructions, where its products are some 6 times slower)")  # fmt: skip
    parser.add_argument("--small", default="EleutherAI/pythia-160m", help="the shape measured on both devices")
    parser.add_argument("--small-tokens", type=int, default=20_480, help="tokens of the shape measured on both")
    parser.add_argument("--tokens", type=int, default=100_000, help="tokens of the large profile")
    parser.add_argument("--memory", help="the large shape's memory budget (--memory; default: what is free, as a "
                        "user's measurement plans by)")  # fmt: skip
    parser.add_argument("--large-blocks", type=int, help="profile only the large shape's first N blocks")
    parser.add_argument("--profile-blocks", type=int, default=8, help="blocks of the large shape the profile captures")
    parser.add_argument("--gram-rows", type=int, default=4096, help="rows of the chunk the grams and products steps "
                        "multiply")  # fmt: skip
    parser.add_argument("--bench-batches", type=int, default=20, help="batches linrec bench times per path")
    parser.add_argument("--steps", default="cpu_vs_gpu,bench_gpt2,grams,layouts,products,bench_7b,cuda_tests,profile,"
                        "large",
                        help="which steps, in order")  # fmt: skip
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: no CUDA device is visible here; run it on a machine with a GPU", file=sys.stderr)
        return 1
    device = torch.device(args.device)
    dtype = parse_dtype(args.large_dtype)
    args.out.mkdir(parents=True, exist_ok=True)
    import transformers

    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "steps": {},
    }
    steps: dict[str, Callable[[], dict[str, Any]]] = {
        "cpu_vs_gpu": lambda: cpu_vs_gpu(device, args.small, args.small_tokens),
        "bench_gpt2": lambda: bench(device, args.bench_batches),
        "bench_7b": lambda: bench(device, args.bench_batches, "pythia-6.9b", "bfloat16", layers=8),
        "grams": lambda: grams(
            device, [bench_config("gpt2-small").hidden_size, shaped_config(args.large).hidden_size], args.gram_rows
        ),
        "layouts": lambda: layouts(device, [256, bench_config("gpt2-small").hidden_size, 1024, 2048], args.gram_rows),
        "products": lambda: products(
            device, [bench_config("gpt2-small").hidden_size, shaped_config(args.large).hidden_size], args.gram_rows
        ),
        "profile": lambda: profile(device, args.large, dtype, args.tokens, args.memory, args.profile_blocks),
        "large": lambda: large(
            device, args.large, dtype, args.tokens, args.memory, args.large_blocks, partial("large")
        ),
        "cuda_tests": cuda_tests,
    }
    began = time.perf_counter()

    def partial(step: str) -> Callable[[dict[str, Any]], None]:
        """Write what ``step`` has measured so far (marked as still running)."""

        def record(values: dict[str, Any]) -> None:
            elapsed = time.perf_counter() - began
            results["steps"][step] = {"status": "running (stopped here if this stays)", **values, "seconds": elapsed}
            results["elapsed_s"] = elapsed
            write(args.out, results)

        return record

    for step in args.steps.split(","):
        if time.perf_counter() - began > LIMIT_S:
            results["steps"][step] = {"status": f"skipped: the check passed its {LIMIT_S} s"}
            continue
        start = time.perf_counter()
        try:
            result = {"status": "ok", **steps[step]()}
        except Exception as err:  # a step that fails is recorded, and the others still run
            result = {"status": f"failed: {type(err).__name__}: {err}", "traceback": traceback.format_exc()[-2000:]}
        result["seconds"] = time.perf_counter() - start
        results["steps"][step] = result
        results["elapsed_s"] = time.perf_counter() - began
        results["host_peak_gb"] = host_peak() / 1e9
        write(args.out, results)
        print(f"gpu-check: {step}: {result['status'][:200]} ({result['seconds']:.0f} s)", file=sys.stderr)
    print(f"gpu-check: wrote {args.out / 'gpu-check.md'} (peak host memory {gigabytes(host_peak())})")
    return 0 if all(r["status"].startswith(("ok", "skipped", "not run")) for r in results["steps"].values()) else 2


if __name__ == "__main__":
    sys.exit(main())
