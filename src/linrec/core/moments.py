"""Float64 sufficient statistics of (X, Y) rows: everything the closed-form fit and R² need.

Rows are never kept. Each :class:`Moments` holds the row count, the means and the *centred*
sums of products (Cxx = Σ (x-x̄)(x-x̄)ᵀ, and likewise Cxy, Cyy). Centring each chunk about its
own mean and merging chunks with Chan's pairwise update keeps cancellation from eating
precision even when a few residual-stream dimensions are hundreds of times larger than the
rest. Memory is O(d²) whatever the number of rows, and moments of disjoint streams add with
``+``; they also save to safetensors and all-reduce across processes.

All products run in float64, so TF32 (a float32-only mode) and bf16 never touch them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from linrec.errors import LinrecError

_FIELDS = ("mean_x", "mean_y", "cxx", "cxy", "cyy")


@dataclass
class Moments:
    """Row count, means and centred product sums of a stream of (x, y) rows."""

    n: int
    mean_x: torch.Tensor
    mean_y: torch.Tensor
    cxx: torch.Tensor
    cxy: torch.Tensor
    cyy: torch.Tensor

    @classmethod
    def zeros(cls, d_in: int, d_out: int, device: torch.device | str = "cpu") -> Moments:
        """The moments of no rows: the identity of ``+``."""
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        return cls(0, z(d_in), z(d_out), z(d_in, d_in), z(d_in, d_out), z(d_out, d_out))

    @classmethod
    def from_rows(cls, x: torch.Tensor, y: torch.Tensor) -> Moments:
        """Moments of the rows of ``x`` (n, d_in) and ``y`` (n, d_out), computed in float64."""
        if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
            raise LinrecError(
                f"expected x (n, d_in) and y (n, d_out) with equal n; got {tuple(x.shape)} and {tuple(y.shape)}"
            )
        x = x.detach().to(torch.float64)
        y = y.detach().to(torch.float64)
        n = x.shape[0]
        if n == 0:
            return cls.zeros(x.shape[1], y.shape[1], x.device)
        mean_x, mean_y = x.mean(0), y.mean(0)
        xc, yc = x - mean_x, y - mean_y
        return cls(n, mean_x, mean_y, xc.T @ xc, xc.T @ yc, yc.T @ yc)

    @property
    def d_in(self) -> int:
        return self.mean_x.shape[0]

    @property
    def d_out(self) -> int:
        return self.mean_y.shape[0]

    def __add__(self, other: Moments) -> Moments:
        """Moments of the union of both streams (Chan et al.'s pairwise merge)."""
        if (self.d_in, self.d_out) != (other.d_in, other.d_out):
            raise LinrecError(
                f"cannot merge moments of widths {(self.d_in, self.d_out)} and {(other.d_in, other.d_out)}"
            )
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        n = self.n + other.n
        dx = other.mean_x - self.mean_x
        dy = other.mean_y - self.mean_y
        w = self.n * other.n / n
        return Moments(
            n=n,
            mean_x=self.mean_x + dx * (other.n / n),
            mean_y=self.mean_y + dy * (other.n / n),
            cxx=self.cxx + other.cxx + w * torch.outer(dx, dx),
            cxy=self.cxy + other.cxy + w * torch.outer(dx, dy),
            cyy=self.cyy + other.cyy + w * torch.outer(dy, dy),
        )

    def to(self, device: torch.device | str) -> Moments:
        return Moments(self.n, *(getattr(self, f).to(device) for f in _FIELDS))

    def flat(self) -> torch.Tensor:
        """All fields in one float64 vector (count first), for collective communication."""
        n = torch.tensor([float(self.n)], dtype=torch.float64, device=self.mean_x.device)
        return torch.cat([n] + [getattr(self, f).reshape(-1) for f in _FIELDS])

    @staticmethod
    def flat_size(d_in: int, d_out: int) -> int:
        """Length of :meth:`flat` for these widths."""
        return 1 + d_in + d_out + d_in * d_in + d_in * d_out + d_out * d_out

    @classmethod
    def from_flat(cls, v: torch.Tensor, d_in: int, d_out: int) -> Moments:
        """The moments :meth:`flat` wrote into ``v`` (views of it, not copies)."""
        shapes = [(d_in,), (d_out,), (d_in, d_in), (d_in, d_out), (d_out, d_out)]
        parts, i = [], 1
        for s in shapes:
            size = math.prod(s)
            parts.append(v[i : i + size].reshape(s))
            i += size
        return cls(int(round(v[0].item())), *parts)


def _gram_pieces(d: int) -> list[tuple[int, int]]:
    """Column ranges for :func:`add_gram`: up to 4, each at least 64 wide (narrower ones cost more than they save)."""
    k = max(1, min(4, d // 64))
    bounds = [d * i // k for i in range(k + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def add_gram(out: torch.Tensor, a: torch.Tensor) -> None:
    """Add aᵀa to the upper block triangle of ``out`` (d, d): the blocks on and above the diagonal.

    aᵀa is symmetric, so the blocks below the diagonal are never computed (with 4 column blocks,
    10 of 16 block products: about 40 % less arithmetic than one full product, measured on CPU);
    :func:`symmetric` rebuilds the whole matrix from the upper triangle. torch has no SYRK.
    """
    for lo, hi in _gram_pieces(a.shape[1]):
        out[lo:hi, lo:].addmm_(a[:, lo:hi].T, a[:, lo:])


@functools.cache
def _on_or_above_diagonal(d: int, device: torch.device) -> torch.Tensor:
    return torch.ones(d, d, dtype=torch.bool, device=device).triu()


def symmetric(upper: torch.Tensor) -> torch.Tensor:
    """The symmetric matrix whose upper triangle (diagonal included) is that of ``upper`` (one pass over it)."""
    return torch.where(_on_or_above_diagonal(upper.shape[0], upper.device), upper, upper.T)


class MomentAccumulator:
    """Streams rows into float64 sums about one fixed shift, in place, for ``folds`` disjoint row sets.

    The shifted-data algorithm: with K close to the mean, Σ(x-K)(x-K)ᵀ - n(x̄-K)(x̄-K)ᵀ loses
    almost nothing to cancellation, and each chunk costs one in-place product per sum with no
    per-chunk O(d²) merge. The shift is the mean of the first rows and is shared by every fold, so
    a chunk holding several folds is cast and shifted once (one fused kernel per operand) and each
    fold's rows are a slice of it. Nothing here reads a device value on the host: a chunk's row
    count is the host's own integer, so a GPU never waits. :meth:`moments` converts to centred
    :class:`Moments`.
    """

    def __init__(self, d_in: int, d_out: int, device: torch.device | str = "cpu", folds: int = 1) -> None:
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        self.n = [0] * folds
        self.shift_x: torch.Tensor | None = None
        self.shift_y: torch.Tensor | None = None
        self.sx, self.sy = z(folds, d_in), z(folds, d_out)
        self.sxx, self.sxy, self.syy = z(folds, d_in, d_in), z(folds, d_in, d_out), z(folds, d_out, d_out)

    def shifted(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x - Kx, y - Ky) in float64, each one fused cast-and-subtract; the first call sets K to its rows' mean."""
        if self.shift_x is None or self.shift_y is None:  # the first rows: both are set together
            self.shift_x = x.detach().mean(0, dtype=torch.float64)
            self.shift_y = y.detach().mean(0, dtype=torch.float64)
        return torch.sub(x.detach(), self.shift_x), torch.sub(y.detach(), self.shift_y)

    def add_shifted(self, xs: torch.Tensor, ys: torch.Tensor, fold: int = 0) -> None:
        """Merge rows already returned by :meth:`shifted` into ``fold``."""
        self.n[fold] += xs.shape[0]
        self.sx[fold] += xs.sum(0)
        self.sy[fold] += ys.sum(0)
        add_gram(self.sxx[fold], xs)
        self.sxy[fold].addmm_(xs.T, ys)
        add_gram(self.syy[fold], ys)

    def add(self, x: torch.Tensor, y: torch.Tensor, fold: int = 0) -> None:
        """Merge the rows of ``x`` (n, d_in) and ``y`` (n, d_out), cast to float64, into ``fold``."""
        if x.shape[0] == 0:
            return
        self.add_shifted(*self.shifted(x, y), fold)

    def finite(self) -> torch.Tensor:
        """A device bool scalar: whether every row so far was finite (a NaN or Inf makes its fold's sums so)."""
        return torch.isfinite(self.sx).all() & torch.isfinite(self.sy).all()

    def moments(self, fold: int = 0) -> Moments:
        """The centred moments of everything added to ``fold`` so far."""
        n = self.n[fold]
        if n == 0:
            return Moments.zeros(self.sx.shape[1], self.sy.shape[1], self.sx.device)
        assert self.shift_x is not None and self.shift_y is not None  # set by the first add of rows
        mx, my = self.sx[fold] / n, self.sy[fold] / n
        return Moments(
            n,
            self.shift_x + mx,
            self.shift_y + my,
            symmetric(torch.addr(self.sxx[fold], mx, mx, alpha=-n)),
            torch.addr(self.sxy[fold], mx, my, alpha=-n),
            symmetric(torch.addr(self.syy[fold], my, my, alpha=-n)),
        )


BlockMoments = dict[int, list[Moments]]
"""Moments per block index, one entry per fold (rows go to folds by sequence)."""


def merge_folds(folds: list[Moments]) -> Moments:
    """The moments of all folds together."""
    total = folds[0]
    for m in folds[1:]:
        total = total + m
    return total


def to_host(moments: BlockMoments) -> BlockMoments:
    """``moments`` on the CPU. From a GPU: packed into one vector there and copied once into pinned memory,
    one transfer instead of a blocking copy into fresh pageable memory per tensor (five per fold and block)."""
    every = [m for folds in moments.values() for m in folds]
    if not every or every[0].mean_x.device.type != "cuda":
        return {b: [m.to("cpu") for m in folds] for b, folds in moments.items()}
    packed = torch.cat([m.flat().to(every[0].mean_x.device) for m in every])  # blocks may sit on several GPUs
    host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
    host.copy_(packed, non_blocking=True)
    torch.cuda.synchronize(packed.device)
    return unpack(host, {b: [(m.d_in, m.d_out) for m in folds] for b, folds in moments.items()})


def unpack(packed: torch.Tensor, widths: dict[int, list[tuple[int, int]]]) -> BlockMoments:
    """Moments per block and fold from the concatenated :meth:`Moments.flat` vectors of ``widths``' folds, in order."""
    out: BlockMoments = {}
    start = 0
    for block, folds in widths.items():
        out[block] = []
        for d_in, d_out in folds:
            size = Moments.flat_size(d_in, d_out)
            out[block].append(Moments.from_flat(packed[start : start + size], d_in, d_out))
            start += size
    return out


def save_moments(moments: BlockMoments, path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Write per-block, per-fold moments to one safetensors file (metadata: free-form strings)."""
    tensors = {}
    for block, folds in moments.items():
        for f, m in enumerate(folds):
            key = f"{block}.{f}"
            tensors[f"{key}.n"] = torch.tensor([m.n], dtype=torch.int64)
            for name in _FIELDS:
                tensors[f"{key}.{name}"] = getattr(m, name).detach().cpu().clone()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=metadata or {})


def load_moments(path: str | Path, blocks: Iterable[int] | None = None) -> BlockMoments:
    """Read what :func:`save_moments` wrote: every block, or only ``blocks`` (the rest is never read)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        names = list(f.keys())
        wanted = None if blocks is None else set(blocks)
        keys = sorted({tuple(int(p) for p in k.split(".")[:2]) for k in names})
        out: BlockMoments = {}
        for block, fold in keys:
            if wanted is not None and block not in wanted:
                continue
            key = f"{block}.{fold}"
            n = int(f.get_tensor(f"{key}.n").item())
            out.setdefault(block, []).append(Moments(n, *(f.get_tensor(f"{key}.{name}") for name in _FIELDS)))
    return out


def saved_blocks(path: str | Path) -> list[int]:
    """The blocks a file written by :func:`save_moments` or :func:`linrec.core.sample.save_rows` holds
    (read from its header only)."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return sorted({int(k.split(".")[0]) for k in f.keys()})


def all_reduce_moments(moments: BlockMoments) -> BlockMoments:
    """Merge every process's moments (torch.distributed must be initialised); all ranks get the result.

    Moments are gathered and merged in rank order with Chan's update rather than summed as raw
    sums, so the merged result is as precise as a single process's.
    """
    import torch.distributed as dist

    world = dist.get_world_size()
    out: BlockMoments = {}
    for block in sorted(moments):
        merged = []
        for m in moments[block]:
            v = m.flat()
            gathered = [torch.empty_like(v) for _ in range(world)]
            dist.all_gather(gathered, v)
            merged.append(merge_folds([Moments.from_flat(g, m.d_in, m.d_out) for g in gathered]))
        out[block] = merged
    return out
