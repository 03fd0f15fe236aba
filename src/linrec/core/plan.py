"""How a capture fits a memory budget: groups of blocks measured one after the other, planned before any work.

A capture holds, for every block it measures, float64 sums of width² for each fold (:mod:`linrec.core.accumulator`):
3 × 4096² × 8 bytes = 0.4 GB per block and fold at width 4,096, 64 GB for the 32 blocks and 5 folds of a 7B model.
So the plan measures the blocks in contiguous groups, each small enough for the budget, one after the other; a group
keeps only what its caller wants from it (table rows, or moments on disk) before the next starts. Each group resumes
from the residual stream the previous one stopped at (:mod:`linrec.core.resume`): the layers below it are not run
again, and the whole capture costs about one forward pass plus a copy of the stream per group. Where the decoder
layers cannot be found the plan says so and what it costs: each group then runs the model from its input.

Every figure is worked out from the model's configuration and the batches before any weights load, so a budget that
cannot work is refused first (:func:`plan_capture`), naming the smallest that would.

What a capture holds (the figures :class:`Footprint` adds up), per block, S being one fold's sums,
8 (d_in + d_out + d_in² + d_in d_out + d_out²) bytes:

- on the device that accumulates (a GPU, or the host): the live folds' sums, 2 S at most (a batch may end one fold
  and start the next), and each window's first row of X and Y until the group ends;
- on the host: each finished fold's moments, k S (on the CPU the live sums are in this memory too: (k + 2) S; from
  a GPU they are pinned, and each pinned allocation takes the power of two above its size, :func:`pinned_bytes`);
- while its table row is made (:func:`linrec.core.fit.recoverability` with ``consume``), on the device that
  accumulates: its k folds' moments and 4 S more, one block at a time (the layer-linearity sample's fits, likewise);
- or, where only the table is wanted and the GPU has the room (:attr:`Footprint.kept_on_gpu`), the finished folds
  stay on the GPU beside the live ones, (k + 1) S at most (a fold's sums and its moments meet as it closes), and
  the host holds none of them: no copy out to pinned memory and back for the fits, which run there;

and once for the capture: the weights, one batch's forward pass and, between groups, the residual stream twice (the
one a group resumes from and the one it keeps for the next), n_windows × seq_len × width at the model's dtype.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from linrec.core.extras import EXTRAS, OUTPUT_COVARIANCE, SCORES
from linrec.errors import LinrecError

if TYPE_CHECKING:  # torch is imported where it is used: parse_memory checks --memory before torch loads (a second)
    import torch

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip

FREE_SHARE = 0.85
"""The share of what is free that a plan takes when no budget is given: the rest is room for what it does not count
(the interpreter, the allocators' slack, the operating system's caches)."""

TABLE_WORK = 4
"""Sums of one fold (S) that making one block's table row holds beyond its own moments (module docstring)."""


def parse_memory(text: str | int | None) -> int | None:
    """Bytes from a size as a user writes it: ``12GB``, ``12 GiB``, ``800MB``, ``1.5G``, ``2e9``; None stays None
    (no budget: the device's free memory)."""
    if text is None or isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in _UNITS or float(match.group(1)) <= 0:
        raise LinrecError(
            f"cannot read the memory budget {text!r}: give a positive size such as 12GB, 12GiB, 800MB or 2e9 (bytes)"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def gigabytes(n: float) -> str:
    """``n`` bytes as a user reads them: 12.1 GB, 840 MB."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _rounded_up(n: int) -> str:
    """``n`` bytes rounded up to a size a user can type: 0.1 GB steps from 1 GB, whole MB below."""
    return f"{math.ceil(n / 1e8) / 10:.1f}GB" if n >= 1e9 else f"{math.ceil(n / 1e6)}MB"


def host_available() -> int:
    """Bytes of host memory available to a new allocation now (Linux's MemAvailable; the physical memory elsewhere)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def device_free(device: torch.device) -> int | None:
    """Free bytes on a GPU ``device`` now; None for the host (see :func:`host_available`)."""
    if device.type != "cuda":
        return None
    import torch

    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def sums_bytes(d_in: int, d_out: int, full_output: bool = True) -> int:
    """One fold's float64 sums (or centred moments) of a block: the S of the module docstring (``full_output=False``:
    Cyy's diagonal alone, as a capture without the ``output-covariance`` extra holds it). The one-product layout of a
    GPU's narrow blocks (:mod:`linrec.core.accumulator`) holds d_in + 1 numbers more, a row of its product."""
    return 8 * (d_in + d_out + d_in * d_in + d_in * d_out + (d_out * d_out if full_output else d_out))


def pinned_bytes(n: int) -> int:
    """What a pinned host allocation of ``n`` bytes takes: torch's caching host allocator, which serves
    ``pin_memory=True``, rounds every request up to a power of two (a finished fold's moments at width 4,096,
    403 MB, take 537 MB), so the plan counts what is taken, not what is asked."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def capture_bytes(width: int, blocks: int, folds: int, *, first_apart: bool = False, full_output: bool = True) -> int:
    """The float64 moments a finished capture holds for ``blocks`` blocks of ``width`` and ``folds`` folds (one
    :func:`sums_bytes` each); twice that with the first position of each window kept apart (its rows' moments beside
    the later rows', so that R²_lin with and without it can both be read)."""
    return (2 if first_apart else 1) * blocks * folds * sums_bytes(width, width, full_output)


def packed_bytes(d_in: int, d_out: int, full_output: bool = True) -> int:
    """One fold's moments on disk (:func:`linrec.core.moment_files.save_moments`: Cxx and Cyy as upper triangles, or
    Cyy's diagonal)."""
    yy = d_out * (d_out + 1) // 2 if full_output else d_out
    return 8 * (d_in + d_out + d_in * (d_in + 1) // 2 + d_in * d_out + yy)


@dataclass(frozen=True)
class Footprint:
    """What a capture of one model on one set of batches holds, in bytes, by what it is (module docstring)."""

    width: int  # d_in = d_out of every block (every supported family)
    blocks: int  # blocks measured
    layers: int  # the model's decoder layers
    folds: int
    weights_host: int  # the model's weights in host memory
    weights_device: int  # and on the GPU that accumulates (0 on the CPU)
    forward: int  # one batch's forward pass, at most (an estimate: activations, attention scores, float64 rows)
    first_rows: int  # per block: each window's first row of X and Y, at the model's dtype
    stream: int  # one residual stream over every batch, at the model's dtype
    on_gpu: bool  # sums live on a GPU, finished moments in host memory (unless kept_on_gpu)
    sample: int = 0  # per block: the layer-linearity sample of the residual stream (linrec.core.residual), float32
    kept_on_gpu: bool = False  # finished moments stay on the GPU (a table made there), none in host memory
    full_output: bool = True  # Cyy summed whole (the output-covariance extra), else its diagonal
    tails: int = 0  # per block: the pools of its largest output rows (linrec.core.tails), two parts, the model's dtype

    @property
    def sums(self) -> int:
        return sums_bytes(self.width, self.width, self.full_output)

    def host(self, group: int, groups: int, resumes: bool = True) -> int:
        """Peak host bytes with ``group`` blocks at a time in ``groups`` groups (the streams kept between them when
        they ``resume``)."""
        if self.on_gpu:  # finished folds and the sample's rows (x and y) in pinned memory, each rounded up
            folds = 0 if self.kept_on_gpu else self.folds * pinned_bytes(self.sums)
            per_block = folds + 2 * pinned_bytes(self.sample // 2) + self.first_rows
        else:
            per_block = (self.folds + 2) * self.sums + self.first_rows + self.sample + self.tails
        streams = 2 * self.stream if groups > 1 and resumes else 0
        forward = 0 if self.on_gpu else self.forward
        return self.weights_host + streams + forward + group * per_block + TABLE_WORK * self.sums

    def device(self, group: int) -> int:
        """Peak bytes on the GPU that accumulates (0 on the CPU, whose memory :meth:`host` counts)."""
        if not self.on_gpu:
            return 0
        held, moved = (self.folds + 1, 0) if self.kept_on_gpu else (2, self.folds)  # sums per block; folds brought in
        fits = (moved + TABLE_WORK) * self.sums + self.sample  # a block's table row and layer fit, made there
        return self.weights_device + self.forward + group * (held * self.sums + self.first_rows + self.tails) + fits

    def disk(self, saved: bool) -> int:
        """Bytes written to disk when the moments are kept (``saved``) and the capture runs in groups: every block's
        later rows' moments (the first rows stay in memory)."""
        return self.blocks * self.folds * packed_bytes(self.width, self.width, self.full_output) if saved else 0


def group_span(group: tuple[int, ...]) -> str:
    """A group of blocks as the plan names it: ``3-7``, or ``3`` for one block."""
    return f"{group[0]}-{group[-1]}" if len(group) > 1 else str(group[0])


def rerun_passes(groups: list[tuple[int, ...]] | tuple[tuple[int, ...], ...], layers: int) -> float:
    """The forward work, in whole passes over a model of ``layers`` layers, of ``groups`` that cannot resume: each
    runs the model from its input up to its deepest block."""
    return sum(g[-1] + 1 for g in groups) / layers


@dataclass(frozen=True)
class CapturePlan:
    """Groups of blocks measured one after the other, and what the capture then holds (:func:`plan_capture`)."""

    groups: tuple[tuple[int, ...], ...]
    resumes: bool  # each group starts from the residual stream the previous one stopped at
    forward_passes: float  # the forward work, in whole forward passes over the batches
    peak_host: int
    peak_device: int  # 0 when the host accumulates
    disk: int
    budget_host: int
    budget_device: int | None  # None when the host accumulates
    footprint: Footprint

    def describe(self) -> str:
        """The plan in a few lines, as the command prints it before any work."""
        sizes = sorted({len(g) for g in self.groups})
        spans = [group_span(g) for g in self.groups]
        if len(spans) > 6:
            spans = [*spans[:2], "…", spans[-1]]
        blocks = "/".join(map(str, sizes)) + (" block" if sizes == [1] else " blocks")
        count = f"{len(self.groups)} group{'s' * (len(self.groups) > 1)}"
        lines = [
            f"plan: {count} of {blocks} ({', '.join(spans)}); forward work {self.forward_passes:.2f} passes"
            + ("" if self.resumes or len(self.groups) == 1 else " (no decoder layers to resume from: each group runs "
               "the model from its input)"),
            f"  peak host memory {gigabytes(self.peak_host)} of {gigabytes(self.budget_host)}"
            + ("" if self.budget_device is None else
               f", device {gigabytes(self.peak_device)} of {gigabytes(self.budget_device)}")
            + (f"; {gigabytes(self.disk)} to disk" if self.disk else "; nothing to disk")
            + ("; finished folds kept on the GPU" if self.footprint.kept_on_gpu else ""),
        ]  # fmt: skip
        return "\n".join(lines)


def plan_capture(
    footprint: Footprint,
    blocks: list[int],
    budget: int | None = None,
    *,
    resumes: bool = True,
    saved: bool = False,
    table: bool = False,
    host_budget: int | None = None,
    device_budget: int | None = None,
) -> CapturePlan:
    """The fewest contiguous groups of ``blocks`` (in depth order, sizes as even as they can be) whose capture fits
    ``budget`` bytes in host memory and on the GPU that accumulates (each defaults to :data:`FREE_SHARE` of what is
    free there: ``host_budget``, ``device_budget``, else what is free now). A budget below what one block needs is
    a LinrecError naming the smallest that works. ``resumes``: whether a group can start from the stream the
    previous one stopped at (else each runs the layers below it again, and the plan says what that costs).
    ``saved``: the moments are written to disk. ``table``: only the table is wanted, so on a GPU the finished moments
    may stay there for its fits (:attr:`Footprint.kept_on_gpu`), as they do unless that takes more groups than
    sending them to the host."""
    if not blocks:
        raise LinrecError("no FFN blocks selected")
    free_host = host_budget if host_budget is not None else host_available()
    host_cap = budget if budget is not None else int(FREE_SHARE * free_host)
    device_cap = None
    if footprint.on_gpu:
        device_cap = budget if budget is not None or device_budget is None else int(FREE_SHARE * device_budget)
    n = len(blocks)
    ways = [replace(footprint, kept_on_gpu=True), footprint] if table and footprint.on_gpu else [footprint]

    def largest(fp: Footprint) -> int:
        """The largest group of ``fp``'s capture that fits (0: not even one block)."""

        def fits(group: int) -> bool:
            groups = math.ceil(n / group)
            return fp.host(group, groups, resumes) <= host_cap and (
                device_cap is None or fp.device(group) <= device_cap
            )

        return next((g for g in range(n, 0, -1) if fits(g)), 0)

    size, footprint = max(((largest(fp), fp) for fp in ways), key=lambda way: way[0])  # a tie: the first way
    if size == 0:
        raise _too_small(ways, n, resumes, host_cap, device_cap)
    count = math.ceil(n / size)
    base, extra = divmod(n, count)
    groups, start = [], 0
    for i in range(count):
        stop = start + base + (1 if i < extra else 0)
        groups.append(tuple(blocks[start:stop]))
        start = stop
    passes = (max(blocks) + 1) / footprint.layers if resumes or count == 1 else rerun_passes(groups, footprint.layers)
    return CapturePlan(
        groups=tuple(groups),
        resumes=resumes,
        forward_passes=passes,
        peak_host=footprint.host(size, count, resumes),
        peak_device=footprint.device(size),
        disk=footprint.disk(saved) if count > 1 else 0,
        budget_host=host_cap,
        budget_device=device_cap,
        footprint=footprint,
    )


def _too_small(ways: list[Footprint], n: int, resumes: bool, host_cap: int, device_cap: int | None) -> LinrecError:
    """The error of a budget too small for one block at a time of ``n`` blocks in any of ``ways``, naming the
    smallest budget that works (in the way that needs least)."""

    def needs(fp: Footprint) -> tuple[int, int]:  # (host, device) at its least demanding group size
        g = min(range(1, n + 1), key=lambda g: max(fp.host(g, math.ceil(n / g), resumes), fp.device(g)))
        return fp.host(g, math.ceil(n / g), resumes), fp.device(g)

    footprint = min(ways, key=lambda fp: max(needs(fp)))
    need_host, need_device = needs(footprint)
    need = max(need_host, need_device)
    where = "on the GPU" if footprint.on_gpu and need_device >= need_host else "in host memory"
    weights = footprint.weights_device if where == "on the GPU" else footprint.weights_host
    return LinrecError(
        f"a memory budget of {gigabytes(device_cap if where == 'on the GPU' and device_cap else host_cap)} "
        f"{where} is too small for one block at a time: the weights take {gigabytes(weights)}, one block's "
        f"moments {gigabytes(footprint.folds * footprint.sums)} ({footprint.folds} folds of width "
        f"{footprint.width}), a batch's forward about {gigabytes(footprint.forward)} and the kept residual "
        f"streams {gigabytes(2 * footprint.stream * resumes)}; the smallest budget that works is "
        f"--memory {_rounded_up(need)} (or fewer rows per batch: --batch-size)"
    )


def forward_bytes(config: object, batch_size: int, seq_len: int, dtype: torch.dtype) -> int:
    """An upper estimate of one batch's forward working memory with no LM head (the capture stops below it): a few
    copies of the hidden states and of the FFN's wide activations, the attention scores, and the batch's rows cast
    to float64 for the sums."""
    width = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0))
    wide = int(getattr(config, "intermediate_size", 0) or getattr(config, "n_inner", 0) or 4 * width)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0) or 1)
    tokens, size = batch_size * seq_len, dtype.itemsize
    activations = tokens * (6 * width + 3 * wide) * size
    scores = 2 * batch_size * heads * seq_len * seq_len * 4
    return activations + scores + tokens * 2 * width * 8


def weights_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """(bytes of ``model``'s parameters and buffers in host memory, bytes on GPUs)."""
    host = device = 0
    for t in [*model.parameters(), *model.buffers()]:
        n = t.numel() * t.element_size()
        if t.device.type == "cuda":
            device += n
        elif t.device.type != "meta":
            host += n
    return host, device


def config_weights_bytes(config: object, dtype: torch.dtype) -> int:
    """The bytes ``config``'s model will take at ``dtype``, counted on a model built without memory (the meta
    device), so before any weights load."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    with torch.device("meta"):
        try:
            net = AutoModelForCausalLM.from_config(config)
        except ValueError:  # an encoder (BERT-style): no causal head
            net = AutoModel.from_config(config)
    return sum(p.numel() for p in net.parameters()) * dtype.itemsize


def sample_rows(width: int) -> int:
    """Rows per block of the layer-linearity sample (:class:`linrec.core.residual.ResidualSink`): at least 4,096,
    and four times the width, so that each fold's fit holds over three rows per input dimension."""
    return max(4096, 4 * width)


def _stream_bytes(windows: int, seq_len: int, width: int, size: int, batch_size: int, on_gpu: bool) -> int:
    """One residual stream over every window, as :mod:`linrec.core.resume` keeps it: a pinned allocation per batch
    from a GPU (:func:`pinned_bytes`), else its plain size."""
    if not on_gpu:
        return windows * seq_len * width * size
    full, rest = divmod(windows, batch_size)
    return full * pinned_bytes(batch_size * seq_len * width * size) + pinned_bytes(rest * seq_len * width * size)


def footprint(
    config: object,
    *,
    blocks: int,
    folds: int,
    windows: int,
    seq_len: int,
    batch_size: int,
    dtype: torch.dtype,
    on_gpu: bool,
    weights: tuple[int, int],
    extras: frozenset[str] = frozenset(EXTRAS),
) -> Footprint:
    """The :class:`Footprint` of capturing ``blocks`` blocks of ``config``'s model over ``windows`` windows of
    ``seq_len`` tokens, ``batch_size`` at a time, its weights (host bytes, GPU bytes) at ``dtype``, with ``extras``
    (:mod:`linrec.core.extras`; by default all, the most a capture holds)."""
    from linrec.core.tails import pool_rows  # (torch's: this module loads without it)

    width = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0))
    layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or blocks)
    size = dtype.itemsize
    return Footprint(
        width=width,
        blocks=blocks,
        layers=layers,
        folds=folds,
        weights_host=weights[0],
        weights_device=weights[1],
        forward=forward_bytes(config, batch_size, seq_len, dtype),
        first_rows=windows * 2 * width * size,
        tails=2 * pool_rows(windows * seq_len) * width * size,
        stream=_stream_bytes(windows, seq_len, width, size, batch_size, on_gpu),
        on_gpu=on_gpu,
        sample=min(windows * seq_len, sample_rows(width)) * 2 * width * 4 if SCORES in extras else 0,
        full_output=OUTPUT_COVARIANCE in extras,
    )
